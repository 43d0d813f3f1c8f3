#include "hmpmd/scheduler/zb_h1_policy.h"

#include <algorithm>

namespace hmpmd {

std::vector<PipeOp> ZbH1Order(uint32_t stage, uint32_t stages, uint32_t micro_batches) {
  const uint32_t m = micro_batches;
  const uint32_t warm = std::min(stages > stage ? stages - stage - 1 : 0, m);
  std::vector<PipeOp> order;
  order.reserve(size_t{3} * m);
  for (uint32_t mb = 0; mb < warm; ++mb) order.push_back({mb, PipePass::kForward});
  uint32_t next_w = 0;
  for (uint32_t k = 0; k < m; ++k) {
    if (k + warm < m) order.push_back({k + warm, PipePass::kForward});
    order.push_back({k, PipePass::kBackward});
    // From k = i on, one W per B: the i W held back fill the cool-down,
    // while the last B travels up to stage 0.
    if (k >= stage) order.push_back({next_w++, PipePass::kWeight});
  }
  while (next_w < m) order.push_back({next_w++, PipePass::kWeight});
  return order;
}

}  // namespace hmpmd
