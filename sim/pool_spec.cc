#include "hmpmd/sim/pool_spec.h"

#include <algorithm>
#include <cmath>

namespace hmpmd {

std::string_view LinkTierName(LinkTier tier) {
  switch (tier) {
    case LinkTier::kDevice:
      return "device";
    case LinkTier::kNode:
      return "node";
    case LinkTier::kFabric:
      return "fabric";
  }
  return "unknown";
}

PoolSpec MakePoolSpec(uint32_t devices) {
  PoolSpec s;
  devices = std::max(devices, 1u);
  s.devices_per_node = std::min(devices, 8u);
  s.nodes = (devices + s.devices_per_node - 1) / s.devices_per_node;
  if (s.nodes * s.devices_per_node != devices) {  // not a multiple of 8: one node
    s.nodes = 1;
    s.devices_per_node = devices;
  }
  s.name = std::to_string(s.nodes) + "x" + std::to_string(s.devices_per_node);
  return s;
}

namespace {

// Adds the labels of every range to the devices it covers.
Status ApplyLabels(const PoolSpec& s, std::vector<Labels>* devices) {
  for (size_t r = 0; r < s.device_labels.size(); ++r) {
    const DeviceLabels& range = s.device_labels[r];
    const std::string at = "device_labels[" + std::to_string(r) + "]";
    if (range.first > range.last || range.last >= s.devices()) {
      return Status::InvalidArgument(at + ".devices: [" + std::to_string(range.first) + ", " +
                                     std::to_string(range.last) + "] is not a range of the " +
                                     std::to_string(s.devices()) + " devices");
    }
    for (uint32_t d = range.first; d <= range.last; ++d) {
      for (const Label& l : range.labels) {
        RETURN_IF_ERROR(AddLabel(at + ".labels", l, &(*devices)[d]));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePoolSpec(const PoolSpec& s) {
  if (s.nodes == 0) return Status::InvalidArgument("nodes: must be at least 1");
  if (s.devices_per_node == 0) {
    return Status::InvalidArgument("devices_per_node: must be at least 1");
  }
  if (static_cast<uint64_t>(s.nodes) * s.devices_per_node > 1'000'000) {
    return Status::InvalidArgument("nodes: more than 1000000 devices in all");
  }
  if (s.cores[0] + s.cores[1] == 0) return Status::InvalidArgument("cores: a device needs a core");
  for (int k = 0; k < kNumCoreKinds; ++k) {
    std::string kind(CoreKindName(static_cast<CoreKind>(k)));
    if (s.cores[k] > 0 && !(s.flops_per_us[k] > 0)) {
      return Status::InvalidArgument("cores." + kind + ".flops_per_us: must be positive");
    }
  }
  for (int t = 0; t < kNumLinkTiers; ++t) {
    std::string tier(LinkTierName(static_cast<LinkTier>(t)));
    if (!(s.links[t].bytes_per_us > 0)) {
      return Status::InvalidArgument("links." + tier + ".bytes_per_us: must be positive");
    }
    if (!(s.links[t].latency_us >= 0)) {
      return Status::InvalidArgument("links." + tier + ".latency_us: must not be negative");
    }
  }
  if (!s.device_labels.empty()) {
    std::vector<Labels> labels(s.devices());
    RETURN_IF_ERROR(ApplyLabels(s, &labels));
  }
  return Status::Ok();
}

std::vector<DeviceDesc> PoolDevices(const PoolSpec& s) {
  std::vector<DeviceDesc> out;
  out.reserve(s.devices());
  for (uint32_t n = 0; n < s.nodes; ++n) {
    for (uint32_t d = 0; d < s.devices_per_node; ++d) {
      DeviceDesc desc;
      desc.name = "n" + std::to_string(n) + "d" + std::to_string(d);
      desc.cores = s.cores;
      desc.memory_mb = s.memory_mb;
      desc.node = n;
      desc.flops_per_us = s.flops_per_us;
      out.push_back(std::move(desc));
    }
  }
  if (!s.device_labels.empty()) {
    std::vector<Labels> labels(out.size());
    // A spec ValidatePoolSpec passed has no conflict left to refuse.
    (void)ApplyLabels(s, &labels);
    for (size_t d = 0; d < out.size(); ++d) out[d].labels = std::move(labels[d]);
  }
  return out;
}

CostModelOptions CostOptionsFor(const PoolSpec& s) {
  CostModelOptions o;
  o.cube_flops_per_us = s.flops_per_us[0];
  o.vector_flops_per_us = s.flops_per_us[1];
  const LinkSpec& l = s.links[s.nodes > 1 ? 2 : 1];
  o.link_bytes_per_us = l.bytes_per_us;
  o.link_latency_us = l.latency_us;
  return o;
}

double TransferUs(double bytes, const LinkSpec& link) {
  return bytes > 0 ? link.latency_us + bytes / link.bytes_per_us : 0;
}

double CollectiveUs(std::string_view op, double bytes, uint32_t n, const LinkSpec& link) {
  if (n <= 1 || bytes <= 0) return 0;
  double steps = n - 1;
  double frac = steps / n;
  if (op == "allreduce") return 2 * steps * link.latency_us + 2 * frac * bytes / link.bytes_per_us;
  if (op == "allgather" || op == "reduce_scatter" || op == "alltoall") {
    return steps * link.latency_us + frac * bytes / link.bytes_per_us;
  }
  if (op == "broadcast") {
    // Pipelined binary tree: log2(n) hops of latency, the payload once.
    return std::ceil(std::log2(n)) * link.latency_us + bytes / link.bytes_per_us;
  }
  return TransferUs(bytes, link);
}

}  // namespace hmpmd
