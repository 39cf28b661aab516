// The staging ring's tickets: in-order and out-of-order waits, runs parked
// when their slot is reused before wait, and waits for tickets not in flight.
// Also the CPU backend's pipelining, which runs through the same ring.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "backends/staging_ring.h"
#include "rlx/error.h"
#include "rlx/session.h"
#include "test_util.h"

namespace rlx {
namespace {

struct Ring {
  // Inputs of 12 and 3 bytes, outputs of 4 and 300 bytes, 3 slots.
  StagingRing ring{{12, 3}, {4, 300}, 3, [](size_t n) { return new uint8_t[n]; }, [](uint8_t* p) { delete[] p; }};
  std::set<size_t> finished;
  StagingRing::Finish finish = [this](size_t s) { finished.insert(s); };

  // A run's outputs are its ticket written into both output bindings.
  uint64_t start() {
    size_t slot = 99;
    uint64_t t = ring.begin(finish, &slot);
    EXPECT_EQ(slot, t % 3);
    uint32_t v = uint32_t(t);
    std::memcpy(ring.output(slot, 0), &v, 4);
    std::memset(ring.output(slot, 1), int(t), 300);
    return t;
  }
  void expect_outputs(uint64_t t) {
    uint32_t a = 0;
    std::vector<uint8_t> b(300, 0);
    ring.collect(t, finish, {&a, b.data()});
    EXPECT_EQ(a, uint32_t(t));
    for (uint8_t x : b) ASSERT_EQ(x, uint8_t(t)) << "ticket " << t;
  }
};

TEST(StagingRing, WaitsInAnyOrderAndParksRunsWhoseSlotIsReused) {
  Ring r;
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 3; ++i) tickets.push_back(r.start());
  EXPECT_EQ(tickets, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(r.finished.empty());
  EXPECT_EQ(r.ring.parked(), 0u);
  // Two more runs reuse the slots of tickets 1 and 2, which nobody waited for.
  tickets.push_back(r.start());
  tickets.push_back(r.start());
  EXPECT_EQ(r.ring.parked(), 2u);
  EXPECT_EQ(r.finished, (std::set<size_t>{1, 2}));
  for (uint64_t t : {5, 1, 3, 2, 4}) r.expect_outputs(t);
  EXPECT_EQ(r.ring.parked(), 0u);
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(r.ring.pending(s), 0u);
}

TEST(StagingRing, WaitForATicketNotInFlightFails) {
  Ring r;
  uint64_t t = r.start();
  r.expect_outputs(t);
  EXPECT_THROW(r.expect_outputs(t), Error);   // already waited for
  EXPECT_THROW(r.expect_outputs(42), Error);  // never submitted
  EXPECT_THROW(r.expect_outputs(0), Error);
}

TEST(StagingRing, InputsAreStagedPerSlotAndAligned) {
  Ring r;
  size_t slot = 0;
  r.ring.begin(r.finish, &slot);
  const std::vector<uint8_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b = {7, 8, 9};
  r.ring.stage_inputs(slot, {a.data(), b.data()});
  EXPECT_EQ(std::vector<uint8_t>(r.ring.input(slot, 0), r.ring.input(slot, 0) + 12), a);
  EXPECT_EQ(std::vector<uint8_t>(r.ring.input(slot, 1), r.ring.input(slot, 1) + 3), b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r.ring.input(slot, 1)) - reinterpret_cast<uintptr_t>(r.ring.input(slot, 0)),
            256u);
  EXPECT_THROW(r.ring.stage_inputs(slot, {a.data()}), Error);
}

// The CPU backend's submit/wait: many runs outstanding, waited out of order,
// equal the sequential results.
TEST(StagingRing, CpuPipelinedRunsEqualSequentialRuns) {
  Graph g;
  ValueId x = g.input("x", {5, 13}, DType::F32);
  g.output("y", g.tanh(g.add(x, x)));
  CompileOptions o;
  o.device = Device::Cpu;
  auto exe = compile(g, o);
  std::vector<std::vector<float>> inputs, seq;
  for (int r = 0; r < 7; ++r) {
    inputs.push_back(test::random_floats(5 * 13, 100 + r));
    seq.push_back(exe->run({{"x", HostTensor::from_f32({5, 13}, inputs.back())}}).at("y").to_f32());
  }
  std::vector<uint64_t> tickets;
  for (int r = 0; r < 7; ++r) tickets.push_back(exe->submit({{"x", HostTensor::from_f32({5, 13}, inputs[r])}}));
  for (int r : {6, 0, 3, 1, 2, 5, 4}) {
    std::vector<float> y = exe->wait(tickets[size_t(r)]).at("y").to_f32();
    EXPECT_EQ(y, seq[size_t(r)]) << "run " << r;
    EXPECT_NE(y, std::vector<float>(y.size(), 0.f));
  }
  EXPECT_THROW(exe->wait(tickets[0]), Error);
}

}  // namespace
}  // namespace rlx
