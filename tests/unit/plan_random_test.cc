// The memory plan on many random graphs: every schedule, fused or not, must
// pass the plan verifier; some are also run and compared fused vs unfused.
// And the verifier itself must reject corrupted plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <numeric>

#include "compile/plan_verify.h"
#include "fusion_check.h"
#include "models/encoder_demo.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

// Builds a random DAG of float ops over odd shapes. Every op draws its
// operands from the values built so far, so later ops reuse earlier ones.
class RandomGraph {
 public:
  // Without casts, fused and unfused runs must agree to f32 rounding: a
  // low-precision round trip could turn a last-bit difference into a whole
  // f16/bf16 step.
  RandomGraph(uint64_t seed, bool casts) : rng_(seed), casts_(casts) {}

  Graph build() {
    const int inputs = 1 + pick(2);
    for (int i = 0; i < inputs; ++i) add_value(g_.input("in" + std::to_string(i), random_shape(2, 4), DType::F32));
    const int ops = 4 + pick(10);
    for (int i = 0; i < ops; ++i) add_op();
    // Several outputs: the newest value plus a few random others.
    std::vector<ValueId> outs = {pool_.back()};
    for (int i = 0, n = pick(3); i < n; ++i) outs.push_back(pool_[size_t(pick(int(pool_.size())))]);
    std::sort(outs.begin(), outs.end());
    outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
    for (ValueId v : outs) g_.output("out" + std::to_string(v), v);
    return std::move(g_);
  }

 private:
  int pick(int n) { return int(rng_.next() % uint64_t(n)); }
  int64_t odd_dim() {
    static const int64_t dims[] = {1, 2, 3, 5, 7, 9, 13};
    return dims[pick(7)];
  }
  Shape random_shape(int lo_rank, int hi_rank) {
    Shape s(size_t(lo_rank + pick(hi_rank - lo_rank + 1)));
    for (auto& d : s) d = odd_dim();
    return s;
  }
  ValueId param(const Shape& s) { return g_.param("p" + std::to_string(params_++), s, DType::F32); }
  void add_value(ValueId v) { pool_.push_back(v); }
  ValueId any() { return pool_[size_t(pick(int(pool_.size())))]; }
  // A value from the pool with rank >= r, or -1.
  ValueId any_with_rank(size_t r) {
    std::vector<ValueId> ok;
    for (ValueId v : pool_)
      if (g_.value(v).shape.size() >= r) ok.push_back(v);
    return ok.empty() ? -1 : ok[size_t(pick(int(ok.size())))];
  }
  const Shape& shape(ValueId v) { return g_.value(v).shape; }

  void add_op() {
    switch (pick(14)) {
      case 13: return attention_block();
      case 0: return matmul();
      case 1: return siblings();
      case 2: case 3: return binary();
      case 4: return unary();
      case 5: return norm();
      case 6: add_value(g_.softmax(any())); return;
      case 7: return reshape();
      case 8: return narrow();
      case 9: return permute();
      case 10: return concat();
      case 11: return cast();
      case 12: return reduce();
    }
  }

  // x @ W (+ bias) (then an activation): the shapes the epilogue fusion sees.
  void matmul() {
    ValueId x = any_with_rank(2);
    if (x < 0) return unary();
    const int64_t k = shape(x).back(), n = odd_dim() + 2;
    const bool tb = pick(2);
    ValueId y = g_.matmul(x, param(tb ? Shape{n, k} : Shape{k, n}), false, tb);
    if (pick(2)) y = g_.add(y, param(pick(2) ? Shape{n} : Shape{1, n}));
    if (pick(2)) y = g_.activation(y, Activation(1 + pick(5)));
    add_value(y);
  }

  // Two or three projections of one value: the sibling merge's pattern.
  void siblings() {
    ValueId x = any_with_rank(2);
    if (x < 0) return unary();
    const int64_t k = shape(x).back();
    const bool bias = pick(2);
    for (int i = 0, n = 2 + pick(2); i < n; ++i) {
      const int64_t cols = odd_dim();
      ValueId y = g_.matmul(x, param({cols, k}), false, true);
      if (bias) y = g_.add(y, param({cols}));
      add_value(y);
    }
  }

  // a (op) b with b shaped to broadcast against a: dims dropped or set to 1.
  void binary() {
    ValueId a = any();
    Shape bs = shape(a);
    const size_t drop = size_t(pick(int(bs.size())));
    bs.erase(bs.begin(), bs.begin() + long(drop));
    for (auto& d : bs)
      if (pick(3) == 0) d = 1;
    ValueId b = param(bs);
    bool pair = false;
    for (ValueId v : pool_)
      if (v != a && shape(v) == shape(a) && pick(2)) b = v, pair = true;  // sometimes a same-shape pair
    if (pick(2)) std::swap(a, b);
    // Two pool values may be equal (a full-length narrow is its input), and
    // x - x would give the all-zero outputs the numeric check rejects.
    switch (pick(pair ? 2 : 3)) {
      case 0: add_value(g_.add(a, b)); break;
      case 1: add_value(g_.mul(a, b)); break;
      default: add_value(g_.sub(a, b)); break;
    }
  }

  // Projections of a [batch, seq, features] value into (rotated) q, k, v and
  // attention over them: the merge and narrow fusions' pattern.
  void attention_block() {
    std::vector<ValueId> rank3;
    for (ValueId v : pool_)
      if (shape(v).size() == 3) rank3.push_back(v);
    if (rank3.empty()) return matmul();
    ValueId x = rank3[size_t(pick(int(rank3.size())))];
    const int64_t seq = shape(x)[1], f = shape(x)[2];
    const int heads = 1 + pick(3), kv_heads = heads == 2 && pick(2) ? 1 : heads;
    const int hd = 2 * (1 + pick(3));
    ValueId q = g_.matmul(x, param({heads * hd, f}), false, true);
    ValueId k = g_.matmul(x, param({kv_heads * hd, f}), false, true);
    ValueId v = g_.matmul(x, param({kv_heads * hd, f}), false, true);
    if (pick(2)) {
      std::vector<int32_t> pos(static_cast<size_t>(seq), 0);
      for (size_t i = 0; i < pos.size(); ++i) pos[i] = int32_t(i + size_t(pick(5)));
      std::vector<uint8_t> bytes(pos.size() * 4);
      std::memcpy(bytes.data(), pos.data(), bytes.size());
      ValueId p = g_.constant({seq}, DType::I32, std::move(bytes));
      RopeAttrs ra;
      ra.head_dim = hd;
      ra.n_rot = pick(2) ? 0 : 2;
      ra.interleaved = pick(2);
      ra.heads = heads;
      q = g_.rope(q, p, ra);
      ra.heads = kv_heads;
      k = g_.rope(k, p, ra);
    }
    AttentionAttrs at;
    at.q_heads = heads;
    at.kv_heads = kv_heads;
    at.head_dim = hd;
    at.scale = 0.5f;
    at.mask = pick(2) ? MaskKind::Causal : MaskKind::None;
    add_value(g_.attention(q, k, v, -1, at));
  }

  void unary() { add_value(g_.activation(any(), Activation(1 + pick(5)))); }

  // norm(a + b) or norm(x): the residual fusion's pattern, pre- or post-norm.
  void norm() {
    ValueId x = any();
    if (pick(2)) {
      ValueId s = g_.add(x, param(shape(x)));
      add_value(s);
      x = s;
    }
    const int64_t c = shape(x).back();
    if (pick(2))
      add_value(g_.layer_norm(x, param({c}), pick(2) ? param({c}) : -1, 1e-5f));
    else
      add_value(g_.rms_norm(x, param({c}), 1e-6f));
  }

  void reshape() {
    ValueId x = any();
    const Shape& s = shape(x);
    if (s.size() >= 2 && pick(2)) {  // merge the two leading dims
      Shape t(s.begin() + 1, s.end());
      t[0] *= s[0];
      add_value(g_.reshape(x, t));
    } else {  // insert a unit dim
      Shape t = s;
      t.insert(t.begin() + pick(int(s.size()) + 1), 1);
      if (t.size() <= 5) add_value(g_.reshape(x, t));
    }
  }

  void narrow() {
    ValueId x = any();
    const Shape& s = shape(x);
    const int axis = pick(int(s.size()));
    const int64_t dim = s[size_t(axis)];
    const int64_t start = pick(int(dim)), len = 1 + pick(int(dim - start));
    add_value(g_.narrow(x, pick(2) ? axis : axis - int(s.size()), start, len));
  }

  void permute() {
    ValueId x = any();
    std::vector<int> perm(shape(x).size());
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[size_t(pick(int(i)))]);
    add_value(g_.permute(x, perm));
  }

  void concat() {
    ValueId x = any();
    const int axis = pick(int(shape(x).size()));
    std::vector<ValueId> parts = {x};
    for (ValueId v : pool_) {
      if (v == x || shape(v).size() != shape(x).size()) continue;
      bool ok = true;
      for (size_t d = 0; d < shape(x).size(); ++d) ok = ok && (int(d) == axis || shape(v)[d] == shape(x)[d]);
      if (ok && pick(2)) parts.push_back(v);
    }
    if (parts.size() == 1) parts.push_back(g_.tanh(x));
    add_value(g_.concat(parts, axis));
  }

  void cast() {
    if (!casts_) return unary();
    add_value(g_.cast(g_.cast(any(), pick(2) ? DType::F16 : DType::BF16), DType::F32));
  }

  void reduce() {
    ValueId x = any_with_rank(2);
    if (x < 0) return unary();
    add_value(g_.reduce(x, pick(int(shape(x).size())), ReduceKind(pick(3)), pick(2)));
  }

  test::Rng rng_;
  bool casts_;
  Graph g_;
  std::vector<ValueId> pool_;
  int params_ = 0;
};

TEST(PlanRandom, EverySchedulePassesThePlanVerifier) {
  int ran = 0, fewer_thunks = 0;
  for (uint64_t seed = 1; seed <= 240; ++seed) {
    SCOPED_TRACE("graph seed " + std::to_string(seed));
    const bool run = seed % 20 == 0;  // a handful also run, fused against unfused
    Graph g = RandomGraph(seed, !run).build();
    size_t thunks[2] = {0, 0};
    for (bool fuse : {false, true}) {
      std::unique_ptr<Executable> exe;
      ASSERT_NO_THROW(exe = test::compile_cpu(g, fuse)) << (fuse ? "fused" : "unfused");
      EXPECT_NO_THROW(verify_plan(exe->schedule())) << (fuse ? "fused" : "unfused") << "\n"
                                                    << exe->report().schedule;
      EXPECT_FALSE(exe->schedule().thunks.empty());
      thunks[fuse] = exe->schedule().thunks.size();
    }
    fewer_thunks += thunks[1] < thunks[0];
    if (run) {
      test::expect_fusion_preserves_outputs(g, seed * 977);
      ++ran;
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(ran, 12);
  // The generator must actually feed the fusions, or the fused half proves little.
  EXPECT_GT(fewer_thunks, 60) << "of 240 graphs";
  std::cout << "fusion shortened " << fewer_thunks << " of 240 random schedules\n";
}

// relu(x) and tanh(x) are both live when their sum is computed, so their
// slots must be distinct: a plan that puts them together is wrong.
std::unique_ptr<Executable> two_live_values() {
  Graph g;
  ValueId x = g.input("x", {7, 33}, DType::F32);
  ValueId a = g.relu(x), b = g.tanh(x);
  g.output("y", g.softmax(g.add(a, b)));
  return test::compile_cpu(g, false);
}

TEST(PlanVerifier, AcceptsTheValidPlan) {
  auto exe = two_live_values();
  EXPECT_NO_THROW(verify_plan(exe->schedule()));
  EXPECT_GE(exe->schedule().planned.size(), 2u);
}

TEST(PlanVerifier, RejectsOverlappingLiveValues) {
  auto exe = two_live_values();
  Schedule s = exe->schedule();
  const auto& pv = s.planned;
  bool corrupted = false;
  for (size_t i = 0; i < pv.size() && !corrupted; ++i)
    for (size_t j = i + 1; j < pv.size() && !corrupted; ++j)
      if (pv[i].first <= pv[j].last && pv[j].first <= pv[i].last) {
        s.planned[j].offset = s.planned[i].offset;  // both live, now on the same bytes
        corrupted = true;
      }
  ASSERT_TRUE(corrupted) << "the plan has no two values live at once";
  EXPECT_THROW(verify_plan(s), Error);
}

TEST(PlanVerifier, RejectsAThunkWritingOutsideItsSlot) {
  auto exe = two_live_values();
  const Schedule& valid = exe->schedule();
  // Find a thunk writing a scratch value and make it write past the slot end.
  bool tested = false;
  for (size_t t = 0; t < valid.thunks.size(); ++t) {
    for (size_t u = 0; u < valid.thunks[t].uses.size(); ++u) {
      const BufferUse& use = valid.thunks[t].uses[u];
      if (!use.write) continue;
      for (const PlannedValue& p : valid.planned) {
        if (use.offset < p.offset || use.offset >= p.offset + p.size) continue;
        Schedule s = valid;
        s.thunks[t].uses[u].size = valid.arena_bytes;  // runs over every slot after it
        EXPECT_THROW(verify_plan(s), Error) << "thunk " << t;
        Schedule past = valid;
        past.thunks[t].uses[u].offset = valid.arena_bytes;  // beyond the arena
        EXPECT_THROW(verify_plan(past), Error) << "thunk " << t;
        tested = true;
      }
    }
  }
  EXPECT_TRUE(tested) << "no thunk writes a scratch value";
}

TEST(PlanVerifier, RejectsAWriteIntoTheParamsRegion) {
  Graph g;
  ValueId x = g.input("x", {5, 9}, DType::F32);
  ValueId w = g.param("w", {9, 3}, DType::F32);
  g.output("y", g.relu(g.matmul(x, w)));
  auto exe = test::compile_cpu(g, false);
  Schedule s = exe->schedule();
  ASSERT_GT(s.params.size, 0u);
  for (BufferUse& u : s.thunks[0].uses)
    if (u.write) u.offset = s.params.offset, u.size = std::min<uint64_t>(u.size, s.params.size);
  EXPECT_THROW(verify_plan(s), Error);
}

// The verifier checks what each kernel declares from its params, not the
// planner against itself: a unary thunk whose element count grows past its
// slot is caught although the graph-derived uses are untouched.
TEST(PlanVerifier, RejectsAKernelDeclaringMoreThanItsNodeOwns) {
  Graph g;
  ValueId x = g.input("x", {5, 9}, DType::F32);
  g.output("y", g.tanh(g.relu(x)));
  auto exe = test::compile_cpu(g, false);
  Schedule s = exe->schedule();
  ASSERT_EQ(s.thunks.size(), 2u);
  EXPECT_NO_THROW(verify_plan(s));
  std::get<UnaryParams>(s.thunks[0].params).n += 1;
  try {
    verify_plan(s);
    FAIL() << "a kernel writing one element past its value was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
  }
}

// CompileOptions::verify_plan proves the plan inside compile() in release
// builds too; a whole encoder passes.
TEST(PlanVerifier, RunsInsideCompileWhenAsked) {
  EncoderShape shape;
  shape.layers = 2, shape.hidden = 64, shape.heads = 4, shape.ffn = 96, shape.vocab = 50, shape.seq = 7;
  shape.batch = 3;
  for (bool fuse : {false, true}) {
    CompileOptions o;
    o.fuse = fuse;
    o.verify_plan = true;
    EXPECT_NO_THROW(compile(build_encoder_demo(shape), o)) << (fuse ? "fused" : "unfused");
  }
}

}  // namespace
}  // namespace rlx
