// ActorState: named buffers a sub-model keeps on a worker between its tasks.
//
// Thread-safety: thread-safe; every member may be called from any lane at
// once (one mutex guards the map). Buffers handed out by Get() are
// immutable snapshots that stay valid after a later Put() or Erase().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/worker/export.h"

namespace hmpmd::worker {

/// The state of one sub-model (an actor in Ray's sense) on one worker: a
/// map from names to Buffers, e.g. the weights and their version.
///
/// A worker keeps one ActorState per (job, sub-model) it has run tasks of;
/// a kernel reaches the one of its task through KernelArgs::state(). Later
/// tasks of the same sub-model of the same job that run on this worker see
/// what earlier ones stored, whatever lane they run on. The state is freed
/// when the controller frees or cancels the job. It lives in the worker's
/// memory and does not count against the object store's cap (memory_mb).
///
/// When the controller runs a task of a stateful sub-model of a submitted
/// job on a worker that lacks its state while another worker has it, the
/// worker loads it from that one first (Export there, Install here, over
/// the data plane): the kernel finds what the holder had. The first worker
/// to run the sub-model makes it. If every worker holding a state dies,
/// it is gone (docs/scheduling.md#live-state).
///
/// @code
///   // A kernel that loads weights into its actor, and one that uses them.
///   worker.RegisterKernel("load", [](const hmpmd::worker::KernelArgs& args,
///                                    std::span<const hmpmd::Buffer> inputs) {
///     if (inputs.empty()) throw std::invalid_argument("load: needs the weights");
///     args.state().Put("weights", inputs[0]);
///     return std::vector<hmpmd::Buffer>{};
///   });
///   worker.RegisterKernel("infer", [](const hmpmd::worker::KernelArgs& args,
///                                     std::span<const hmpmd::Buffer>) {
///     std::shared_ptr<const hmpmd::Buffer> w = args.state().Get("weights");
///     if (w == nullptr) throw std::runtime_error("infer: no weights loaded on this worker");
///     return std::vector<hmpmd::Buffer>{*w};
///   });
///   // Read-modify-write under the state's lock, e.g. a version counter:
///   //   args.state().Update("version", [](hmpmd::Buffer& b) { ... });
/// @endcode
class HMPMD_WORKER_EXPORT ActorState {
 public:
  ActorState() = default;
  ActorState(const ActorState&) = delete;
  ActorState& operator=(const ActorState&) = delete;

  /// Stores `value` under `name`, replacing what was there.
  void Put(std::string name, Buffer value);

  /// The buffer stored under `name`, or nullptr when there is none. The
  /// snapshot stays valid (and unchanged) after a later Put() or Erase().
  std::shared_ptr<const Buffer> Get(std::string_view name) const;

  /// Removes `name`; returns false when it was absent.
  bool Erase(std::string_view name);

  /// Runs `fn` on the buffer under `name` (an empty Buffer, dtype "f32" and
  /// no shape, when absent) while holding the state's lock, then stores the
  /// result: a read-modify-write no other lane interleaves with. `fn` must
  /// not call this ActorState. If `fn` throws, nothing is stored and the
  /// exception propagates.
  void Update(std::string name, const std::function<void(Buffer&)>& fn);

  /// The names stored, sorted.
  std::vector<std::string> Names() const;

  /// Bytes of data held (the sum of the buffers' data sizes).
  uint64_t bytes() const;

  /// Keeps `object` under `name`, beside the buffers and apart from them:
  /// a value of the embedding program's own kind, kept and freed with this
  /// state (the Python worker keeps each sub-model's Python object here).
  /// Its deleter runs on the thread that drops the last reference, which may
  /// be the worker's I/O thread freeing the job, so it must not block.
  /// Objects count in neither Names() nor bytes().
  ///
  /// `exporter` turns the object into bytes when another worker loads this
  /// state (on this worker's data thread); there, TakeLoadedObject hands
  /// the bytes back for the embedding program to make the object again.
  /// A state holding an object without one cannot be loaded elsewhere.
  using ObjectExporter = std::function<Result<Buffer>(const std::shared_ptr<void>&)>;
  void PutObject(std::string name, std::shared_ptr<void> object, ObjectExporter exporter = {});
  /// The object stored under `name` by PutObject, or nullptr.
  std::shared_ptr<void> GetObject(std::string_view name) const;
  /// The bytes of object `name` as this state was loaded from another
  /// worker (its exporter's), removed here; nullopt when there are none.
  std::optional<Buffer> TakeLoadedObject(std::string_view name);

  /// Every buffer and object, for another worker's Install: a first
  /// buffer naming the rest (u8: a kind byte, 'v' value or 'o' object,
  /// then the name and a NUL, per entry), then each in that order. Values
  /// are the stored snapshots themselves (no copy); objects are their
  /// exporters' bytes. InvalidArgument naming an object kept without an
  /// exporter, or the exporter's error.
  Result<std::vector<std::shared_ptr<const Buffer>>> Export() const;
  /// Takes what Export made elsewhere into this state, which must be empty
  /// (Corruption when `exported` is malformed, AlreadyExists when not
  /// empty: a lane made it meanwhile, and it stays as it is).
  Status Install(std::vector<Buffer> exported);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Buffer>, std::less<>> values_;  // guarded by mu_
  uint64_t bytes_ = 0;                                                        // guarded by mu_
  struct Object {
    std::shared_ptr<void> value;
    ObjectExporter exporter;
  };
  std::map<std::string, Object, std::less<>> objects_;  // guarded by mu_
  std::map<std::string, Buffer, std::less<>> loaded_;   // guarded by mu_: TakeLoadedObject's
};

}  // namespace hmpmd::worker
