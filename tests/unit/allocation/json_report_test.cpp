#include <doctest/doctest.h>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cmath>
#include <sstream>
#include <vector>

#include "allocation_test_support.hpp"
#include "common/allocation/allocator.hpp"

using namespace tern::allocation;
using namespace tern::allocation::testing;
namespace pt = boost::property_tree;

namespace {

pt::ptree parse(const std::string& json) {
  std::istringstream in(json);
  pt::ptree tree;
  pt::read_json(in, tree);  // throws on malformed JSON
  return tree;
}

std::vector<std::string> arrayOf(const pt::ptree& tree, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& item : tree.get_child(key)) out.push_back(item.second.data());
  return out;
}

}  // namespace

TEST_CASE("the JSON report parses and carries ratios, caps, phi and the budget") {
  Budget budget;
  budget.mean_ratio = 0.01;
  const auto workers = loads({0.5, 0.3, 0.2});
  const Allocation a = makeAllocator("dagc-r")->allocate(workers, 7850, budget);
  const pt::ptree tree = parse(allocationToJson(workers, 7850, budget, a, "dagc-r"));
  CHECK(tree.get<std::string>("method") == "dagc-r");
  CHECK(tree.get<uint32_t>("dim") == 7850);
  CHECK(tree.get<double>("budget.mean_ratio") == doctest::Approx(0.01));
  CHECK(tree.get<double>("phi") == a.phi);  // shortest round-trip formatting is exact
  {
    // Phi of the integer caps sent, written out again (phiReference) from caps / d.
    std::vector<double> sent;
    for (uint32_t k : a.caps) sent.push_back(double(k) / 7850.0);
    CHECK(tree.get<double>("phi_caps") ==
          doctest::Approx(phiReference({0.5, 0.3, 0.2}, sent)).epsilon(1e-12));
  }
  CHECK(tree.get<double>("phi_uniform") == doctest::Approx(100.0));
  const auto ratios = arrayOf(tree, "ratios");
  const auto caps = arrayOf(tree, "caps");
  REQUIRE(ratios.size() == 3);
  REQUIRE(caps.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(std::stod(ratios[i]) == a.ratios[i]);
    CHECK(std::stoul(caps[i]) == a.caps[i]);
  }
  CHECK(tree.get<uint64_t>("total_coordinates") == sum(a.caps));
  CHECK(tree.get_child("thresholds").empty());
  CHECK(tree.find("upload_seconds") == tree.not_found());
}

TEST_CASE("the JSON report escapes the method name and writes infinities as null") {
  Budget budget;
  budget.mean_threshold = 0.1;
  const auto workers = loads({0.7, 0.3, 0.0}, {0.001, 0.002, 0.0});
  const Allocation a = makeAllocator("dagc-a")->allocate(workers, 100, budget);
  const std::string odd = "dagc-a \"quoted\" \\ back\nline\x01";
  const std::string json = allocationToJson(workers, 100, budget, a, odd);
  CHECK(json.find("null") != std::string::npos);
  const pt::ptree tree = parse(json);
  CHECK(tree.get<std::string>("method") == odd);
  const auto thresholds = arrayOf(tree, "thresholds");
  REQUIRE(thresholds.size() == 3);
  CHECK(thresholds[2] == "null");
  CHECK(arrayOf(tree, "upload_seconds").size() == 3);
}

TEST_CASE("the JSON report rejects an allocation that does not match the workers") {
  Budget budget;
  Allocation wrong;
  wrong.ratios = {0.1};
  wrong.caps = {1};
  CHECK_THROWS_AS(allocationToJson(loads({0.5, 0.5}), 10, budget, wrong, "uniform"),
                  std::invalid_argument);
}

TEST_CASE("the JSON report compares cost-aware against an even split of the same seconds") {
  Budget budget;
  budget.seconds_per_round = 0.03;
  const auto workers = loads({0.6, 0.4}, {0.001, 0.003});
  const Allocation a = makeAllocator("cost-aware")->allocate(workers, 10000, budget);
  const pt::ptree tree = parse(allocationToJson(workers, 10000, budget, a, "cost-aware"));
  // Even ratio r with r * d * (b_1 + b_2) = 0.03 s, b_i = spp_i * 8 / 1448; Phi of it is 1 / r.
  const double r = 0.03 / (10000 * (0.001 + 0.003) * 8.0 / 1448.0);
  CHECK(tree.get<double>("phi_uniform") == doctest::Approx(1.0 / r));
  CHECK(tree.get<double>("phi") <= 1.0 / r);
}

TEST_CASE("the JSON report of a whole-packet plan prices uploads and the even split in packets") {
  Budget budget;
  budget.seconds_per_round = 0.03;
  budget.whole_packets = true;
  const auto workers = loads({0.6, 0.4}, {0.001, 0.003}, {0.005, 0.005});
  const Allocation a = makeAllocator("cost-aware")->allocate(workers, 10000, budget);
  const pt::ptree tree = parse(allocationToJson(workers, 10000, budget, a, "cost-aware"));
  CHECK(tree.get<bool>("budget.whole_packets"));
  // An even split buys floor(0.03 / (0.001 + 0.003)) = 7 packets of 181 coordinates each.
  const double even = 7.0 * 181 / 10000;
  CHECK(tree.get<double>("phi_uniform") == doctest::Approx(1.0 / even));
  CHECK(tree.get<double>("phi") <= 1.0 / even);
  std::vector<double> seconds;
  for (const auto& v : tree.get_child("upload_seconds"))
    seconds.push_back(v.second.get_value<double>());
  REQUIRE(seconds.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const double packets = std::ceil(a.caps[i] / 181.0);
    CHECK(seconds[i] == doctest::Approx(0.005 + (i == 0 ? 0.001 : 0.003) * packets));
  }
}
