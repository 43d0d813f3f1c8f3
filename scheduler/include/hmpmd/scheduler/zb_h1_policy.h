// ZbH1Policy ("spmd-zb-h1"): the static SPMD deployment of spmd-1f1b with
// the ZB-H1 pipeline schedule (Qi et al., "Zero Bubble (Almost) Pipeline
// Parallelism", ICLR 2024, section 2.1), the zero-bubble baseline that
// keeps 1F1B's activation memory.
//
// Assumptions:
// 1. A pipeline stage's backward comes as two tasks: B (pass "b", the
//    input gradient the stage before waits for) and W (pass "w", the
//    weight gradient nothing in the step waits for). A job without W tasks
//    runs as under spmd-1f1b.
// 2. Everything else (device sets, pinning by shard, program order of the
//    other sub-models, communication on the compute core, state prefetch)
//    is spmd-1f1b's (spmd_policy.h).
// Algorithm (ZbH1Order), for stage i of p over m micro-batches:
// 1. min(p - 1 - i, m) warm-up forwards, as 1F1B.
// 2. Then per micro-batch k: the next forward (while any is left), B of k,
//    and from k = i on, the oldest W not yet run. Stage i thus holds its
//    W back by i micro-batches, so every stage has at most p micro-batches
//    in flight (F run, W not yet): stage 0's peak under 1F1B.
// 3. The W held back run at the end, filling the cool-down that 1F1B
//    leaves idle while the last B travels back up the pipeline.
// With F, B and W of T_F, T_B, T_W and m >= p, a stage idles
// (p-1)(T_F + T_B - T_W) per step against 1F1B's (p-1)(T_F + T_B + T_W):
// with equal passes the bubble ratio is (p-1)/(3m+p-1), a third of 1F1B's
// idle time (tests/scheduler/zb_h1_policy_test.cc).
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <vector>

#include "hmpmd/scheduler/spmd_policy.h"

namespace hmpmd {

// The ZB-H1 order of stage `stage` of `stages` (algorithm above).
std::vector<PipeOp> ZbH1Order(uint32_t stage, uint32_t stages, uint32_t micro_batches);

class ZbH1Policy final : public SpmdPolicy {
 public:
  ZbH1Policy() : SpmdPolicy(SpmdOptions{"spmd-zb-h1", ZbH1Order, nullptr}) {}
};

}  // namespace hmpmd
