// Trace formatting (host side of the CUDA tracer): RLX_TRACE parsing, the
// schedule summary, the per-run line and the Chrome trace of a real schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "backends/trace.h"
#include "compile/lower.h"

namespace rlx {
namespace {

std::unique_ptr<Schedule> small_schedule() {
  Graph g;
  ValueId x = g.input("x", {3, 5}, DType::F32);
  ValueId w = g.param("w", {5, 7}, DType::F32);
  g.output("y", g.softmax(g.gelu(g.add_node(OpKind::MatMul, {x, w}, MatMulAttrs{}, "proj")[0])));
  return lower(g);
}

TEST(Trace, ParsesTheEnvironment) {
  EXPECT_FALSE(parse_trace_env(nullptr).runs);
  EXPECT_FALSE(parse_trace_env(nullptr).schedule);
  EXPECT_TRUE(parse_trace_env("1").runs);
  EXPECT_FALSE(parse_trace_env("1").schedule);
  EXPECT_TRUE(parse_trace_env("schedule").schedule);
  EXPECT_FALSE(parse_trace_env("0").runs);
}

TEST(Trace, ScheduleSummaryAndRunLine) {
  auto s = small_schedule();
  ASSERT_EQ(s->thunks.size(), 3u);
  std::string sum = schedule_summary(*s, "cuda", "graph", "+++");
  EXPECT_NE(sum.find("rlx cuda: mode graph, 3 thunks, arena " + std::to_string(s->arena_bytes) + " bytes"),
            std::string::npos)
      << sum;
  EXPECT_NE(sum.find("matmul"), std::string::npos) << sum;
  EXPECT_NE(sum.find("softmax"), std::string::npos) << sum;
  EXPECT_NE(sum.find("schedule +++"), std::string::npos) << sum;
  EXPECT_EQ(run_line("perop", 1.25, 2.5, 10), "rlx trace: perop encode 1.2 us submit 2.5 us wait 10.0 us\n");
}

TEST(Trace, ChromeTraceHasOneEventPerThunkEndToEnd) {
  auto s = small_schedule();
  auto j = nlohmann::json::parse(chrome_trace_json(thunk_times(*s, {0.5f, 0.25f, 0.125f})));
  const auto& ev = j.at("traceEvents");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0]["name"], "matmul 'proj'");
  EXPECT_EQ(ev[0]["cat"], "matmul");
  EXPECT_EQ(ev[2]["cat"], "softmax");
  EXPECT_EQ(ev[1]["ph"], "X");
  EXPECT_DOUBLE_EQ(ev[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(ev[1]["ts"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(ev[2]["ts"].get<double>(), 750.0);
  EXPECT_DOUBLE_EQ(ev[2]["dur"].get<double>(), 125.0);
  EXPECT_THROW(thunk_times(*s, {1.f}), Error);
}

// RLX_OMIT picks thunks by a part of their label; nothing set, nothing left out.
TEST(Trace, OmittedThunksByLabel) {
  auto s = small_schedule();
  ASSERT_GE(s->thunks.size(), 3u);
  EXPECT_TRUE(omitted_thunks(*s, nullptr).empty());
  EXPECT_TRUE(omitted_thunks(*s, "").empty());
  const std::string first = s->thunks[0].label, last = s->thunks.back().label;
  const std::vector<bool> omit = omitted_thunks(*s, (",no such thunk," + last).c_str());
  ASSERT_EQ(omit.size(), s->thunks.size());
  for (size_t i = 0; i < omit.size(); ++i) EXPECT_EQ(omit[i], s->thunks[i].label.find(last) != std::string::npos) << i;
  EXPECT_TRUE(omit.back());
  EXPECT_FALSE(omit.front()) << first;
  const std::vector<bool> none = omitted_thunks(*s, "no such thunk");
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
}

// The list both RLX_OMIT and RLX_PDL_OFF_FOR read: empty parts dropped, a
// label matches on any part it contains.
TEST(Trace, LabelPartsSplitOnCommas) {
  EXPECT_TRUE(label_parts(nullptr).empty());
  EXPECT_TRUE(label_parts(",,").empty());
  EXPECT_EQ(label_parts("kv_write,,attention,"), (std::vector<std::string>{"kv_write", "attention"}));
  const auto parts = label_parts("kv_write,attention");
  EXPECT_TRUE(label_has_part("attention 'blk.3'", parts));
  EXPECT_TRUE(label_has_part("kv_write", parts));
  EXPECT_FALSE(label_has_part("matmul 'blk.3.attn_q'", parts));
  EXPECT_FALSE(label_has_part("attention", {}));
}

}  // namespace
}  // namespace rlx
