// The budget rules shared by the configuration and `tern-coordinator allocate`: each rule's fault
// names its field in the caller's words, a budget that meets them all has none.
#include "common/allocation/budget_rules.hpp"

#include <doctest/doctest.h>

using namespace tern::allocation;

namespace {

std::string quoted(const std::string& field) { return "<" + field + ">"; }

std::optional<BudgetFault> faultOf(Method method, const Budget& b) {
  return budgetFault(method, b, quoted);
}

}  // namespace

TEST_CASE("a budget each method can plan by has no fault") {
  Budget b;
  for (Method m : {Method::kUniform, Method::kDagcR, Method::kDagcOpt, Method::kCostAware}) {
    CHECK_FALSE(faultOf(m, b).has_value());
  }
  Budget seconds;
  seconds.seconds_per_round = 0.5;
  seconds.deadline_seconds = 1.0;
  seconds.round_overhead_seconds = 0.2;
  seconds.whole_packets = true;
  CHECK_FALSE(faultOf(Method::kCostAware, seconds).has_value());
  Budget threshold;
  threshold.mean_threshold = 0.01;
  CHECK_FALSE(faultOf(Method::kDagcA, threshold).has_value());
}

TEST_CASE("each budget rule names the field at fault in the caller's words") {
  Budget no_ratio;
  no_ratio.mean_ratio = 0.0;
  auto f = faultOf(Method::kUniform, no_ratio);
  REQUIRE(f.has_value());
  CHECK(f->field == "mean_ratio");
  CHECK(f->why == "<mean_ratio> must be above 0");

  f = faultOf(Method::kDagcA, Budget{});
  REQUIRE(f.has_value());
  CHECK(f->field == "mean_threshold");
  CHECK(f->why.find("needs <mean_threshold> above 0") != std::string::npos);

  Budget two;
  two.bytes_per_round = 600;
  two.seconds_per_round = 1;
  f = faultOf(Method::kCostAware, two);
  REQUIRE(f.has_value());
  CHECK(f->field == "seconds_per_round");
  CHECK(f->why == "<bytes_per_round> and <seconds_per_round> are two budgets: give one of them");

  Budget packets;
  packets.whole_packets = true;
  f = faultOf(Method::kCostAware, packets);
  REQUIRE(f.has_value());
  CHECK(f->field == "whole_packets");
  CHECK(f->why.find("needs <seconds_per_round> above 0") != std::string::npos);
}

TEST_CASE("link-seconds fields set under a method other than cost-aware name the first of them") {
  Budget b;
  b.round_overhead_seconds = 0.3;
  b.whole_packets = true;
  auto f = faultOf(Method::kDagcR, b);
  REQUIRE(f.has_value());
  CHECK(f->field == "round_overhead_seconds");
  CHECK(f->why == "<round_overhead_seconds> is read by method cost-aware only, not by dagc-r");
  b.deadline_seconds = 2.0;
  CHECK(faultOf(Method::kUniform, b)->field == "deadline_seconds");
}
