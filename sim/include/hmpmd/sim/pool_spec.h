// PoolSpec: the model of a supernode the simulator runs on (and the shape
// the live controller's pool has): nodes of devices, cores per kind with
// their throughput, device memory, and three link tiers.
//
// The JSON form is parsed by the CLI (cli/sim_command.cc); this
// header holds only the model, a generator of common shapes and the
// communication cost formulas.
// Thread-safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/cost_model.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

// Same device (on-chip copy), same node (intra-node links), supernode fabric.
enum class LinkTier : uint8_t { kDevice = 0, kNode = 1, kFabric = 2 };
inline constexpr int kNumLinkTiers = 3;
std::string_view LinkTierName(LinkTier tier);

struct LinkSpec {
  double bytes_per_us = 0;  // bandwidth
  double latency_us = 0;    // per message / per algorithm step
};

// Labels for a range of devices, first to last inclusive, counted in node
// order (device d of node n is n * devices_per_node + d).
struct DeviceLabels {
  uint32_t first = 0;
  uint32_t last = 0;
  Labels labels;
};

struct PoolSpec {
  std::string name = "supernode";
  uint32_t nodes = 1;             // at least 1
  uint32_t devices_per_node = 8;  // at least 1
  // Cores per device by kind (cube, vector). Default: 1 cube, 1 vector: one
  // compute stream and one communication stream per device.
  std::array<uint32_t, kNumCoreKinds> cores{1, 1};
  // Flops per us of one core by kind. Defaults: 2.5e8 cube (250 TFLOP/s,
  // an accelerator's matrix unit) and 2.5e7 vector.
  std::array<double, kNumCoreKinds> flops_per_us{2.5e8, 2.5e7};
  uint64_t memory_mb = 65536;  // per device
  // Link tiers by LinkTier. Defaults: 1.6e6 B/us and 0.5 us on the device,
  // 5.6e4 B/us (56 GB/s) and 2 us in a node, 2.5e4 B/us (25 GB/s) and 5 us
  // over the fabric.
  std::array<LinkSpec, kNumLinkTiers> links{LinkSpec{1.6e6, 0.5}, LinkSpec{5.6e4, 2},
                                            LinkSpec{2.5e4, 5}};

  // Labels by device range (a heterogeneous pool: two accelerator kinds).
  // Ranges may overlap; a device has the labels of every range it is in,
  // and two ranges giving one device a key with different values are
  // refused. Default: none.
  std::vector<DeviceLabels> device_labels;

  uint32_t devices() const { return nodes * devices_per_node; }
};

// A common shape: `devices` devices, 8 per node (fewer when devices < 8),
// the default figures. `devices` is at least 1.
PoolSpec MakePoolSpec(uint32_t devices);
// Checks the figures and label ranges; the error names the field.
Status ValidatePoolSpec(const PoolSpec& spec);
// The devices the spec describes, in node order ("n3d5").
std::vector<DeviceDesc> PoolDevices(const PoolSpec& spec);
// Cost model figures matching the spec (its fabric tier for bytes).
CostModelOptions CostOptionsFor(const PoolSpec& spec);

// Time of a collective `op` ("allreduce", "allgather", "reduce_scatter",
// "alltoall", "broadcast"; anything else costs like a point-to-point send)
// moving `bytes` per member among `n` members over `link`, with the ring
// algorithm (tree for broadcast).
double CollectiveUs(std::string_view op, double bytes, uint32_t n, const LinkSpec& link);
// Point-to-point transfer of `bytes`.
double TransferUs(double bytes, const LinkSpec& link);

}  // namespace hmpmd
