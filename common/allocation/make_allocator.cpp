#include <stdexcept>
#include <utility>

#include "common/allocation/allocators.hpp"

namespace tern::allocation {

namespace {

// Every method's name and kind, in allocatorNames() order.
constexpr std::pair<const char*, Method> kMethods[] = {{"uniform", Method::kUniform},
                                                       {"dagc-r", Method::kDagcR},
                                                       {"dagc-a", Method::kDagcA},
                                                       {"dagc-opt", Method::kDagcOpt},
                                                       {"cost-aware", Method::kCostAware}};

}  // namespace

std::vector<std::string> allocatorNames() {
  std::vector<std::string> names;
  for (const auto& [name, method] : kMethods) names.emplace_back(name);
  return names;
}

bool plansByLinkTime(Method method, const Budget& budget) {
  return method == Method::kCostAware &&
         (budget.seconds_per_round > 0.0 || budget.deadline_seconds > 0.0 ||
          budget.round_overhead_seconds > 0.0);
}

std::optional<Method> methodNamed(const std::string& name) {
  for (const auto& [n, method] : kMethods) {
    if (name == n) return method;
  }
  return std::nullopt;
}

const char* methodName(Method method) {
  for (const auto& [name, m] : kMethods) {
    if (m == method) return name;
  }
  return "uniform";
}

std::unique_ptr<Allocator> makeAllocator(Method method) {
  switch (method) {
    case Method::kUniform:
      return std::make_unique<UniformAllocator>();
    case Method::kDagcR:
      return std::make_unique<DagcRAllocator>();
    case Method::kDagcA:
      return std::make_unique<DagcAAllocator>();
    case Method::kDagcOpt:
      return std::make_unique<DagcOptAllocator>();
    case Method::kCostAware:
      return std::make_unique<CostAwareAllocator>();
  }
  throw std::invalid_argument("unknown allocation method");
}

std::unique_ptr<Allocator> makeAllocator(const std::string& name) {
  if (const std::optional<Method> method = methodNamed(name)) return makeAllocator(*method);
  std::string known;
  for (const std::string& n : allocatorNames()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown allocator '" + name + "' (known: " + known + ")");
}

}  // namespace tern::allocation
