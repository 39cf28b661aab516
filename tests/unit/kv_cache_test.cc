// State tensors and the KV write: placed in a region of their own at the
// start of the arena, zeroed at creation and by reset_state(), kept across
// runs, shared by executables of one arena share, written only by kv_write
// (the plan verifier enforces it), positions checked against the cache.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/backend.h"
#include "compile/plan_verify.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

constexpr int64_t kBatch = 2, kCtx = 11, kRow = 7;  // cache [2, 11, 7]

// out = the cache after writing `n` rows at pos; also a plain add, so the
// schedule has a thunk that must not write into the state.
Graph cache_graph(int64_t n) {
  Graph g;
  ValueId cache = g.state("cache", {kBatch, kCtx, kRow}, DType::F32);
  ValueId rows = g.input("rows", {kBatch, n, kRow}, DType::F32);
  ValueId pos = g.input("pos", {kBatch}, DType::I32);
  g.output("cache", g.kv_write(cache, rows, pos));
  g.output("twice", g.add(rows, rows));
  return g;
}

std::map<std::string, HostTensor> feeds(int64_t n, std::vector<int32_t> pos, uint64_t seed = 0) {
  return {{"rows", HostTensor::from_f32({kBatch, n, kRow}, test::random_floats(size_t(kBatch * n * kRow), seed, 1.f, 2.f))},
          {"pos", HostTensor::from_i32({kBatch}, pos)}};
}

// What the cache must hold: `expect` updated with the rows written at pos.
void write_rows(std::vector<float>& expect, const std::map<std::string, HostTensor>& in) {
  const std::vector<float> rows = in.at("rows").to_f32();
  const std::vector<int32_t> pos = in.at("pos").to_i32();
  const int64_t n = in.at("rows").shape[1];
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < kRow; ++e)
        expect[size_t((b * kCtx + pos[size_t(b)] + i) * kRow + e)] = rows[size_t((b * n + i) * kRow + e)];
}

std::vector<float> run_cache(Executable& exe, const std::map<std::string, HostTensor>& in) {
  for (const Binding& b : exe.schedule().output_bindings)
    exe.backend().write_binding(b, test::nan_bytes(size_t(numel(b.shape)), b.dtype).data());
  return exe.run(in).at("cache").to_f32();
}

TEST(KvCache, StateIsPlacedFirstInARegionOfItsOwn) {
  CompileOptions o;
  o.verify_plan = true;
  auto exe = compile(cache_graph(3), o);
  const Schedule& s = exe->schedule();
  ASSERT_EQ(s.state_bindings.size(), 1u);
  EXPECT_EQ(s.state_bindings[0].name, "cache");
  EXPECT_EQ(s.state.offset, 0u);
  EXPECT_GE(s.state.size, uint64_t(kBatch * kCtx * kRow * 4));
  EXPECT_GE(s.params.offset, s.state.offset + s.state.size);
  EXPECT_EQ(exe->state_names(), std::vector<std::string>{"cache"});
  EXPECT_EQ(exe->report().thunk_histogram.count("kv_write"), 1u);
  EXPECT_NO_THROW(verify_plan(s));
}

TEST(KvCache, StartsZeroedKeepsRowsAcrossRunsAndResets) {
  auto exe = compile(cache_graph(3));
  std::vector<float> expect(size_t(kBatch * kCtx * kRow), 0.f);
  auto a = feeds(3, {2, 8}, 1);  // batch 1's rows end at the cache's last row
  write_rows(expect, a);
  EXPECT_EQ(run_cache(*exe, a), expect);
  auto b = feeds(3, {5, 0}, 2);  // the first run's rows stay
  write_rows(expect, b);
  EXPECT_EQ(run_cache(*exe, b), expect);
  exe->reset_state();
  std::fill(expect.begin(), expect.end(), 0.f);
  auto c = feeds(3, {0, 1}, 3);
  write_rows(expect, c);
  EXPECT_EQ(run_cache(*exe, c), expect);
  EXPECT_EQ(exe->run_count(), 3u);
}

TEST(KvCache, ExecutablesOfOneArenaShareShareTheState) {
  CompileOptions o;
  o.arena_share = make_arena_share(std::max(planned_arena_bytes(cache_graph(4)), planned_arena_bytes(cache_graph(1))));
  auto prefill = compile(cache_graph(4), o);
  auto decode = compile(cache_graph(1), o);  // compiling it does not zero the shared state again
  std::vector<float> expect(size_t(kBatch * kCtx * kRow), 0.f);
  auto a = feeds(4, {0, 3}, 4);
  write_rows(expect, a);
  EXPECT_EQ(run_cache(*prefill, a), expect);
  for (int32_t step = 0; step < 3; ++step) {  // decode steps append after the prefilled rows
    auto d = feeds(1, {4 + step, 7 + step}, uint64_t(5 + step));
    write_rows(expect, d);
    EXPECT_EQ(run_cache(*decode, d), expect) << "step " << step;
  }
  EXPECT_EQ(decode->run_count(), 3u);
  decode->reset_state();  // one reset clears it for both
  std::fill(expect.begin(), expect.end(), 0.f);
  auto z = feeds(4, {7, 7}, 9);
  write_rows(expect, z);
  EXPECT_EQ(run_cache(*prefill, z), expect);
}

TEST(KvCache, StateLayoutMustMatchAcrossAShare) {
  CompileOptions o;
  o.arena_share = make_arena_share(1 << 20);
  auto a = compile(cache_graph(2), o);
  Graph other;
  ValueId cache = other.state("cache", {kBatch, kCtx + 1, kRow}, DType::F32);
  ValueId rows = other.input("rows", {kBatch, 2, kRow}, DType::F32);
  ValueId pos = other.input("pos", {kBatch}, DType::I32);
  other.output("cache", other.kv_write(cache, rows, pos));
  const std::string e = test::error_of([&] { compile(other, o); });
  EXPECT_NE(e.find("state"), std::string::npos) << e;
}

TEST(KvCache, PositionsThatRunPastTheCacheAreRejected) {
  auto exe = compile(cache_graph(3));
  std::string e = test::error_of([&] { exe->run(feeds(3, {0, int32_t(kCtx - 2)})); });
  EXPECT_NE(e.find("pos"), std::string::npos) << e;
  EXPECT_NE(e.find("kv_write"), std::string::npos) << e;
  e = test::error_of([&] { exe->run(feeds(3, {-1, 0})); });
  EXPECT_NE(e.find("kv_write"), std::string::npos) << e;
  // The largest valid position still runs.
  EXPECT_NO_THROW(exe->run(feeds(3, {int32_t(kCtx - 3), 0})));
}

TEST(KvCache, KvWriteNeedsAStateCacheThatFitsTheRows) {
  Graph g;
  ValueId cache = g.state("cache", {1, 5, 4}, DType::F32);
  ValueId not_state = g.input("x", {1, 5, 4}, DType::F32);
  ValueId pos = g.input("pos", {1}, DType::I32);
  std::string e = test::error_of([&] { g.kv_write(not_state, g.input("r", {1, 2, 4}, DType::F32), pos); });
  EXPECT_NE(e.find("state"), std::string::npos) << e;
  e = test::error_of([&] { g.kv_write(cache, g.input("long", {1, 6, 4}, DType::F32), pos); });
  EXPECT_NE(e.find("do not fit"), std::string::npos) << e;
  e = test::error_of([&] { g.kv_write(cache, g.input("wide", {1, 2, 5}, DType::F32), pos); });
  EXPECT_NE(e.find("do not fit"), std::string::npos) << e;
  e = test::error_of([&] { g.state("cache", {1, 2, 3}, DType::F32); });
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
}

TEST(KvCache, VerifierRejectsWritesIntoStateOutsideKvWrite) {
  CompileOptions o;
  o.verify_plan = true;
  auto exe = compile(cache_graph(3), o);
  const Schedule& valid = exe->schedule();
  bool tested = false;
  for (size_t t = 0; t < valid.thunks.size(); ++t) {
    const Thunk& th = valid.thunks[t];
    if (th.kind() != ThunkKind::Binary) continue;
    // Point the add's output (and its node's written range) at the state.
    Schedule s = valid;
    std::get<BinaryParams>(s.thunks[t].params).out = valid.state.offset;
    for (BufferUse& u : s.thunks[t].uses)
      if (u.write) u.offset = valid.state.offset;
    const std::string e = test::error_of([&] { verify_plan(s); });
    EXPECT_NE(e.find("state region"), std::string::npos) << e;
    tested = true;
  }
  EXPECT_TRUE(tested) << "the schedule has no add thunk";
}

}  // namespace
}  // namespace rlx
