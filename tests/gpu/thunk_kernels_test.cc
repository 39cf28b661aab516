// Every thunk kind x {f32, f16, bf16} x {perop, graph} on the GPU,
// against double-precision references on random data of odd sizes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/kernels.h"
#include "gpu/gpu_harness.h"
#include "op_cases.h"

namespace rlx::gputest {
namespace {

using Param = std::tuple<DType, ExecMode>;

class ThunkKernels : public ::testing::TestWithParam<Param> {
 public:
  void SetUp() override { RLX_REQUIRE_GPU(); }
  DType dt() const { return std::get<0>(GetParam()); }
  ExecMode mode() const { return std::get<1>(GetParam()); }

  // Runs the case twice (the second time on fresh inputs where `refresh` is
  // given), comparing each output to `reference`, and asserts the path taken.
  template <class Ref>
  void check(Case& c, Ref reference, double tol_scale = 1.0, std::vector<std::string> refresh = {}) {
    auto exe = c.prepare(mode());
    auto& cu = as_cuda(*exe);
    const Schedule& s = c.prepared_schedule();
    for (int round = 0; round < 2; ++round) {
      if (round == 1)
        for (const std::string& name : refresh) c.random(name);
      auto got = c.run(*exe);
      auto want = reference();
      for (auto& [name, ref] : want)
        expect_close(got.at(name), ref, tol_for(c.buf(name).dtype, tol_scale),
                     name + " (" + std::string(dtype_name(dt())) + ", " + mode_name(mode()) + ", round " +
                         std::to_string(round) + ")");
    }
    const uint64_t runs = 2, n = s.thunks.size();
    EXPECT_EQ(cu.counters().forwards, runs);
    if (mode() == ExecMode::Graph) {
      EXPECT_EQ(cu.counters().graph_launches, runs);
      EXPECT_EQ(cu.counters().perop_launches, 0u);
      EXPECT_EQ(cu.schedule_string(), std::string(n, '+'));
      int sum = 0;
      for (size_t i = 0; i < n; ++i) {
        // Library-backed thunks (cuBLASLt matmul; cuDNN attention, which adds a
        // mask-to-bias kernel before the call) may
        // record several kernels; every other thunk is exactly one.
        const bool library = s.thunks[i].kind() == ThunkKind::MatMul || s.thunks[i].kind() == ThunkKind::Attention;
        if (!library) EXPECT_EQ(cu.thunk_kernel_nodes()[i], 1) << s.thunks[i].label;
        else EXPECT_GE(cu.thunk_kernel_nodes()[i], 1) << s.thunks[i].label;
        sum += cu.thunk_kernel_nodes()[i];
      }
      EXPECT_EQ(cu.graph_kernel_nodes(), sum);
      int copies = 0;
      for (const Binding& b : s.input_bindings) copies += b.bytes() > 0;
      for (const Binding& b : s.output_bindings) copies += b.bytes() > 0;
      EXPECT_EQ(cu.graph_memcpy_nodes(), copies);
    } else {
      EXPECT_EQ(cu.counters().graph_launches, 0u);
      EXPECT_EQ(cu.counters().perop_launches, runs * n);
      EXPECT_EQ(cu.schedule_string(), std::string(n, '-'));
    }
  }
};

// Matrix products, binary broadcast, activations, softmax, norms and reductions are
// cases of the shared op-case table (tests/op_cases.h), run on the GPU by
// tests/gpu/op_cases_test.cc against the same references and bounds.

// ---- binary / unary / copy -----------------------------------------------

// The identity (no graph op lowers to it; the other activations are op cases).
TEST_P(ThunkKernels, UnaryIdentity) {
  for (Activation act : {Activation::None}) {
    Case c;
    UnaryParams p{};
    p.n = 129 * 7;
    p.x = c.add("x", dt(), p.n, Role::Input);
    p.out = c.add("out", dt(), p.n, Role::Output);
    p.dtype = dt();
    p.act = act;
    c.random("x", -4.f, 4.f);
    c.thunk(ThunkKind::Unary, p, "unary 'x'");
    auto ref = [&] {
      std::vector<double> out(static_cast<size_t>(p.n));
      for (int64_t i = 0; i < p.n; ++i) out[size_t(i)] = act_ref(act, c.in("x", i));
      return std::map<std::string, std::vector<double>>{{"out", out}};
    };
    check(c, ref, 1.0, {"x"});
  }
}

// Transpose [7, 33] -> [33, 7] while converting f32 -> dt.
TEST_P(ThunkKernels, CopyPermuteCast) {
  Case c;
  CopyParams p{};
  const int64_t r = 7, k = 33;
  p.src = c.add("src", DType::F32, r * k, Role::Input);
  p.dst = c.add("dst", dt(), r * k, Role::Output);
  p.n = r * k;
  p.rank = 2;
  p.shape[0] = k; p.shape[1] = r;  // iterate in destination order
  p.src_stride[0] = 1; p.src_stride[1] = k;
  p.dst_stride[0] = r; p.dst_stride[1] = 1;
  p.src_dtype = DType::F32;
  p.dst_dtype = dt();
  c.random("src");
  c.thunk(ThunkKind::Copy, p, "copy 'perm'");
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(p.n));
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < r; ++j) out[size_t(i * r + j)] = c.in("src", j * k + i);
    return std::map<std::string, std::vector<double>>{{"dst", out}};
  };
  check(c, ref, 1.0, {"src"});
}

// Narrow: every other column of [5, 12] into [5, 6], same dtype (bit copy).
TEST_P(ThunkKernels, CopyNarrowSameType) {
  Case c;
  CopyParams p{};
  p.src = c.add("src", dt(), 5 * 12, Role::Input);
  p.dst = c.add("dst", dt(), 5 * 6, Role::Output);
  p.n = 30;
  p.rank = 2;
  p.shape[0] = 5; p.shape[1] = 6;
  p.src_stride[0] = 12; p.src_stride[1] = 2;
  p.dst_stride[0] = 6; p.dst_stride[1] = 1;
  p.src_dtype = p.dst_dtype = dt();
  c.random("src");
  c.thunk(ThunkKind::Copy, p, "copy 'narrow'");
  auto ref = [&] {
    std::vector<double> out(30);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 6; ++j) out[size_t(i * 6 + j)] = c.in("src", i * 12 + 2 * j);
    return std::map<std::string, std::vector<double>>{{"dst", out}};
  };
  check(c, ref, 0.0, {"src"});  // a bit copy is exact
}

// ---- norm / softmax / xent -------------------------------------------------

// Compiles (unfused, on CUDA, in the test's mode and dtype) every op case
// whose thunk is `thunk` and calls f(case, params) for each of its thunks of
// params type P.
template <class P, class F>
void for_each_case_thunk(const ThunkKernels& t, const std::string& thunk, F&& f) {
  for (const test::OpCase& oc : test::op_cases()) {
    if (oc.thunk != thunk) continue;
    CompileOptions o;
    o.fuse = false;
    o.device = Device::Cuda;
    o.mode = t.mode();
    auto exe = compile(oc.build(t.dt()).graph, o);
    for (const Thunk& th : exe->schedule().thunks)
      if (const auto* p = std::get_if<P>(&th.params)) f(oc, p);
  }
}

// The norm op cases take the kernel their row length promises: rows of
// whole 16-byte chunks a warp each up to 128 chunks, a block each (1, 2 and
// 4 chunks per thread) beyond, the others the general one. Read from the compiled schedule, whose
// bindings are 16-byte aligned in the (256-byte aligned) arena.
TEST_P(ThunkKernels, NormCasesTakeTheVariantOfTheirRowLength) {
  int seen = 0;
  std::map<std::string, int> variants;
  for_each_case_thunk<NormParams>(*this, "norm", [&](const test::OpCase& oc, const NormParams* p) {
    ++seen;
    const int64_t ve = 16 / int64_t(dtype_size(dt()));
    EXPECT_STREQ(cuda::norm_variant(*p, nullptr), p->cols % ve != 0 ? "general" : p->cols / ve <= 128 ? "warp" : "vec")
        << oc.name;
    ++variants[cuda::norm_variant(*p, nullptr)];
  });
  EXPECT_GE(seen, 10);  // the ten norm cases of the table
  // Every dtype's table reaches all three kernels.
  EXPECT_GE(variants["warp"], 1);
  EXPECT_GE(variants["vec"], 2);
  EXPECT_GE(variants["general"], 1);
}

// The binary op cases with operands contiguous along the last axis in whole
// 16-byte chunks take the vectorized kernel, the others the general one.
TEST_P(ThunkKernels, BinaryCasesTakeTheVariantOfTheirLayout) {
  std::map<std::string, int> variants;
  for_each_case_thunk<BinaryParams>(*this, "binary", [&](const test::OpCase& oc, const BinaryParams* p) {
    const bool rows = oc.name.find("_rows") != std::string::npos;
    EXPECT_STREQ(cuda::binary_variant(*p, nullptr), rows ? "vec" : "general") << oc.name;
    ++variants[cuda::binary_variant(*p, nullptr)];
  });
  EXPECT_EQ(variants["vec"], 4);
  EXPECT_GE(variants["general"], 4);  // the broadcast cases, and other cases' binary thunks
}

// Bad labels (and bad gather ids below) reach only a hand-built thunk:
// run() refuses them before a graph runs, so no op case can.
TEST_P(ThunkKernels, SoftmaxCrossEntropyWithBadLabels) {
  Case c;
  SoftmaxCEParams p{};
  p.rows = 9; p.classes = 129; p.dtype = dt();
  p.logits = c.add("logits", dt(), p.rows * p.classes, Role::Input);
  p.labels = c.add("labels", DType::I32, p.rows, Role::Input);
  p.out = c.add("loss", dt(), p.rows, Role::Output);
  c.random("logits", -5.f, 5.f);
  c.set_i32("labels", {0, 128, 5, -1, 64, 129, 7, 100, 1});
  c.thunk(ThunkKind::SoftmaxCrossEntropy, p, "softmax_xent 'loss'");
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(p.rows));
    for (int64_t r = 0; r < p.rows; ++r) {
      int64_t label = int64_t(c.in("labels", r));
      double m = -1e300, s = 0;
      for (int64_t j = 0; j < p.classes; ++j) m = std::max(m, c.in("logits", r * p.classes + j));
      for (int64_t j = 0; j < p.classes; ++j) s += std::exp(c.in("logits", r * p.classes + j) - m);
      out[size_t(r)] = label < 0 || label >= p.classes ? std::nan("")
                                                       : m + std::log(s) - c.in("logits", r * p.classes + label);
    }
    return std::map<std::string, std::vector<double>>{{"loss", out}};
  };
  check(c, ref, 2.0, {"logits"});
}

// ---- attention -------------------------------------------------------------

struct Att {
  int64_t batch, sq, skv;
  int32_t qh, kvh, d;
  MaskKind mask;
  bool packed;  // q, k, v read from one [.., 3 * heads * d] buffer with offsets
  bool aligned_rows = false;      // packed rows without the odd padding: 16-byte loads apply
  const char* variant = nullptr;  // the kernel expected to serve the case, when given
};

// The shape of an attention case, scaled by 1 / sqrt(head_dim).
AttentionParams attention_shape(int64_t batch, int64_t sq, int64_t skv, int32_t qh, int32_t kvh, int32_t d,
                                MaskKind mask, DType dt) {
  AttentionParams p{};
  p.batch = batch; p.sq = sq; p.skv = skv;
  p.q_heads = qh; p.kv_heads = kvh; p.head_dim = d;
  p.scale = 1.f / std::sqrt(float(d));
  p.mask_kind = mask;
  p.dtype = dt;
  return p;
}

// Runs a case on rlx's own kernels (RLX_ATTENTION=own) and then on the
// default choice, which must be cuDNN exactly where `cudnn_eligible`.
template <class Once>
void on_both_attention_paths(bool cudnn_eligible, Once once) {
  for (const char* path : {"own", "auto"}) {
    SCOPED_TRACE(std::string("RLX_ATTENTION=") + path);
    setenv("RLX_ATTENTION", path, 1);
    const auto before = cuda::attention_path_counts();
    once();
    const auto after = cuda::attention_path_counts();
    const bool want_cudnn = cudnn_eligible && std::string(path) == "auto";
    EXPECT_EQ(after.cudnn > before.cudnn, want_cudnn);
    EXPECT_EQ(after.own > before.own, !want_cudnn);
  }
  unsetenv("RLX_ATTENTION");
}

void attention_case_once(ThunkKernels& t, DType dt, const Att& a) {
  Case c;
  AttentionParams p = attention_shape(a.batch, a.sq, a.skv, a.qh, a.kvh, a.d, a.mask, dt);
  const int64_t qw = int64_t(a.qh) * a.d, kw = int64_t(a.kvh) * a.d;
  if (a.packed) {  // self-attention, sq == skv: one fused qkv row per token
    const int64_t row = qw + 2 * kw + (a.aligned_rows ? 0 : 5);  // padded row length
    p.q = p.k = p.v = c.add("qkv", dt, a.batch * a.sq * row, Role::Input);
    p.q_offset = 0; p.k_offset = qw; p.v_offset = qw + kw;
    p.q_stride = p.k_stride = p.v_stride = row;
    c.random("qkv", -2.f, 2.f);
  } else {
    p.q = c.add("q", dt, a.batch * a.sq * qw, Role::Input);
    p.k = c.add("k", dt, a.batch * a.skv * kw, Role::Input);
    p.v = c.add("v", dt, a.batch * a.skv * kw, Role::Input);
    p.q_stride = qw; p.k_stride = kw; p.v_stride = kw;
    c.random("q", -2.f, 2.f); c.random("k", -2.f, 2.f); c.random("v");
  }
  p.mask = kNoBuffer;
  if (a.mask == MaskKind::Padding) {
    p.mask = c.add("mask", DType::I32, a.batch * a.skv, Role::Input);
    std::vector<int32_t> m(size_t(a.batch * a.skv));
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t j = 0; j < a.skv; ++j)  // batch 0: all valid; 1: fully padded (attends to every key); others: a prefix
        m[size_t(b * a.skv + j)] = b == 0 ? 1 : b == 1 ? 0 : j < a.skv - 3 * b ? 1 : 0;
    c.set_i32("mask", m);
  }
  p.out = c.add("out", dt, a.batch * a.sq * qw, Role::Output);
  c.thunk(ThunkKind::Attention, p, "attention 'att'");
  if (a.variant) EXPECT_STREQ(cuda::attention_variant(p), a.variant);
  auto ref = [&] {
    // Inputs read once: a lookup by name per element made the long cases take seconds.
    auto host = [&](const std::string& name, int64_t count) {
      std::vector<double> v(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) v[size_t(i)] = c.in(name, i);
      return v;
    };
    const int64_t q_rows = a.batch * a.sq, kv_rows = a.batch * a.skv;
    const std::vector<double> qv = host(a.packed ? "qkv" : "q", q_rows * p.q_stride);
    const std::vector<double> kv = a.packed ? qv : host("k", kv_rows * p.k_stride);
    const std::vector<double> vv = a.packed ? qv : host("v", kv_rows * p.v_stride);
    const std::vector<double> mask = a.mask == MaskKind::Padding ? host("mask", kv_rows) : std::vector<double>{};
    std::vector<double> out(static_cast<size_t>(a.batch * a.sq * qw));
    for (int64_t b = 0; b < a.batch; ++b)
      for (int h = 0; h < a.qh; ++h) {
        const int kvh = h / (a.qh / a.kvh);
        for (int64_t i = 0; i < a.sq; ++i) {
          std::vector<double> s(static_cast<size_t>(a.skv));
          double m = -INFINITY;
          // A sequence whose mask keeps no key attends to every key.
          bool padded_out = a.mask == MaskKind::Padding;
          for (int64_t j = 0; padded_out && j < a.skv; ++j) padded_out = mask[size_t(b * a.skv + j)] == 0;
          for (int64_t j = 0; j < a.skv; ++j) {
            bool ok = true;
            if (a.mask == MaskKind::Causal) ok = j <= i + a.skv - a.sq;
            if (a.mask == MaskKind::Padding) ok = mask[size_t(b * a.skv + j)] != 0 || padded_out;
            double dot = 0;
            for (int d = 0; d < a.d; ++d)
              dot += qv[size_t((b * a.sq + i) * p.q_stride + p.q_offset + h * a.d + d)] *
                     kv[size_t((b * a.skv + j) * p.k_stride + p.k_offset + kvh * a.d + d)];
            s[size_t(j)] = ok ? dot * p.scale : -INFINITY;
            m = std::max(m, s[size_t(j)]);
          }
          double l = 0;
          for (auto& x : s) l += (x = m == -INFINITY ? 0 : std::exp(x - m));
          for (int d = 0; d < a.d; ++d) {
            double acc = 0;
            for (int64_t j = 0; j < a.skv; ++j)
              acc += s[size_t(j)] * vv[size_t((b * a.skv + j) * p.v_stride + p.v_offset + kvh * a.d + d)];
            out[size_t(((b * a.sq + i) * a.qh + h) * a.d + d)] = l > 0 ? acc / l : 0.0;
          }
        }
      }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  t.check(c, ref, 3.0, {a.packed ? "qkv" : "q"});
}

// Each case runs on rlx's own kernels (RLX_ATTENTION=own) and then on the
// default choice, which must be cuDNN wherever cuDNN can take the problem:
// f16/bf16, head_dim a multiple of 8, 16-byte aligned rows.
void attention_case(ThunkKernels& t, DType dt, const Att& a) {
  const bool eligible = cuda::cudnn_attention_built() && dt != DType::F32 && a.d % 8 == 0 &&
                        (!a.packed || a.aligned_rows);
  on_both_attention_paths(eligible, [&] { attention_case_once(t, dt, a); });
}

TEST_P(ThunkKernels, AttentionPackedBertShape) { attention_case(*this, dt(), {2, 33, 33, 4, 4, 64, MaskKind::None, true}); }
TEST_P(ThunkKernels, AttentionPaddingMaskFullyMaskedRow) { attention_case(*this, dt(), {3, 17, 17, 2, 2, 64, MaskKind::Padding, true}); }
TEST_P(ThunkKernels, AttentionCausalGqaDecodeAlign) { attention_case(*this, dt(), {2, 7, 70, 4, 2, 128, MaskKind::Causal, false}); }
TEST_P(ThunkKernels, AttentionCausalSquareOddDim) { attention_case(*this, dt(), {1, 129, 129, 2, 1, 40, MaskKind::Causal, false}); }
TEST_P(ThunkKernels, AttentionLargeHeadDim) { attention_case(*this, dt(), {1, 5, 9, 1, 1, 256, MaskKind::None, false, false, "general"}); }
// The short-sequence kernel at its boundaries: one key, key counts around a
// warp's 32 and a pass's 128, head_dim 32 / 33 (scalar staging) / 80 / 128,
// 16-byte aligned packed rows, GQA; and past its key limit, the general one.
TEST_P(ThunkKernels, AttentionShortOneKey) { attention_case(*this, dt(), {3, 4, 1, 2, 2, 32, MaskKind::Padding, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionShort31KeysDim80Gqa) { attention_case(*this, dt(), {1, 9, 31, 3, 1, 80, MaskKind::None, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionShort33KeysDim128Causal) { attention_case(*this, dt(), {2, 33, 33, 2, 2, 128, MaskKind::Causal, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionShortOddDimPadding) { attention_case(*this, dt(), {3, 7, 33, 2, 2, 33, MaskKind::Padding, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionShortAlignedPackedPadding) { attention_case(*this, dt(), {3, 40, 40, 2, 2, 64, MaskKind::Padding, true, true, "short"}); }
TEST_P(ThunkKernels, AttentionShort128KeysGqaPadding) { attention_case(*this, dt(), {3, 20, 128, 2, 1, 64, MaskKind::Padding, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionShort257KeysCausalDecode) { attention_case(*this, dt(), {1, 5, 257, 2, 2, 64, MaskKind::Causal, false, false, "short"}); }
// f32 K and V of 257 x 128 exceed the short kernel's shared memory: general.
TEST_P(ThunkKernels, AttentionShort257KeysDim128) {
  attention_case(*this, dt(), {2, 3, 257, 2, 1, 128, MaskKind::None, false, false, dt() == DType::F32 ? "general" : "short"});
}
TEST_P(ThunkKernels, AttentionShort129KeysDim128) { attention_case(*this, dt(), {2, 3, 129, 2, 1, 128, MaskKind::None, false, false, "short"}); }
TEST_P(ThunkKernels, AttentionGeneralLongKeys) { attention_case(*this, dt(), {3, 3, 1100, 2, 2, 64, MaskKind::Padding, false, false, "general"}); }
// Shapes the fused path meets in real models: BERT rows (packed QKV, padding
// of different lengths per batch), one token, odd lengths around the tiles,
// grouped-query 6:2 and 32:4 with causal masks, head_dim 64 and 128.
TEST_P(ThunkKernels, AttentionBertPackedPadding128) { attention_case(*this, dt(), {4, 128, 128, 12, 12, 64, MaskKind::Padding, true, true}); }
TEST_P(ThunkKernels, AttentionOneToken) { attention_case(*this, dt(), {2, 1, 1, 4, 4, 64, MaskKind::Padding, false}); }
TEST_P(ThunkKernels, AttentionOdd77Padding) { attention_case(*this, dt(), {3, 77, 77, 6, 6, 64, MaskKind::Padding, true, true}); }
TEST_P(ThunkKernels, AttentionGqa6to2Causal129) { attention_case(*this, dt(), {2, 129, 129, 6, 2, 64, MaskKind::Causal, false}); }
TEST_P(ThunkKernels, AttentionGqa32to4Causal130) { attention_case(*this, dt(), {1, 130, 130, 32, 4, 128, MaskKind::Causal, false}); }
TEST_P(ThunkKernels, AttentionCausal513) { attention_case(*this, dt(), {1, 513, 513, 4, 2, 64, MaskKind::Causal, false}); }
// Rows over 512 bytes (head_dim > 128 in f32) do not fit two lanes' registers: lanes split head_dim.
const char* decode_variant(DType dt, int d) { return dt == DType::F32 && d > 128 ? "decode_wide" : "decode"; }

// Runs a decode case (one query row) on the per-head kernels
// (RLX_ATTENTION_DECODE=rows, expecting a.variant), then on the grouped
// CUDA-core kernel (=grouped) and the tensor-core one (=mma) wherever each
// is eligible: query heads sharing a KV head, head_dim <= 128 in whole
// 16-byte chunks; for the tensor cores f16/bf16 and head_dim % 16 == 0.
bool grouped_decode_eligible(DType dt, int32_t qh, int32_t kvh, int32_t d) {
  return qh >= 2 * kvh && d <= 128 && d % (16 / int32_t(dtype_size(dt))) == 0;
}
bool mma_decode_eligible(DType dt, int32_t qh, int32_t kvh, int32_t d) {
  return dt != DType::F32 && d % 16 == 0 && grouped_decode_eligible(dt, qh, kvh, d);
}
// The variant RLX_ATTENTION_DECODE=mode gives a decode case whose per-head
// kernel is rows_variant.
const char* decode_mode_variant(const std::string& mode, DType dt, int32_t qh, int32_t kvh, int32_t d, bool packed,
                                const char* rows_variant) {
  if (mode == "grouped" && !packed && grouped_decode_eligible(dt, qh, kvh, d)) return "decode_grouped";
  if (mode == "mma" && !packed && mma_decode_eligible(dt, qh, kvh, d)) return "decode_mma";
  return rows_variant;
}
void decode_attention_case(ThunkKernels& t, DType dt, Att a) {
  const char* rows_variant = a.variant;
  for (const char* mode : {"rows", "grouped", "mma"}) {
    SCOPED_TRACE(std::string("RLX_ATTENTION_DECODE=") + mode);
    setenv("RLX_ATTENTION_DECODE", mode, 1);
    a.variant = decode_mode_variant(mode, dt, a.qh, a.kvh, a.d, a.packed, rows_variant);
    attention_case(t, dt, a);
  }
  unsetenv("RLX_ATTENTION_DECODE");
}
TEST_P(ThunkKernels, AttentionDecodeRowGqa32to4) {
  decode_attention_case(*this, dt(), {2, 1, 300, 32, 4, 128, MaskKind::Causal, false, false, decode_variant(dt(), 128)});
}
// One query row (a decode step): warps split the keys, merged at the end;
// a key per lane where K rows are whole 16-byte chunks of up to 256 bytes,
// two lanes a key up to 512 bytes ("decode"): padding over many keys, a
// head_dim that leaves lanes idle, the LLaMA shapes, Gemma 2's 256 wide
// heads (f16/bf16; the pair of lanes leaving chunks idle at 192); lanes
// split head_dim otherwise ("decode_wide"): 256 wide heads in f32, a
// head_dim of odd chunks.
TEST_P(ThunkKernels, AttentionDecodeRowPadding1500Dim80) {
  decode_attention_case(*this, dt(), {3, 1, 1500, 6, 2, 80, MaskKind::Padding, false, false, decode_variant(dt(), 80)});
}
TEST_P(ThunkKernels, AttentionDecodeRowDim256FewKeys) {
  decode_attention_case(*this, dt(), {2, 1, 37, 4, 4, 256, MaskKind::None, false, false, decode_variant(dt(), 256)});
}
TEST_P(ThunkKernels, AttentionDecodeSplitDim256Causal700) {
  decode_attention_case(*this, dt(), {2, 1, 700, 8, 4, 256, MaskKind::Causal, false, false, decode_variant(dt(), 256)});
}
TEST_P(ThunkKernels, AttentionDecodeRowDim192Padding90) {
  decode_attention_case(*this, dt(), {3, 1, 90, 4, 2, 192, MaskKind::Padding, false, false, decode_variant(dt(), 192)});
}
TEST_P(ThunkKernels, AttentionDecodeSplitDim96Padding300) {
  decode_attention_case(*this, dt(), {3, 1, 300, 4, 1, 96, MaskKind::Padding, false, false, decode_variant(dt(), 96)});
}
TEST_P(ThunkKernels, AttentionDecodeRowOddDim) {
  decode_attention_case(*this, dt(), {2, 1, 45, 3, 1, 33, MaskKind::Causal, false, false, "decode_wide"});
}
TEST_P(ThunkKernels, AttentionDecodeRowGqa32to4Dim64Padding1100) {
  decode_attention_case(*this, dt(), {3, 1, 1100, 32, 4, 64, MaskKind::Padding, false, false, "decode"});
}
// Caches of 256+ rows split each head's keys over a cluster of 8 blocks:
// exactly 256 keys (32 a block), and a padding mask that leaves whole blocks'
// shares without a valid key (batches 1 and 2 of the case's mask).
TEST_P(ThunkKernels, AttentionDecodeSplit256Causal) {
  decode_attention_case(*this, dt(), {2, 1, 256, 4, 2, 64, MaskKind::Causal, false, false, "decode"});
}
TEST_P(ThunkKernels, AttentionDecodeSplitPadding260Dim128) {
  decode_attention_case(*this, dt(), {3, 1, 260, 2, 1, 128, MaskKind::Padding, false, false, decode_variant(dt(), 128)});
}
TEST_P(ThunkKernels, AttentionDecodeRowDim48Causal) {
  decode_attention_case(*this, dt(), {2, 1, 77, 6, 2, 48, MaskKind::Causal, false, false, "decode"});
}
// The grouped kernel's own shapes: more query heads a KV head than a block
// takes (20 = 8 + 8 + 4), seven (Qwen2.5's 28:4), a batch whose blocks
// fill the SMs (no cluster split), and one row forced onto it.
TEST_P(ThunkKernels, AttentionDecodeGrouped20to1Causal300) {
  decode_attention_case(*this, dt(), {2, 1, 300, 20, 1, 64, MaskKind::Causal, false, false, "decode"});
}
TEST_P(ThunkKernels, AttentionDecodeGrouped7to1Dim128Padding90) {
  decode_attention_case(*this, dt(), {3, 1, 90, 14, 2, 128, MaskKind::Padding, false, false, decode_variant(dt(), 128)});
}
TEST_P(ThunkKernels, AttentionDecodeGroupedBatch40NoSplit) {
  decode_attention_case(*this, dt(), {40, 1, 260, 8, 4, 64, MaskKind::Causal, false, false, "decode"});
}
TEST_P(ThunkKernels, AttentionDecodeGroupedOneRowSplit) {
  decode_attention_case(*this, dt(), {1, 1, 700, 32, 4, 64, MaskKind::None, false, false, "decode"});
}
// Without RLX_ATTENTION_DECODE a grouped kernel takes batches of two rows
// or more (the tensor-core one for f16/bf16 and head_dim % 16 == 0); one row
// keeps the per-head kernel.
TEST(AttentionDecodeChoice, GroupedFromTwoRows) {
  unsetenv("RLX_ATTENTION_DECODE");
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    AttentionParams p = attention_shape(1, 1, 300, 32, 4, 64, MaskKind::Causal, dt);
    p.q_stride = 32 * 64; p.k_stride = p.v_stride = 4 * 64;
    EXPECT_STREQ(cuda::attention_variant(p), "decode");
    p.batch = 2;
    EXPECT_STREQ(cuda::attention_variant(p), dt == DType::F32 ? "decode_grouped" : "decode_mma");
    p.head_dim = 40;  // not whole 16-wide steps: the CUDA cores
    p.q_stride = 32 * 40; p.k_stride = p.v_stride = 4 * 40;
    EXPECT_STREQ(cuda::attention_variant(p), "decode_grouped");
    p.head_dim = 64;
    p.kv_heads = 32;  // no query heads share a KV head
    p.k_stride = p.v_stride = 32 * 64;
    EXPECT_STREQ(cuda::attention_variant(p), "decode");
  }
  setenv("RLX_ATTENTION_DECODE", "sideways", 1);
  AttentionParams p = attention_shape(2, 1, 300, 32, 4, 64, MaskKind::Causal, DType::F16);
  EXPECT_THROW(cuda::attention_variant(p), Error);
  unsetenv("RLX_ATTENTION_DECODE");
}
TEST_P(ThunkKernels, AttentionPadding513) { attention_case(*this, dt(), {2, 513, 513, 2, 2, 64, MaskKind::Padding, false}); }

// ---- attention over a KV cache: a prompt's rows at positions pos[b] -------

// The models' prefill: q rows at pos[b] .. pos[b] + sq - 1 attend causally
// to the keys of one cache row that holds K then V ([caches, skv, 2 * kv
// width]); with `slots`, a ragged batch's pool read through kv_slots. On
// f16/bf16 cuDNN must take it (padding lengths, the causal diagonal at each
// sequence's bottom right, page tables for the slots); rlx's kernel is
// the comparison. Keys past a sequence's last row hold random values that
// must not be seen.
struct CachedAtt {
  int64_t batch, sq, skv, slots;  // slots = 0: batch b reads cache b
  int32_t qh, kvh, d;
  std::vector<int32_t> pos, slot;
  int32_t window = 0;  // a causal window, seen by the reference as by the kernels
  const char* variant = nullptr;  // the kernel expected to serve the case, when given
};

void cached_attention_case_once(ThunkKernels& t, DType dt, const CachedAtt& a) {
  Case c;
  AttentionParams p = attention_shape(a.batch, a.sq, a.skv, a.qh, a.kvh, a.d, MaskKind::Causal, dt);
  p.mask = kNoBuffer;
  p.window = a.window;
  const int64_t qw = int64_t(a.qh) * a.d, kw = int64_t(a.kvh) * a.d, caches = a.slots ? a.slots : a.batch;
  p.q = c.add("q", dt, a.batch * a.sq * qw, Role::Input);
  p.k = p.v = c.add("kv", dt, caches * a.skv * 2 * kw, Role::Input);
  p.q_stride = qw; p.k_stride = p.v_stride = 2 * kw; p.k_offset = 0; p.v_offset = kw;
  p.pos = c.add("pos", DType::I32, a.batch, Role::Input);
  c.set_i32("pos", a.pos);
  if (a.slots) {
    p.kv_slots = c.add("slots", DType::I32, a.batch, Role::Input);
    p.kv_batch = a.slots;
    c.set_i32("slots", a.slot);
  }
  c.random("q", -2.f, 2.f);
  c.random("kv", -2.f, 2.f);
  p.out = c.add("out", dt, a.batch * a.sq * qw, Role::Output);
  c.thunk(ThunkKind::Attention, p, "attention 'att'");
  if (a.variant) EXPECT_STREQ(cuda::attention_variant(p), a.variant);
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(a.batch * a.sq * qw));
    for (int64_t b = 0; b < a.batch; ++b) {
      const int64_t cache = a.slots ? a.slot[size_t(b)] : b, start = a.pos[size_t(b)];
      auto kv = [&](int64_t j, int64_t col) { return c.in("kv", (cache * a.skv + j) * 2 * kw + col); };
      for (int h = 0; h < a.qh; ++h) {
        const int kvh = h / (a.qh / a.kvh);
        for (int64_t i = 0; i < a.sq; ++i) {
          const int64_t keys = start + i + 1;  // causal: up to its own position
          const int64_t first = a.window > 0 ? std::max<int64_t>(0, keys - a.window) : 0;
          std::vector<double> s(static_cast<size_t>(keys), 0.0);
          double m = -INFINITY;
          for (int64_t j = first; j < keys; ++j) {
            double dot = 0;
            for (int d = 0; d < a.d; ++d) dot += c.in("q", (b * a.sq + i) * qw + h * a.d + d) * kv(j, kvh * a.d + d);
            m = std::max(m, s[size_t(j)] = dot * p.scale);
          }
          double l = 0;
          for (int64_t j = first; j < keys; ++j) l += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
          for (int d = 0; d < a.d; ++d) {
            double acc = 0;
            for (int64_t j = first; j < keys; ++j) acc += s[size_t(j)] * kv(j, kw + kvh * a.d + d);
            out[size_t(((b * a.sq + i) * a.qh + h) * a.d + d)] = acc / l;
          }
        }
      }
    }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  t.check(c, ref, 3.0, {"q"});
}

void cached_attention_case(ThunkKernels& t, DType dt, const CachedAtt& a) {
  // cuDNN's pages are a power of two rows (16 at least here) dividing the
  // cache; a window shorter than the cache keeps rlx's kernel.
  const bool eligible = cuda::cudnn_attention_built() && dt != DType::F32 && (a.slots == 0 || a.skv % 16 == 0) &&
                        (a.window == 0 || a.window >= a.skv);
  on_both_attention_paths(eligible, [&] { cached_attention_case_once(t, dt, a); });
}

// A first prompt chunk (position 0) and later ones, GQA, odd lengths.
TEST_P(ThunkKernels, AttentionCacheFirstChunkGqa) { cached_attention_case(*this, dt(), {1, 37, 64, 0, 8, 2, 64, {0}, {}}); }
TEST_P(ThunkKernels, AttentionCacheLaterChunksDim128) {
  cached_attention_case(*this, dt(), {2, 19, 96, 0, 4, 4, 128, {41, 5}, {}});
}
// A ragged batch over a pool of caches (slots out of order, some unused):
// 80 rows are 5 pages of 16, 384 rows 3 pages of 128; 72 rows have no
// power-of-two page of 16 or more, so rlx's kernel serves them.
TEST_P(ThunkKernels, AttentionCachePoolSlots) {
  cached_attention_case(*this, dt(), {3, 23, 80, 5, 6, 2, 64, {0, 50, 17}, {3, 0, 4}});
}
TEST_P(ThunkKernels, AttentionCachePoolSlotsLongPagesDim128) {
  cached_attention_case(*this, dt(), {2, 33, 384, 3, 8, 2, 128, {0, 300}, {2, 0}});
}
// A causal window as long as the cache hides nothing (cuDNN, as plain
// causal); a shorter one (rlx's kernel) hides the oldest keys.
TEST_P(ThunkKernels, AttentionCacheWindowAsLongAsTheCache) {
  cached_attention_case(*this, dt(), {2, 21, 64, 0, 4, 2, 64, {40, 0}, {}, 64});
}
TEST_P(ThunkKernels, AttentionCacheShorterWindowOwnKernel) {
  cached_attention_case(*this, dt(), {2, 21, 64, 0, 4, 2, 64, {40, 0}, {}, 17});
}
TEST_P(ThunkKernels, AttentionCachePoolSlotsShortPagesOwnKernel) {
  cached_attention_case(*this, dt(), {2, 9, 72, 3, 4, 2, 64, {60, 3}, {1, 2}});
}

// A ragged batch's decode step: one query row per sequence at its own
// position over a pool of caches (cuDNN does not take one row over a cache),
// on the per-head kernel and on both grouped ones; a window; a first token
// (one key); a full cache.
void cached_decode_case(ThunkKernels& t, DType dt, CachedAtt a) {
  setenv("RLX_ATTENTION", "own", 1);
  for (const char* mode : {"rows", "grouped", "mma"}) {
    SCOPED_TRACE(std::string("RLX_ATTENTION_DECODE=") + mode);
    setenv("RLX_ATTENTION_DECODE", mode, 1);
    a.variant = decode_mode_variant(mode, dt, a.qh, a.kvh, a.d, false, "decode");
    cached_attention_case_once(t, dt, a);
  }
  unsetenv("RLX_ATTENTION_DECODE");
  unsetenv("RLX_ATTENTION");
}
TEST_P(ThunkKernels, AttentionDecodeCachePoolSlots) {
  cached_decode_case(*this, dt(), {5, 1, 300, 7, 32, 4, 64, {0, 299, 17, 150, 64}, {6, 0, 3, 1, 5}});
}
TEST_P(ThunkKernels, AttentionDecodeCacheWindowDim128) {
  cached_decode_case(*this, dt(), {3, 1, 96, 0, 8, 2, 128, {95, 10, 50}, {}, 33});
}
TEST_P(ThunkKernels, AttentionDecodeCache20to1) {
  cached_decode_case(*this, dt(), {2, 1, 80, 0, 20, 1, 64, {79, 3}, {}});
}

// ---- rope / gather / reduce ------------------------------------------------

void rope_case(ThunkKernels& t, DType dt, bool interleaved, bool batched, int32_t n_rot) {
  Case c;
  RopeParams p{};
  p.batch = 2; p.seq = 7; p.heads = 3; p.head_dim = 16; p.n_rot = n_rot;
  p.theta = 10000.f; p.interleaved = interleaved; p.pos_batched = batched; p.dtype = dt;
  p.offset = 4; p.stride = p.heads * p.head_dim + 9;
  p.x = c.add("x", dt, p.batch * p.seq * p.stride, Role::Input);
  p.pos = c.add("pos", DType::I32, batched ? p.batch * p.seq : p.seq, Role::Input);
  p.out = c.add("out", dt, p.batch * p.seq * p.heads * p.head_dim, Role::Output);
  c.random("x");
  std::vector<int32_t> pos;
  for (int64_t i = 0; i < (batched ? p.batch * p.seq : p.seq); ++i) pos.push_back(int32_t((i * 37) % 101));
  c.set_i32("pos", pos);
  c.thunk(ThunkKind::Rope, p, "rope 'q'");
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(p.batch * p.seq * p.heads * p.head_dim));
    for (int64_t row = 0; row < p.batch * p.seq; ++row)
      for (int h = 0; h < p.heads; ++h) {
        auto x = [&](int d) { return c.in("x", row * p.stride + p.offset + h * p.head_dim + d); };
        auto o = [&](int d) -> double& { return out[size_t((row * p.heads + h) * p.head_dim + d)]; };
        double position = c.in("pos", batched ? row : row % p.seq);
        for (int d = n_rot; d < p.head_dim; ++d) o(d) = x(d);
        for (int i = 0; i < n_rot / 2; ++i) {
          double ang = position * std::pow(10000.0, -2.0 * i / n_rot);
          int d0 = interleaved ? 2 * i : i, d1 = interleaved ? 2 * i + 1 : i + n_rot / 2;
          o(d0) = x(d0) * std::cos(ang) - x(d1) * std::sin(ang);
          o(d1) = x(d1) * std::cos(ang) + x(d0) * std::sin(ang);
        }
      }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  t.check(c, ref, 2.0, {"x"});
}

TEST_P(ThunkKernels, RopeHalfSplit) { rope_case(*this, dt(), false, false, 16); }
TEST_P(ThunkKernels, RopeInterleavedPartialBatched) { rope_case(*this, dt(), true, true, 10); }
TEST_P(ThunkKernels, RopeHalfSplitPartial) { rope_case(*this, dt(), false, true, 8); }

// Rows of 33 take the general kernel; rows of 40 (whole 16-byte chunks in
// every dtype) the vectorized one, 1030 ids of them four rows a block.
void gather_case(ThunkKernels& t, DType dt, int64_t row, int64_t n_ids) {
  Case c;
  GatherParams p{};
  p.vocab = 50; p.row = row; p.n_ids = n_ids; p.dtype = dt;
  p.table = c.add("table", dt, p.vocab * p.row, Role::Param);
  p.ids = c.add("ids", DType::I32, p.n_ids, Role::Input);
  p.out = c.add("out", dt, p.n_ids * p.row, Role::Output);
  c.random("table");
  std::vector<int32_t> ids{0, 49, 7, -1, 50, 3, 3, 1000000, 12};
  for (int64_t i = 9; i < n_ids; ++i) ids.push_back(int32_t((i * 37) % 53) - 1);  // a few out of range
  ids.resize(size_t(n_ids));
  c.set_i32("ids", ids);
  EXPECT_STREQ(cuda::gather_variant(p, nullptr), row % (16 / int64_t(dtype_size(dt))) == 0 ? "vec" : "general");
  c.thunk(ThunkKind::Gather, p, "gather 'emb'");
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(p.n_ids * p.row));
    for (int64_t i = 0; i < p.n_ids; ++i) {
      int64_t id = int64_t(c.in("ids", i));
      for (int64_t j = 0; j < p.row; ++j)
        out[size_t(i * p.row + j)] = id >= 0 && id < p.vocab ? c.in("table", id * p.row + j) : 0.0;
    }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  t.check(c, ref, 0.0);
}

// SwiGLU over the halves of a fused gate/up row [rows, 2 * cols]: 16-byte
// chunks where every row starts aligned, else element by element (the
// offset of 1 in the second case misaligns the up half; 45 columns the rows).
void swiglu_case(ThunkKernels& t, DType dt, int64_t rows, int64_t cols, int64_t up_offset) {
  Case c;
  SwiGluParams p{};
  p.rows = rows; p.cols = cols; p.dtype = dt; p.act = Activation::Silu;
  p.gate_stride = p.up_stride = 2 * cols + 8;
  p.gate_offset = 0; p.up_offset = up_offset;
  p.gate = p.up = c.add("gate_up", dt, rows * p.gate_stride, Role::Input);
  p.out = c.add("out", dt, rows * cols, Role::Output);
  c.random("gate_up", -4.f, 4.f);
  const int64_t ve = 16 / int64_t(dtype_size(dt));
  const bool whole = cols % ve == 0 && up_offset % ve == 0;
  EXPECT_STREQ(cuda::swiglu_variant(p, nullptr), whole ? "vec" : "general");
  c.thunk(ThunkKind::SwiGlu, p, "swiglu 'ffn'");
  auto ref = [&] {
    std::vector<double> out(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        const double g = c.in("gate_up", r * p.gate_stride + j), u = c.in("gate_up", r * p.up_stride + up_offset + j);
        out[size_t(r * cols + j)] = g / (1.0 + std::exp(-g)) * u;
      }
    return std::map<std::string, std::vector<double>>{{"out", out}};
  };
  t.check(c, ref, 1.0, {"gate_up"});
}

TEST_P(ThunkKernels, SwiGluWholeChunks) { swiglu_case(*this, dt(), 37, 128, 136); }
TEST_P(ThunkKernels, SwiGluMisalignedHalf) { swiglu_case(*this, dt(), 5, 128, 129); }
TEST_P(ThunkKernels, SwiGluOddColumns) { swiglu_case(*this, dt(), 9, 45, 53); }

TEST_P(ThunkKernels, GatherOutOfRangeIdsGiveZeroRows) { gather_case(*this, dt(), 33, 9); }
TEST_P(ThunkKernels, GatherWholeChunkRows) { gather_case(*this, dt(), 40, 1030); }

INSTANTIATE_TEST_SUITE_P(
    AllTypesAllModes, ThunkKernels,
    ::testing::Combine(::testing::Values(DType::F32, DType::F16, DType::BF16),
                       ::testing::Values(ExecMode::PerOp, ExecMode::Graph)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_" + mode_name(std::get<1>(info.param));
    });

}  // namespace
}  // namespace rlx::gputest
