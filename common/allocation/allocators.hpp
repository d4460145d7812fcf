#pragma once
// The concrete allocators behind makeAllocator (docs/dagc.md, method): uniform, the paper's DAGC-R
// closed form (Theorem 4 / Alg. 2) and DAGC-A thresholds (Eq. 17), the exact minimiser of the
// key factor Phi, and its cost-aware generalisation (ratios ~ (p_i / b_i)^(2/3), floor, caps,
// optional deadline). Each fills ratios, integer caps and Phi; threshold methods also lambda_i.
// Under a byte budget every method prices a worker's coordinates at its own bytes per
// coordinate and push (WorkerLoad), so that the caps together cost at most bytes_per_round.
#include "common/allocation/allocator.hpp"

namespace tern::allocation {

// One delta for everyone, as much as the budget buys (sum budget / n when priced alike);
// thresholds lambda_i = lambda_bar when one is given.
class UniformAllocator final : public Allocator {
 public:
  std::string name() const override { return "uniform"; }
  Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                      const Budget& budget) const override;
};

// The paper's closed form as written, then clipped to delta_i <= 1 with the excess spread over
// the unclipped workers in proportion to their ratios.
class DagcRAllocator final : public Allocator {
 public:
  std::string name() const override { return "dagc-r"; }
  Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                      const Budget& budget) const override;
};

// Thresholds lambda_i = (lambda_bar * P / n) * p_i^(-2/3) (the paper's hard thresholds). The
// ratios and caps are the uniform ones, for reference only: a threshold compressor sends every
// coordinate at or above its threshold, however many (the volume follows lambda_bar, which the
// DAGC study calibrates against uniform top-k).
class DagcAAllocator final : public Allocator {
 public:
  std::string name() const override { return "dagc-a"; }
  Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                      const Budget& budget) const override;
};

// argmin Phi subject to sum_i delta_i = budget, 0 < delta_i <= 1.
class DagcOptAllocator final : public Allocator {
 public:
  std::string name() const override { return "dagc-opt"; }
  Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                      const Budget& budget) const override;
};

// argmin Phi subject to a link-time budget sum_i b_i * k_i <= seconds_per_round (or the volume
// budget when no seconds budget is set) and, optionally, a_i + b_i * k_i <= deadline_seconds.
// With round_overhead_seconds > 0 and no fixed deadline, the deadline D is chosen to minimise
// Phi(D) * (overhead + max_i (a_i + b_i * k_i)): a round lasts as long as its slowest upload.
// With whole_packets (and a seconds budget) every b_i * k_i above is b_i per packet times
// ceil((push bytes + k_i bytes per coordinate) / packet bytes): caps fill the packets they pay.
class CostAwareAllocator final : public Allocator {
 public:
  std::string name() const override { return "cost-aware"; }
  Allocation allocate(const std::vector<WorkerLoad>& workers, uint32_t dim,
                      const Budget& budget) const override;
};

}  // namespace tern::allocation
