// Small value types shared by every part: ids, core kinds, kernel arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

using JobId = uint32_t;
using WorkerId = uint32_t;
// Microseconds; virtual in the simulator, since controller start when live.
using TimeUs = int64_t;

// The kinds of core inside one device. Work on different kinds of one
// device runs at the same time (matrix work beside communication).
enum class CoreKind : uint8_t { kCube = 0, kVector = 1 };
inline constexpr int kNumCoreKinds = 2;

std::string_view CoreKindName(CoreKind kind);
std::optional<CoreKind> ParseCoreKind(std::string_view name);

// A device's core list as the command lines spell it, "cube=1,vector=2": a
// kind left out has no cores; counts are integers in [0, kMaxCoresPerKind]
// and at least one core in total. Errors are one line naming the item.
inline constexpr uint32_t kMaxCoresPerKind = 256;
struct CoreCounts {
  uint32_t count[kNumCoreKinds] = {};
};
Result<CoreCounts> ParseCoreCounts(std::string_view text);

// A ZeroMQ endpoint as the command lines take it: tcp://HOST:PORT with PORT
// in [1, 65535] (or, to `bind`, 0 or `*`: any free port), or ipc://PATH.
// ZeroMQ itself binds an out-of-range port to a random one instead of
// refusing it.
Status CheckEndpoint(std::string_view endpoint, bool bind);

// Kernel arguments are flat name -> scalar maps, in the order the spec gave.
using ArgValue = std::variant<int64_t, double, bool, std::string>;
struct Arg {
  std::string name;
  ArgValue value;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(name, value);
  }
  friend bool operator==(const Arg&, const Arg&) = default;
};
using Args = std::vector<Arg>;

// The named argument as a number, or `fallback` when absent or not numeric.
double ArgNumber(const Args& args, std::string_view name, double fallback);

// Kernels every worker ships with (docs/data-plane.md, "Embedding the worker").
inline constexpr std::string_view kBuiltinKernels[] = {
    "noop", "spin",      "sleep",     "gemm",           "add",      "scale",
    "send", "allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast"};

// The kernel of a driver's put (Client::Put): every worker runs it, though
// it is not in kBuiltinKernels (a job spec has no use for it). Its run
// fetches the put's data from the driver's data socket (args `endpoint`,
// `put`: the put's id there; `bytes`: its size) and keeps it as its output.
inline constexpr std::string_view kPutKernel = "hmpmd.put";

// True for kernels whose time is communication, not compute: they count
// towards the communication masking ratio.
bool IsCommKernel(std::string_view kernel);
// True for the collective kernels, which run as a gang.
bool IsCollectiveKernel(std::string_view kernel);

// A random 64-bit id, never 0 (0 means "not given" on the wire): the
// controller's store epoch, a worker process's instance. The clock is mixed
// in for a std::random_device that is deterministic on some platforms.
uint64_t RandomId();

}  // namespace hmpmd
