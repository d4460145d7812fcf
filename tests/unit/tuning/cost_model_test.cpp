#include "common/costmodel/cost_model.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace tern::costmodel;

TEST_CASE("the payload model counts eight bits per byte plus its header") {
  CHECK(PayloadCostModel().cost(100) == 800.0);
  CHECK(PayloadCostModel(66).cost(100) == 8.0 * 166);
  CHECK_FALSE(PayloadCostModel().packetBytes().has_value());
}

TEST_CASE("the packet model charges whole packets and is flat inside one") {
  const PacketCostModel m(0.005, 0.0015, 1448);
  CHECK(m.cost(0) == 0.005);
  CHECK(m.cost(1) == doctest::Approx(0.0065));
  CHECK(m.cost(1448) == m.cost(1));
  CHECK(m.cost(1449) == doctest::Approx(0.008));
  CHECK(m.packets(1449) == 2);
  CHECK(m.packets(2896) == 2);
  CHECK(m.packetBytes() == 1448u);
  // 124 bytes of envelope and frames ride in the first packet: 1324 codec bytes fill it.
  const PacketCostModel e(0.005, 0.0015, 1448, 124);
  CHECK(e.overheadBytes() == 124u);
  CHECK(e.cost(1324) == doctest::Approx(0.0065));
  CHECK(e.cost(1325) == doctest::Approx(0.008));
  CHECK(e.packets(0) == 1);
}

TEST_CASE("a 5 ms, 8 Mbit/s link costs 5 ms per message and 1.5 ms per full frame") {
  const PacketCostModel m = packetModelOfLink(5e-3, 8e6);
  CHECK(m.fixedCost() == doctest::Approx(5e-3));
  CHECK(m.packetCost() == doctest::Approx(1500.0 * 8 / 8e6));
  CHECK(m.packetBytes() == 1448u);
}

TEST_CASE("the affine model is fixed cost plus cost per byte") {
  const AffineCostModel m(2.0, 0.5);
  CHECK(m.cost(10) == 7.0);
  CHECK_FALSE(m.packetBytes().has_value());
}

TEST_CASE("the paper's payload count is T times an index of ceil(log2 d) bits and a value") {
  CHECK(paperPayloadBits(47236, 10) == 10 * (16 + 32));  // 2^15 < 47236 <= 2^16
  CHECK(paperPayloadBits(1024, 3) == 3 * (10 + 32));     // exactly a power of two
  CHECK(paperPayloadBits(1025, 3) == 3 * (11 + 32));
  CHECK(paperPayloadBits(785, 1, 16) == 10 + 16);
}

TEST_CASE("cost models reject constants that cannot price a message") {
  CHECK_THROWS_AS(PacketCostModel(-1.0, 1.0, 1448), std::invalid_argument);
  CHECK_THROWS_AS(PacketCostModel(0.0, 0.0, 1448), std::invalid_argument);
  CHECK_THROWS_AS(PacketCostModel(0.0, 1.0, 0), std::invalid_argument);
  CHECK_THROWS_AS(AffineCostModel(0.0, NAN), std::invalid_argument);
  CHECK_THROWS_AS(packetModelOfLink(1e-3, 0.0), std::invalid_argument);
}

TEST_CASE("makeCostModel builds each model by name and treats measured as a packet model") {
  CostModelSpec spec;
  spec.name = "payload";
  spec.header_bytes = 4;
  CHECK(makeCostModel(spec)->cost(1) == 40.0);
  spec.name = "measured";
  spec.c_fixed = 1.0;
  spec.c_packet = 2.0;
  spec.packet_bytes = 10;
  CHECK(makeCostModel(spec)->cost(11) == 5.0);
  spec.name = "affine";
  spec.c_byte = 0.25;
  CHECK(makeCostModel(spec)->cost(8) == 3.0);
  spec.name = "carrier-pigeon";
  CHECK_THROWS_AS(makeCostModel(spec), std::invalid_argument);
}
