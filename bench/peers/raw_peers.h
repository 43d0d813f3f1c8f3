// RawPeers: the raw-ZeroMQ baseline of bench/peers. The bench process binds a
// ROUTER on loopback and two child processes connect DEALERs to it; nothing
// is scheduled, serialised or run, so what it measures is the transport alone.
//
//  - Independent(n): the ROUTER sends n task ids (8 bytes each) in batches
//    of `batch` ids per message, alternating between the two peers, with at
//    most `window` batches outstanding per peer; each peer sends every batch
//    straight back as "done". Seconds from the first send to the last reply.
//  - Chain(n): n sequential round trips of one 64-byte message to one peer
//    (send, wait for the reply, send the next). Seconds for all n.
//
// Thread-safety: one owner thread. Start() forks, so call it before this
// process starts any thread or ZeroMQ context.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace hmpmd {

class RawPeers {
 public:
  RawPeers();
  ~RawPeers();
  RawPeers(const RawPeers&) = delete;
  RawPeers& operator=(const RawPeers&) = delete;

  // Forks `peers` children and waits until each has said hello. False on
  // any failure (the children started are stopped).
  bool Start(int peers = 2);
  // Stops the children by PID.
  void Stop();

  // Seconds, or a negative number if a peer went silent for 5 s.
  double Independent(int n, int batch, int window);
  double Chain(int n);

 private:
  struct Zmq;
  std::unique_ptr<Zmq> zmq_;
  std::vector<pid_t> children_;
  std::vector<std::string> identities_;
};

}  // namespace hmpmd
