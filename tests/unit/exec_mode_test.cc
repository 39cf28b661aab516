// How the GPU execution mode is chosen (host logic, so tested on the CPU):
// an explicit mode is never overridden by RLX_EXEC; auto takes RLX_EXEC, else
// graph when every thunk can be recorded, else per op.
#include <gtest/gtest.h>

#include "backends/exec_mode.h"

namespace rlx {
namespace {

Schedule two_thunks(bool second_capture_safe) {
  Schedule s;
  Thunk a, b;
  a.params = UnaryParams{};
  a.label = "gelu 'a'";
  b.params = SoftmaxParams{};
  b.label = "softmax 'host_read'";
  b.capture_safe = second_capture_safe;
  s.thunks = {a, b};
  return s;
}

TEST(ExecMode, ExplicitModeWinsOverTheEnvironment) {
  Schedule s = two_thunks(true);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Graph, "perop", s), ExecMode::Graph);
  EXPECT_EQ(resolve_exec_mode(ExecMode::PerOp, "graph", s), ExecMode::PerOp);
  EXPECT_EQ(resolve_exec_mode(ExecMode::PerOp, "nonsense", s), ExecMode::PerOp);
}

TEST(ExecMode, AutoTakesTheEnvironmentThenWhatCanBeRecorded) {
  Schedule safe = two_thunks(true), unsafe = two_thunks(false);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Auto, "perop", safe), ExecMode::PerOp);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Auto, "graph", safe), ExecMode::Graph);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Auto, "auto", safe), ExecMode::Graph);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Auto, nullptr, safe), ExecMode::Graph);
  EXPECT_EQ(resolve_exec_mode(ExecMode::Auto, nullptr, unsafe), ExecMode::PerOp);
  EXPECT_THROW(resolve_exec_mode(ExecMode::Auto, "segmented", safe), Error);
}

TEST(ExecMode, GraphModeRefusesAThunkThatCannotBeRecordedNamingIt) {
  Schedule unsafe = two_thunks(false);
  try {
    resolve_exec_mode(ExecMode::Graph, nullptr, unsafe);
    FAIL() << "graph mode accepted a thunk that is not capture-safe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("softmax 'host_read'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_exec_mode(ExecMode::Auto, "graph", unsafe), Error);
  EXPECT_STREQ(exec_mode_name(ExecMode::PerOp), "perop");
  EXPECT_STREQ(exec_mode_name(ExecMode::Graph), "graph");
}

}  // namespace
}  // namespace rlx
