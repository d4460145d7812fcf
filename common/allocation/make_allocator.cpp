#include <stdexcept>

#include "common/allocation/allocators.hpp"

namespace tern::allocation {

std::vector<std::string> allocatorNames() {
  return {"uniform", "dagc-r", "dagc-a", "dagc-opt", "cost-aware"};
}

std::unique_ptr<Allocator> makeAllocator(const std::string& name) {
  if (name == "uniform") return std::make_unique<UniformAllocator>();
  if (name == "dagc-r") return std::make_unique<DagcRAllocator>();
  if (name == "dagc-a") return std::make_unique<DagcAAllocator>();
  if (name == "dagc-opt") return std::make_unique<DagcOptAllocator>();
  if (name == "cost-aware") return std::make_unique<CostAwareAllocator>();
  std::string known;
  for (const std::string& n : allocatorNames()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown allocator '" + name + "' (known: " + known + ")");
}

}  // namespace tern::allocation
