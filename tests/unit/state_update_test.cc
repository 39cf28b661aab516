// State updates (Graph::update_state): a state takes a new value at the end
// of each run, lowered to a copy after every thunk that touches the state.
// A counter advanced by an i32 add and a token chosen by argmax, run to run;
// the graph checks, and the plan verifier rejecting every way a schedule
// could write state other than through kv_write and these copies.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "compile/plan_verify.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

// step (i32 [2]) advances by {1, 3} per run; token (i32 [2]) becomes the
// argmax of (x + table[step % 4]) where the row read depends on step; out
// reports both old values.
Graph counter_graph() {
  Graph g;
  ValueId step = g.state("step", {2}, DType::I32);
  ValueId token = g.state("token", {2}, DType::I32);
  ValueId x = g.input("x", {2, 37}, DType::F32);
  ValueId inc = g.constant({2}, DType::I32, test::i32_bytes({1, 3}), "inc");
  ValueId chosen = g.argmax(x);
  g.output("old_step", g.add(step, g.constant({2}, DType::I32, test::i32_bytes({0, 0}), "zero")));
  g.output("old_token", g.sub(token, g.constant({2}, DType::I32, test::i32_bytes({0, 0}), "zero2")));
  g.output("chosen", chosen);
  g.update_state(step, g.add(step, inc));
  g.update_state(token, chosen);
  return g;
}

TEST(StateUpdate, StateTakesItsNewValueAfterTheRun) {
  CompileOptions o;
  o.verify_plan = true;
  auto exe = compile(counter_graph(), o);
  const Schedule& s = exe->schedule();
  ASSERT_EQ(s.state_updates.size(), 2u);
  EXPECT_EQ(s.state_updates[0].state, "step");
  EXPECT_EQ(s.state_updates[1].state, "token");
  // Both copies come last, after the output copies that read the old values.
  EXPECT_EQ(s.state_updates[0].thunk, int32_t(s.thunks.size()) - 2);
  EXPECT_EQ(s.state_updates[1].thunk, int32_t(s.thunks.size()) - 1);
  for (const StateUpdate& u : s.state_updates) EXPECT_EQ(s.thunks[size_t(u.thunk)].kind(), ThunkKind::Copy);

  std::vector<int32_t> want_step{0, 0}, want_token{0, 0};
  for (int run = 0; run < 4; ++run) {
    std::vector<float> x = test::random_floats(2 * 37, uint64_t(40 + run), -1.f, 1.f);
    const int hot0 = 5 + 7 * run, hot1 = 36 - 3 * run;
    x[size_t(hot0)] = 2.f;
    x[size_t(37 + hot1)] = 2.f;
    for (const Binding& b : s.output_bindings)
      exe->backend().write_binding(b, test::nan_bytes(size_t(numel(b.shape)), b.dtype).data());
    auto out = exe->run({{"x", HostTensor::from_f32({2, 37}, x)}});
    EXPECT_EQ(out.at("old_step").to_i32(), want_step) << "run " << run;
    EXPECT_EQ(out.at("old_token").to_i32(), want_token) << "run " << run;
    EXPECT_EQ(out.at("chosen").to_i32(), (std::vector<int32_t>{hot0, hot1})) << "run " << run;
    want_step = {want_step[0] + 1, want_step[1] + 3};
    want_token = {hot0, hot1};
  }
  exe->reset_state();  // updated state is state like any other
  auto out = exe->run({{"x", HostTensor::from_f32({2, 37}, std::vector<float>(74, 0.f))}});
  EXPECT_EQ(out.at("old_step").to_i32(), (std::vector<int32_t>{0, 0}));
}

TEST(StateUpdate, GraphChecksTheTargetAndTheValue) {
  Graph g;
  ValueId st = g.state("s", {3}, DType::I32);
  ValueId x = g.input("x", {3}, DType::I32);
  std::string e = test::error_of([&] { g.update_state(x, st); });
  EXPECT_NE(e.find("must be a state"), std::string::npos) << e;
  e = test::error_of([&] { g.update_state(st, g.input("y", {4}, DType::I32)); });
  EXPECT_NE(e.find("state 's'"), std::string::npos) << e;
  e = test::error_of([&] { g.update_state(st, g.input("f", {3}, DType::F32)); });
  EXPECT_NE(e.find("f32"), std::string::npos) << e;
  g.update_state(st, x);
  e = test::error_of([&] { g.update_state(st, x); });
  EXPECT_NE(e.find("already has an update"), std::string::npos) << e;
  // i32 arithmetic stops at add and sub.
  e = test::error_of([&] { g.mul(x, x); });
  EXPECT_FALSE(e.empty());
}

// Dead-code elimination keeps what only a state update reads.
TEST(StateUpdate, ValuesOnlyAnUpdateReadsAreKept) {
  Graph g;
  ValueId st = g.state("s", {4}, DType::I32);
  ValueId x = g.input("x", {4, 9}, DType::F32);
  g.output("y", g.relu(x));
  g.update_state(st, g.argmax(x));
  CompileOptions o;
  o.verify_plan = true;
  auto exe = compile(g, o);
  EXPECT_EQ(exe->report().thunk_histogram.count("argmax"), 1u);
  ASSERT_EQ(exe->schedule().state_updates.size(), 1u);
}

class StateUpdateVerifier : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = compile(counter_graph(), CompileOptions{});
    valid_ = exe_->schedule();
    ASSERT_NO_THROW(verify_plan(valid_));
  }
  std::unique_ptr<Executable> exe_;
  Schedule valid_;
};

TEST_F(StateUpdateVerifier, RejectsAnUnlistedCopyIntoState) {
  Schedule s = valid_;
  s.state_updates.pop_back();
  const std::string e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("state region"), std::string::npos) << e;
}

TEST_F(StateUpdateVerifier, RejectsAReadOfTheStateAfterItsUpdate) {
  // A copy that reads "step" appended after the updates.
  Schedule r = valid_;
  Thunk reader = r.thunks[size_t(r.state_updates[0].thunk)];  // reads the new value, writes "step"
  std::swap(std::get<CopyParams>(reader.params).src, std::get<CopyParams>(reader.params).dst);
  std::swap(reader.uses[0].offset, reader.uses[1].offset);
  // Now it reads "step" and writes the value's slot, which is dead by then:
  // point the write at the outputs region instead (a live place) so that
  // only the state read is wrong.
  const uint64_t out_off = r.output_bindings[0].offset;
  std::get<CopyParams>(reader.params).dst = out_off;
  for (BufferUse& u : reader.uses)
    if (u.write) u.offset = out_off;
  reader.label = "late reader";
  r.thunks.push_back(reader);
  const std::string e2 = test::error_of([&] { verify_plan(r); });
  EXPECT_NE(e2.find("after its update"), std::string::npos) << e2;
}

TEST_F(StateUpdateVerifier, RejectsAnUpdateThatIsNotACopy) {
  Schedule s = valid_;
  int32_t argmax_thunk = -1;
  for (size_t t = 0; t < s.thunks.size(); ++t)
    if (s.thunks[t].kind() == ThunkKind::Argmax) argmax_thunk = int32_t(t);
  ASSERT_GE(argmax_thunk, 0);
  s.state_updates.push_back(StateUpdate{argmax_thunk, "token"});
  s.state_updates.erase(s.state_updates.begin() + 1);
  const std::string e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("not a copy"), std::string::npos) << e;
}

TEST_F(StateUpdateVerifier, RejectsAnUpdateWritingAnotherState) {
  Schedule s = valid_;
  std::swap(s.state_updates[0].state, s.state_updates[1].state);
  const std::string e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("not exactly state"), std::string::npos) << e;
}

TEST_F(StateUpdateVerifier, RejectsTwoUpdatesOfOneStateAndUnknownStates) {
  Schedule s = valid_;
  s.state_updates[1].state = "step";
  std::string e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("two updates"), std::string::npos) << e;
  s = valid_;
  s.state_updates[1].state = "nope";
  e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("unknown state"), std::string::npos) << e;
  s = valid_;
  s.state_updates[1].thunk = int32_t(s.thunks.size());
  e = test::error_of([&] { verify_plan(s); });
  EXPECT_NE(e.find("names thunk"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
