#include "hmpmd/http/thread_priority.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace hmpmd {

bool SetThisThreadPriority(int nice, bool idle) {
  if (idle) {
    sched_param p{};
    return pthread_setschedparam(pthread_self(), SCHED_IDLE, &p) == 0;
  }
  if (nice == 0) return true;
  return setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice) == 0;
}

}  // namespace hmpmd
