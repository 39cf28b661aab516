// Whole graphs through compile(): the same graph, params and inputs on the
// CPU backend (the reference) and on the CUDA backend in every execution
// mode, with the fusion passes on, so fused thunks (merged QKV, narrowed
// attention and rope strides, add+norm, matmul epilogues) are what runs.
// Also the execution path (one graph launch per forward), replay after
// set_param, and two executables run interleaved.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/matvec_chain.h"
#include "models/encoder_demo.h"
#include "rlx/session.h"
#include "test_util.h"
#include "thunks/thunk.h"

namespace rlx {
namespace {

#define RLX_REQUIRE_GPU()                                                     \
  do {                                                                        \
    if (!::rlx::cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped"; \
  } while (0)

using Inputs = std::map<std::string, HostTensor>;

// Relative (to max |ref|) tolerance of a whole-graph result: set when f32
// matrix products ran on TF32 (now opt-in, CompileOptions::allow_tf32; full
// f32 reaches ~1e-6 in bench/gpu_parity.py); f16/bf16 intermediates round
// differently on each backend and the rounding compounds across layers.
double graph_tol(DType dt) {
  switch (dt) {
    case DType::F32: return 1e-3;
    case DType::F16: return 2e-2;
    case DType::BF16: return 5e-2;
    default: return 0;
  }
}

const char* mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::PerOp: return "perop";
    case ExecMode::Graph: return "graph";
    default: return "auto";
  }
}

uint64_t name_seed(const std::string& s, uint64_t salt) {
  uint64_t h = 1469598103934665603ull ^ salt;
  for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

// Deterministic params by name: norm scales near 1, everything else small
// enough that activations stay O(1) through the layers.
void fill_params(Executable& exe, uint64_t salt) {
  for (const Binding& b : exe.schedule().param_bindings) {
    size_t n = size_t(numel(b.shape));
    bool scale = b.name.find("gamma") != std::string::npos || b.name.find("norm") != std::string::npos ||
                 b.name.find("LayerNorm.weight") != std::string::npos;
    auto v = test::random_floats(n, name_seed(b.name, salt), scale ? 0.8f : -0.15f, scale ? 1.2f : 0.15f);
    exe.set_param_f32(b.name, v.data(), v.size());
  }
}

CompileOptions cuda_opts(ExecMode m) {
  CompileOptions o;
  o.device = Device::Cuda;
  o.mode = m;
  return o;
}

int thunks_of(const Executable& exe, const std::string& kind) {
  const auto& h = exe.report().thunk_histogram;
  auto it = h.find(kind);
  return it == h.end() ? 0 : it->second;
}

cuda::CudaExecutable& cuda_of(Executable& exe) { return dynamic_cast<cuda::CudaExecutable&>(exe.backend()); }

// Every output of the device arena is overwritten with NaN so an output the
// forward never writes shows up as NaN instead of a stale value.
void poison_outputs(Executable& exe) {
  for (const Binding& b : exe.schedule().output_bindings) {
    auto nan = test::nan_bytes(size_t(numel(b.shape)), b.dtype);
    exe.backend().write_binding(b, nan.data());
  }
}

void compare_all(const std::map<std::string, HostTensor>& got, const std::map<std::string, HostTensor>& ref,
                 const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (const auto& [name, r] : ref) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": output " << name << " missing";
    const HostTensor& g = it->second;
    ASSERT_EQ(g.dtype, r.dtype) << what << ": " << name;
    ASSERT_EQ(g.shape, r.shape) << what << ": " << name;
    if (r.dtype == DType::I32) {
      EXPECT_EQ(g.to_i32(), r.to_i32()) << what << ": " << name;
      continue;
    }
    test::expect_close(g.to_f32(), test::to_double(r.to_f32()), graph_tol(r.dtype), what + ": " + name);
  }
}

// The graph compiled for the CPU and for CUDA in `mode`, same params.
struct Pair {
  std::unique_ptr<Executable> cpu, gpu;
  Pair(const Graph& g, ExecMode mode, uint64_t salt = 1) {
    CompileOptions c;
    c.device = Device::Cpu;
    cpu = compile(g, c);
    gpu = compile(g, cuda_opts(mode));
    fill_params(*cpu, salt);
    fill_params(*gpu, salt);
  }
  void check(const Inputs& in, const std::string& what) {
    auto ref = cpu->run(in);
    poison_outputs(*gpu);
    auto got = gpu->run(in);
    compare_all(got, ref, what);
  }
};

HostTensor random_tensor(Shape s, DType dt, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  auto v = test::random_floats(size_t(numel(s)), seed, lo, hi);
  return HostTensor::from_f32(std::move(s), v, dt);
}

// ---- the BERT-shaped demo encoder ----

EncoderShape small_encoder(DType dt) {
  EncoderShape s;
  s.layers = 2, s.hidden = 96, s.heads = 4, s.ffn = 160, s.vocab = 211;
  s.batch = 3, s.seq = 37, s.dtype = dt;
  return s;
}

Inputs encoder_inputs(const EncoderShape& s, uint64_t seed) {
  auto ids = test::random_ints(size_t(s.batch * s.seq), seed, 0, s.vocab - 1);
  std::vector<int32_t> mask(ids.size(), 1);
  for (int b = 0; b < s.batch; ++b)  // row b has 5*b padded positions at the end
    for (int t = s.seq - 5 * b; t < s.seq; ++t) mask[size_t(b * s.seq + t)] = 0;
  return {{"input_ids", HostTensor::from_i32({s.batch, s.seq}, ids)},
          {"attention_mask", HostTensor::from_i32({s.batch, s.seq}, mask)}};
}

class EncoderParity : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(EncoderParity, MatchesCpu) {
  RLX_REQUIRE_GPU();
  auto [dt, mode] = GetParam();
  EncoderShape s = small_encoder(dt);
  Graph g = build_encoder_demo(s);
  const auto paths_before = cuda::attention_path_counts();
  Pair p(g, mode);
  const auto paths_after = cuda::attention_path_counts();
  if (dt != DType::F32 && cuda::cudnn_attention_built()) {
    // cuDNN serves every layer; the first writes the mask bias, the rest reuse it.
    EXPECT_EQ(paths_after.cudnn - paths_before.cudnn, s.layers);
    EXPECT_EQ(paths_after.mask_bias_reused - paths_before.mask_bias_reused, s.layers - 1);
  }
  // The fusions this test is about must actually have fired.
  EXPECT_GT(p.gpu->report().nodes_before, p.gpu->report().nodes_after);
  // Per layer: merged QKV, attention output, FFN in (bias+GELU epilogue) and
  // out products; attention reading the merged QKV through strides; two
  // add+norms. Only the embedding sum stays a separate add.
  const std::string sched = p.gpu->report().schedule;
  EXPECT_EQ(thunks_of(*p.gpu, "binary"), 1) << sched;
  EXPECT_EQ(thunks_of(*p.gpu, "matmul"), 4 * s.layers) << sched;
  EXPECT_EQ(thunks_of(*p.gpu, "attention"), s.layers) << sched;
  EXPECT_EQ(thunks_of(*p.gpu, "norm"), 1 + 2 * s.layers) << sched;
  EXPECT_EQ(p.gpu->schedule().thunks.size(), size_t(4 + 7 * s.layers)) << sched;
  std::string what = std::string("encoder ") + std::string(dtype_name(dt)) + " " + mode_name(mode);
  p.check(encoder_inputs(s, 5), what);
  p.check(encoder_inputs(s, 6), what + " (second inputs)");
}

INSTANTIATE_TEST_SUITE_P(Modes, EncoderParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

// ---- a LLaMA-style pre-norm decoder block ----

struct LlamaShape {
  int64_t batch = 2, seq = 19, hidden = 96, q_heads = 6, kv_heads = 2, head_dim = 16, ffn = 136;
};

Graph build_llama_block(const LlamaShape& s, DType dt) {
  Graph g;
  const int64_t H = s.hidden, D = s.head_dim;
  ValueId x = g.input("x", {s.batch, s.seq, H}, dt);
  ValueId pos = g.input("positions", {s.batch, s.seq}, DType::I32);
  ValueId h = g.rms_norm(x, g.param("attn_norm", {H}, dt), 1e-5f);
  ValueId q = g.matmul(h, g.param("wq", {s.q_heads * D, H}, dt), false, true);
  ValueId k = g.matmul(h, g.param("wk", {s.kv_heads * D, H}, dt), false, true);
  ValueId v = g.matmul(h, g.param("wv", {s.kv_heads * D, H}, dt), false, true);
  RopeAttrs rq;
  rq.heads = int(s.q_heads), rq.head_dim = int(D), rq.theta = 10000.f;
  RopeAttrs rk = rq;
  rk.heads = int(s.kv_heads);
  q = g.rope(q, pos, rq);
  k = g.rope(k, pos, rk);
  AttentionAttrs at;
  at.q_heads = int(s.q_heads), at.kv_heads = int(s.kv_heads), at.head_dim = int(D);
  at.scale = 1.f / std::sqrt(float(D));
  at.mask = MaskKind::Causal;
  ValueId a = g.attention(q, k, v, -1, at);
  ValueId x2 = g.add(x, g.matmul(a, g.param("wo", {H, s.q_heads * D}, dt), false, true));
  ValueId h2 = g.rms_norm(x2, g.param("ffn_norm", {H}, dt), 1e-5f);
  ValueId gate = g.matmul(h2, g.param("w_gate", {s.ffn, H}, dt), false, true);
  ValueId up = g.matmul(h2, g.param("w_up", {s.ffn, H}, dt), false, true);
  ValueId f = g.mul(g.silu(gate), up);
  ValueId out = g.add(x2, g.matmul(f, g.param("w_down", {H, s.ffn}, dt), false, true));
  g.output("out", out);
  return g;
}

Inputs llama_inputs(const LlamaShape& s, DType dt, uint64_t seed) {
  std::vector<int32_t> pos(size_t(s.batch * s.seq));
  for (int64_t b = 0; b < s.batch; ++b)  // row b continues a cache of 3*b tokens
    for (int64_t t = 0; t < s.seq; ++t) pos[size_t(b * s.seq + t)] = int32_t(t + 3 * b);
  return {{"x", random_tensor({s.batch, s.seq, s.hidden}, dt, seed)},
          {"positions", HostTensor::from_i32({s.batch, s.seq}, pos)}};
}

class LlamaParity : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(LlamaParity, MatchesCpu) {
  RLX_REQUIRE_GPU();
  auto [dt, mode] = GetParam();
  LlamaShape s;
  Graph g = build_llama_block(s, dt);
  Pair p(g, mode);
  // q/k/v merged into one product and gate/up into another; rope reads the
  // narrowed q and k in place; the residual add fuses into the second norm.
  EXPECT_EQ(thunks_of(*p.gpu, "matmul"), 4) << p.gpu->report().schedule;
  EXPECT_EQ(thunks_of(*p.gpu, "rope"), 2) << p.gpu->report().schedule;
  EXPECT_EQ(thunks_of(*p.gpu, "norm"), 2) << p.gpu->report().schedule;
  std::string what = std::string("llama block ") + std::string(dtype_name(dt)) + " " + mode_name(mode);
  p.check(llama_inputs(s, dt, 21), what);
  p.check(llama_inputs(s, dt, 22), what + " (second inputs)");
}

INSTANTIATE_TEST_SUITE_P(Modes, LlamaParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

// ---- every remaining op through compile ----

Graph build_op_zoo(DType dt) {
  Graph g;
  ValueId x = g.input("x", {3, 7, 33}, dt);
  ValueId y = g.input("y", {7, 3, 33}, dt);
  ValueId ids = g.input("ids", {5, 2}, DType::I32);
  ValueId labels = g.input("labels", {21}, DType::I32);
  ValueId table = g.param("table", {13, 33}, dt);

  ValueId p = g.permute(y, {1, 0, 2});                          // [3, 7, 33]
  ValueId s = g.sub(x, p);
  ValueId d = g.div(g.add(x, g.relu(p)), g.add(g.mul(p, p), g.constant_f32({1}, dt, {2.f})));
  ValueId c = g.concat({s, g.tanh(d), g.gelu_tanh(x)}, 2);     // [3, 7, 99]
  g.output("concat", c);
  g.output("transposed", g.transpose(g.narrow(c, 2, 5, 17), 0, 1));  // strided narrow + permute
  g.output("cast_f32", g.cast(g.gelu(s), DType::F32));
  g.output("sum", g.reduce(c, -1, ReduceKind::Sum));
  g.output("mean", g.reduce(c, 1, ReduceKind::Mean, true));
  g.output("max", g.reduce(c, 0, ReduceKind::Max));
  g.output("softmax", g.softmax(c));
  ValueId logits = g.reshape(g.narrow(c, 2, 0, 41), {21, 41});
  g.output("xent", g.softmax_cross_entropy(logits, labels));
  g.output("gathered", g.gather(table, ids));                 // [5, 2, 33]
  ValueId ln = g.layer_norm(x, g.param("ln_gamma", {33}, dt), -1, 1e-5f);
  g.output("ln_no_beta", ln);
  return g;
}

class OpZooParity : public ::testing::TestWithParam<std::tuple<DType, ExecMode>> {};

TEST_P(OpZooParity, MatchesCpu) {
  RLX_REQUIRE_GPU();
  auto [dt, mode] = GetParam();
  Graph g = build_op_zoo(dt);
  Pair p(g, mode);
  // run() rejects out-of-range ids and labels before launching anything;
  // the kernels' own out-of-range behaviour is covered per thunk.
  auto labels = test::random_ints(21, 8, 0, 40);
  auto ids = test::random_ints(10, 9, 0, 12);
  Inputs in{{"x", random_tensor({3, 7, 33}, dt, 31, -2.f, 2.f)},
            {"y", random_tensor({7, 3, 33}, dt, 32, -2.f, 2.f)},
            {"ids", HostTensor::from_i32({5, 2}, ids)},
            {"labels", HostTensor::from_i32({21}, labels)}};
  p.check(in, std::string("op zoo ") + std::string(dtype_name(dt)) + " " + mode_name(mode));
}

INSTANTIATE_TEST_SUITE_P(Modes, OpZooParity,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                                            ::testing::Values(ExecMode::PerOp, ExecMode::Graph)));

// ---- execution path, replay and interleaving ----

TEST(GraphPath, OneGraphLaunchPerForwardAndReplayAfterSetParam) {
  RLX_REQUIRE_GPU();
  EncoderShape s = small_encoder(DType::F16);
  Graph g = build_encoder_demo(s);
  Pair p(g, ExecMode::Graph);
  auto& ce = cuda_of(*p.gpu);
  ASSERT_EQ(ce.mode(), ExecMode::Graph);
  EXPECT_EQ(ce.schedule_string(), std::string(p.gpu->schedule().thunks.size(), '+'));
  EXPECT_GE(ce.graph_kernel_nodes(), int(p.gpu->schedule().thunks.size()));

  Inputs in = encoder_inputs(s, 11);
  const cuda::ExecCounters c0 = ce.counters();
  p.check(in, "graph mode, first params");
  const cuda::ExecCounters c1 = ce.counters();
  EXPECT_EQ(c1.graph_launches - c0.graph_launches, 1u) << "one forward must be one graph launch";
  EXPECT_EQ(c1.perop_launches, c0.perop_launches) << "nothing may run outside the graph";
  EXPECT_EQ(c1.forwards - c0.forwards, 1u);
  auto before = p.gpu->run(in);

  // New params: the recorded graph reads the arena, so a replay must see them.
  fill_params(*p.cpu, 2);
  fill_params(*p.gpu, 2);
  p.check(in, "graph mode, replay after set_param");
  auto after = p.gpu->run(in);
  auto b = before.at("last_hidden_state").to_f32(), a = after.at("last_hidden_state").to_f32();
  size_t changed = 0;
  for (size_t i = 0; i < a.size(); ++i) changed += a[i] != b[i];
  EXPECT_GT(changed, a.size() / 2) << "replay after set_param returned the old result";

  // Only the word embedding changes: a single param, written in place.
  std::vector<float> emb(size_t(s.vocab) * size_t(s.hidden), 0.f);
  p.cpu->set_param_f32("embeddings.word_embeddings.weight", emb.data(), emb.size());
  p.gpu->set_param_f32("embeddings.word_embeddings.weight", emb.data(), emb.size());
  p.check(in, "graph mode, replay after one set_param");
  EXPECT_EQ(ce.counters().perop_launches, c0.perop_launches);
}

// Two executables, each with its own arena and graph; the second is larger
// so its arena lands elsewhere. Interleaved runs must each read their own.
TEST(GraphPath, TwoExecutablesInterleaved) {
  RLX_REQUIRE_GPU();
  EncoderShape s1 = small_encoder(DType::F16);
  EncoderShape s2 = s1;
  s2.layers = 3, s2.hidden = 128, s2.ffn = 256, s2.seq = 45;
  Graph g1 = build_encoder_demo(s1), g2 = build_encoder_demo(s2);
  Pair p1(g1, ExecMode::Graph, 3);
  Pair p2(g2, ExecMode::Graph, 4);
  ASSERT_NE(cuda_of(*p1.gpu).arena(), cuda_of(*p2.gpu).arena());
  for (int round = 0; round < 3; ++round) {
    std::string r = " round " + std::to_string(round);
    p1.check(encoder_inputs(s1, 40 + round), "first executable" + r);
    p2.check(encoder_inputs(s2, 50 + round), "second executable" + r);
    p1.check(encoder_inputs(s1, 60 + round), "first executable again" + r);
  }
  EXPECT_EQ(cuda_of(*p1.gpu).counters().perop_launches, 0u);
  EXPECT_EQ(cuda_of(*p2.gpu).counters().perop_launches, 0u);
}

// Pipelined submit/wait through the whole-graph path equals the CPU result
// for every run, inputs differing per run.
TEST(GraphPath, PipelinedEncoderMatchesCpu) {
  RLX_REQUIRE_GPU();
  EncoderShape s = small_encoder(DType::F16);
  Graph g = build_encoder_demo(s);
  Pair p(g, ExecMode::Graph);
  std::vector<Inputs> batches;
  for (int i = 0; i < 9; ++i) batches.push_back(encoder_inputs(s, 100 + uint64_t(i)));
  auto outs = p.gpu->run_pipelined(batches);
  ASSERT_EQ(outs.size(), batches.size());
  for (size_t i = 0; i < batches.size(); ++i)
    compare_all(outs[i], p.cpu->run(batches[i]), "pipelined run " + std::to_string(i));
}

// Two shapes of one builder share one arena and its params (as the embedder's
// buckets do): each run restores its own constants (the position ids differ),
// params set once serve both, and the graphs stay valid (the arena never moves).
TEST(GraphPath, SharedArenaAcrossShapes) {
  RLX_REQUIRE_GPU();
  EncoderShape big = small_encoder(DType::F16), little = big;
  big.seq = 61;
  little.seq = 17;
  CompileOptions co;
  co.device = Device::Cuda;
  co.mode = ExecMode::Graph;
  co.arena_share = make_arena_share(planned_arena_bytes(build_encoder_demo(big), co));
  auto gpu_little = compile(build_encoder_demo(little), co);
  auto gpu_big = compile(build_encoder_demo(big), co);
  ASSERT_EQ(cuda_of(*gpu_little).arena(), cuda_of(*gpu_big).arena());
  fill_params(*gpu_little, 5);
  gpu_big->share_params_with(*gpu_little);
  CompileOptions cpu;
  cpu.device = Device::Cpu;
  auto cpu_little = compile(build_encoder_demo(little), cpu), cpu_big = compile(build_encoder_demo(big), cpu);
  fill_params(*cpu_little, 5);
  fill_params(*cpu_big, 5);
  for (int round = 0; round < 3; ++round) {
    Inputs a = encoder_inputs(little, 70 + uint64_t(round)), b = encoder_inputs(big, 80 + uint64_t(round));
    compare_all(gpu_little->run(a), cpu_little->run(a), "little shape round " + std::to_string(round));
    compare_all(gpu_big->run(b), cpu_big->run(b), "big shape round " + std::to_string(round));
  }
  EXPECT_EQ(cuda_of(*gpu_little).counters().perop_launches, 0u);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// The CUDA backend claims only what its kernels register: a gather over an
// i32 table runs on the CPU but has no CUDA kernel, so compile() refuses it
// and names the node, before anything is prepared or launched.
// ---- a decode step's feed-forward block over params ----

// x + down(silu(gate(n)) * up(n)) with n = rms_norm(x) and a biased product
// beside it, every weight a param: compiled for CUDA the norm, the glu and
// the residual fold into the matrix-vector kernels (the FFN's long rows on
// the split kernel). Its constant weights load evict-first from L2
// (weight_loads.cuh, the default) or with the normal policy
// (RLX_WEIGHTS_EVICT_FIRST=0): both against the CPU on NaN-poisoned
// outputs, and the launches must take evict-first exactly when on.
TEST(GraphPath, DecodeProductsOverParamsWithEitherL2Policy) {
  RLX_REQUIRE_GPU();
  constexpr int64_t kHidden = 264, kFfn = 2824;
  for (DType dt : {DType::F16, DType::BF16}) {
    for (int64_t rows : {int64_t(1), int64_t(3)}) {
      Graph g;
      const ValueId x = g.input("x", {rows, kHidden}, dt);
      const ValueId n = g.rms_norm(x, g.param("ffn_norm.gamma", {kHidden}, dt), 1e-5f);
      auto proj = [&](ValueId in, const std::string& name, int64_t out, int64_t k) {
        return g.matmul(in, g.param(name, {out, k}, dt), false, true);
      };
      const ValueId gu = g.swiglu(proj(n, "w_gate", kFfn, kHidden), proj(n, "w_up", kFfn, kHidden), Activation::Silu);
      g.output("h", g.add(x, proj(gu, "w_down", kHidden, kFfn)));
      g.output("side", g.add(proj(x, "w_side", 77, kHidden), g.param("b_side", {77}, dt)));
      const Inputs in{{"x", random_tensor({rows, kHidden}, dt, 31 + uint64_t(rows))}};
      for (const char* on : {"1", "0"}) {
        const std::string what = std::string(dtype_name(dt)) + " rows " + std::to_string(rows) +
                                 " RLX_WEIGHTS_EVICT_FIRST=" + on;
        setenv("RLX_WEIGHTS_EVICT_FIRST", on, 1);
        setenv("RLX_MATMUL", "gemv", 1);
        const int64_t before = cuda::evict_first_launches();  // launches may come at compile or first run
        Pair p(g, ExecMode::Graph, 7);
        p.check(in, what);
        EXPECT_GE(thunks_of(*p.gpu, "matmul"), 3) << what;
        EXPECT_EQ(cuda::evict_first_launches() > before, *on == '1') << what;
      }
    }
  }
  unsetenv("RLX_WEIGHTS_EVICT_FIRST");
  unsetenv("RLX_MATMUL");
}

// A decode layer's products back to back (norm + product, product +
// residual, norm + gate/up, the long-row down product + residual, norm +
// head) run as one matrix-vector chain (matvec_chain.h): the chained
// executable against the CPU and against the same graph with
// RLX_MATVEC_CHAIN=0, over several replays (the counters only grow), on
// NaN-poisoned outputs; the chain must hold all five products.
// One decode step's products at odd sizes: norm+QKV, output+residual,
// norm+gate/up (merged; the SwiGLU stays a thunk of its own here),
// down+residual (split), norm+head: chains of 3 and 2.
Graph decode_products_graph(DType dt) {
  constexpr int64_t kHidden = 264, kQkv = 520, kFfn = 2824, kHead = 77;
  Graph g;
  const ValueId x = g.input("x", {1, kHidden}, dt);
  auto proj = [&](ValueId in, const std::string& name, int64_t out, int64_t k) {
    return g.matmul(in, g.param(name, {out, k}, dt), false, true);
  };
  auto norm = [&](ValueId in, const std::string& name) { return g.rms_norm(in, g.param(name, {kHidden}, dt), 1e-5f); };
  const ValueId qkv = proj(norm(x, "attn_norm"), "w_qkv", kQkv, kHidden);
  const ValueId h1 = g.add(x, proj(qkv, "w_o", kHidden, kQkv));
  const ValueId n2 = norm(h1, "ffn_norm");
  const ValueId gu = g.swiglu(proj(n2, "w_gate", kFfn, kHidden), proj(n2, "w_up", kFfn, kHidden), Activation::Silu);
  const ValueId h2 = g.add(h1, proj(gu, "w_down", kHidden, kFfn));
  g.output("logits", proj(norm(h2, "out_norm"), "w_head", kHead, kHidden));
  g.output("h", h2);
  return g;
}

Inputs decode_products_input(DType dt, uint64_t seed) { return {{"x", random_tensor({1, 264}, dt, seed)}}; }

// The thunks of an executable's schedule, for a failure message.
std::string schedule_labels(const Executable& exe) {
  std::string s;
  for (const auto& t : exe.schedule().thunks) s += "\n  " + t.label + " (" + thunk_name(t.kind()) + ")";
  return s;
}

TEST(GraphPath, MatVecChainEqualsProductsOneByOne) {
  RLX_REQUIRE_GPU();
  for (DType dt : {DType::F16, DType::BF16}) {
    const Graph g = decode_products_graph(dt);
    // A graph-mode executable enqueues its chains when it records the
    // forward (compile or first run), not on each replay.
    const int64_t before = cuda::matvec_chain_launches();
    setenv("RLX_MATMUL", "gemv", 1);
    setenv("RLX_MATVEC_CHAIN", "1", 1);
    Pair chained(g, ExecMode::Graph, 11);
    setenv("RLX_MATVEC_CHAIN", "0", 1);
    Pair apart(g, ExecMode::Graph, 11);
    unsetenv("RLX_MATVEC_CHAIN");
    const std::string name(dtype_name(dt));
    EXPECT_EQ(cuda_of(*chained.gpu).matvec_chains(), 2) << name << schedule_labels(*chained.gpu);
    EXPECT_EQ(cuda_of(*chained.gpu).chained_products(), 5) << name;
    EXPECT_EQ(cuda_of(*apart.gpu).matvec_chains(), 0) << name;
    for (uint64_t step = 0; step < 4; ++step) {
      const Inputs in = decode_products_input(dt, 101 + step);
      const std::string what = name + " step " + std::to_string(step);
      chained.check(in, what + " chained");
      apart.check(in, what + " one by one");
      // The same kernels' tiles in the same order: equal to the last bit.
      poison_outputs(*chained.gpu);
      poison_outputs(*apart.gpu);
      const auto a = chained.gpu->run(in), b = apart.gpu->run(in);
      for (const char* out : {"logits", "h"})
        EXPECT_EQ(a.at(out).bytes, b.at(out).bytes) << what << " " << out;
    }
    EXPECT_GE(cuda::matvec_chain_launches() - before, cuda_of(*chained.gpu).matvec_chains()) << name;
  }
  unsetenv("RLX_MATMUL");
}

// Two executables, each with a chain whose grid fills the GPU, replayed at
// once from two threads on their own streams: the cooperative launch keeps
// either from holding part of the GPU while waiting on the rest (without
// it the waits would stall until the 10 s trap). Every result equals the
// one-by-one products on the same input, bit for bit.
TEST(GraphPath, MatVecChainsOnTwoStreamsAtOnce) {
  RLX_REQUIRE_GPU();
  constexpr DType dt = DType::F16;
  constexpr int kSteps = 40;
  const Graph g = decode_products_graph(dt);
  setenv("RLX_MATMUL", "gemv", 1);
  setenv("RLX_MATVEC_CHAIN", "1", 1);
  Pair first(g, ExecMode::Graph, 11), second(g, ExecMode::Graph, 11);
  setenv("RLX_MATVEC_CHAIN", "0", 1);
  Pair apart(g, ExecMode::Graph, 11);
  unsetenv("RLX_MATVEC_CHAIN");
  unsetenv("RLX_MATMUL");
  ASSERT_GE(cuda_of(*first.gpu).matvec_chains(), 1);
  ASSERT_GE(cuda_of(*second.gpu).matvec_chains(), 1);
  std::vector<std::map<std::string, HostTensor>> want;
  for (int s = 0; s < kSteps; ++s) want.push_back(apart.gpu->run(decode_products_input(dt, 300 + s)));
  std::vector<std::string> mismatches[2];
  auto replay = [&](Executable& exe, int which) {
    for (int s = 0; s < kSteps; ++s) {
      const auto got = exe.run(decode_products_input(dt, 300 + s));
      for (const char* out : {"logits", "h"})
        if (got.at(out).bytes != want[size_t(s)].at(out).bytes)
          mismatches[which].push_back("step " + std::to_string(s) + " " + out);
    }
  };
  std::thread other([&] { replay(*second.gpu, 1); });
  replay(*first.gpu, 0);
  other.join();
  for (int w = 0; w < 2; ++w)
    EXPECT_TRUE(mismatches[w].empty()) << "executable " << w << ": " << mismatches[w].size() << " mismatches, first "
                                       << (mismatches[w].empty() ? "" : mismatches[w][0]);
}

TEST(CudaSupport, UnregisteredKindAndDtypeFailsAtCompileNamingTheNode) {
  RLX_REQUIRE_GPU();
  EXPECT_TRUE(cuda_backend()->supports(ThunkKind::Gather, DType::F16));
  EXPECT_FALSE(cuda_backend()->supports(ThunkKind::Gather, DType::I32));
  EXPECT_TRUE(cpu_backend().supports(ThunkKind::Gather, DType::I32));
  Graph g;
  ValueId table = g.input("table", {11, 3}, DType::I32);
  ValueId ids = g.input("ids", {5}, DType::I32);
  g.output("rows", g.add_node(OpKind::Gather, {table, ids}, NoAttrs{}, "int_lookup")[0]);
  CompileOptions o;
  o.device = Device::Cuda;
  try {
    compile(g, o);
    FAIL() << "compile accepted an i32 gather on CUDA";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'int_lookup'"), std::string::npos) << m;
    EXPECT_NE(m.find("gather kernel for i32"), std::string::npos) << m;
  }
  o.device = Device::Cpu;
  EXPECT_NO_THROW(compile(g, o));
}

}  // namespace
}  // namespace rlx
