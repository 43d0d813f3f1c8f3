// How the controller's helper threads (HTTP server, formatting) give way to
// the scheduler loop and the workers on a small machine.
// Thread-safety: SetThisThreadPriority() changes the calling thread only.
#pragma once

namespace hmpmd {

// Sets the calling thread's nice value (Linux: per thread; raising it needs
// no privilege), or, with `idle`, the SCHED_IDLE policy: the thread then
// runs only on CPU time no normal thread wants and is preempted at once when
// one wakes up. Best effort: false when the OS refused (the thread keeps its
// priority). nice 0 without `idle` changes nothing.
bool SetThisThreadPriority(int nice, bool idle);

}  // namespace hmpmd
