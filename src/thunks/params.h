// Params structs: the single source of truth for what a kernel receives.
// Plain, trivially copyable, included by host and device code. Every buffer
// is a byte offset into the arena; element strides and sizes are in elements.
#pragma once
#include <cstdint>
#include <type_traits>

#include "rlx/dtype.h"
#include "rlx/enums.h"

namespace rlx {

constexpr int kMaxRank = 6;
constexpr uint64_t kNoBuffer = ~uint64_t(0);

// What a product of at most kMatVecRows rows fuses (rlx/graph.h
// MatVecFusion): x is RMS-normalized with norm_gamma [k] and norm_eps first,
// and residual (laid out like out) is added last. kNoBuffer = not fused.
// glu != None: out has n / 2 columns, glu(rows [0, n/2) of the product) *
// (rows [n/2, n)), each with its bias; the output's row length is n / 2.
struct MatVecFusionParams {
  uint64_t norm_gamma = kNoBuffer, residual = kNoBuffer;
  float norm_eps = 0.f;
  Activation glu = Activation::None;
  bool norm_gamma_constant = false;  // a param or constant (no thunk writes it): kernels may read it early
  bool any() const { return norm_gamma != kNoBuffer || residual != kNoBuffer || glu != Activation::None; }
  int64_t out_cols(int64_t n) const { return glu != Activation::None ? n / 2 : n; }
};

// out[b] = act(op(A[b]) @ op(B[b]) + bias); row-major; op = transpose if flagged.
// A is [m,k] ([k,m] if trans_a) with row length lda; B is [k,n] ([n,k] if trans_b).
// Batch strides of 0 broadcast that operand.
struct MatMulParams {
  uint64_t a, b, bias, out;
  int64_t batch, m, n, k;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_out;
  DType dtype;
  Activation act;
  uint8_t trans_a, trans_b;
  uint8_t b_constant;  // b is a param or constant (no thunk writes it): kernels may read it early
  uint8_t weights_evict_first;  // set at launch by the CUDA matrix-vector kernels (weight_loads.cuh)
  MatVecFusionParams fused;
};

// out[m, n] = x[m, k] . dequant(W)^T (+ bias) for W [n, k] held as quants
// (rows of k / quant_elems_per_word i32 words) and f16 scales [n, k / 32]
// (rlx/quant.h); x, bias and out dense in `dtype`. dequantized (kNoBuffer up
// to kMatMulQVectorRows rows): scratch [n, k] in `dtype` that larger products
// dequantize W into before one plain product over it. With fused.glu, out
// is [m, n / 2].
struct MatMulQParams {
  uint64_t x, quants, scales, bias, out, dequantized;
  int64_t m, n, k;
  DType dtype;
  QuantType quant;
  uint8_t weights_constant;  // quants and scales are params (no thunk writes them): kernels may read them early
  MatVecFusionParams fused;
};

// out = a (op) b with numpy broadcasting: out is contiguous with `shape`;
// a/b strides are 0 along broadcast dims.
struct BinaryParams {
  uint64_t a, b, out;
  int64_t n;
  int32_t rank;
  int64_t shape[kMaxRank];
  int64_t stride_a[kMaxRank], stride_b[kMaxRank];
  DType dtype;
  BinaryOp op;
};

struct UnaryParams {
  uint64_t x, out;
  int64_t n;
  DType dtype;
  Activation act;
};

// Row-wise over the last axis. With a residual: sum_out = x + residual, and
// out = norm(sum_out). beta only for LayerNorm (kNoBuffer = none). With
// add_after: out = add_after + norm(...), the normalized value rounded to
// dtype before the add (as a norm and then an add would).
struct NormParams {
  uint64_t x, residual, gamma, beta, out, sum_out;
  int64_t rows, cols;
  float eps;
  DType dtype;
  NormKind kind;
  uint64_t add_after = kNoBuffer;
};

struct SoftmaxParams {
  uint64_t x, out;
  int64_t rows, cols;
  DType dtype;
};

// Per-pair frequency divisors of a rotary embedding (RopeAttrs::
// freq_divisors), carried by value so that every kernel that rotates reads
// them from its own params; count 0 = none. cos and sin are multiplied by
// scale (RopeAttrs::attention_factor: YaRN's and LongRoPE's), whether or not
// there are divisors.
constexpr int kMaxRopePairs = 64;
struct RopeFreqDivisors {
  int32_t count = 0;
  float div[kMaxRopePairs];
  float scale = 1.f;
};

// Rows of q are (b*sq + i)*q_stride + q_offset; head h is the next head_dim
// elements after h*head_dim. Query head h reads kv head h / (q_heads/kv_heads).
// out is dense [batch, sq, q_heads*head_dim]. mask: i32 [batch, skv], 0 = pad.
// Causal masking aligns the last query with the last key (j <= i + skv - sq).
// pos (kNoBuffer = none): i32 [batch], the position of each batch's first
// query; keys j >= pos[b] + sq are then invalid and causal keeps j <= pos[b] + i.
struct AttentionParams {
  uint64_t q, k, v, mask, out;
  uint64_t pos = kNoBuffer;
  int64_t batch, sq, skv;
  int64_t q_offset, k_offset, v_offset;
  int64_t q_stride, k_stride, v_stride;
  int32_t q_heads, kv_heads, head_dim;
  float scale;
  // window > 0: causal, query at position p sees keys in (p - window, p];
  // otherwise two-sided (sq == skv, no pos), query i sees keys |i - j| < window;
  // softcap > 0: scores s become softcap * tanh(s / softcap). 0 = off.
  int32_t window = 0;
  float softcap = 0.f;
  MaskKind mask_kind;
  DType dtype;
  // q_rope_n_rot > 0: every q head is rotated at position pos[b] (sq == 1) as
  // it is read, the rope kernel's pairs and angles, rounded to dtype as the
  // rope kernel's output would be.
  int32_t q_rope_n_rot = 0;
  float q_rope_theta = 0.f;
  uint8_t q_rope_interleaved = 0;
  RopeFreqDivisors q_rope_freqs{};
  // kv_slots != kNoBuffer: i32 [batch], batch b reads k/v batch row
  // kv_slots[b] of kv_batch rows (clamped into range; the host checks them).
  uint64_t kv_slots = kNoBuffer;
  int64_t kv_batch = 0;
  // ring: the key at position j is in row j mod skv (AttentionAttrs::ring),
  // so the valid keys end at pos[b] + sq, not at skv.
  uint8_t ring = 0;
};

// Rotary embedding on [batch, seq, heads*head_dim] rows (offset/stride as in
// attention); out is dense. Dims >= n_rot of each head are copied unchanged.
// pos is i32 [batch, seq] (pos_batched), [seq], or [batch] (pos_start: row
// s of batch b is at position pos[b] + s).
// gamma (kNoBuffer = none): each head RMS-normalized with this gain
// [head_dim] and rounded to dtype before it is rotated, as a separate
// norm would store it.
struct RopeParams {
  uint64_t x, pos, out;
  int64_t batch, seq, offset, stride;
  int32_t heads, head_dim, n_rot;
  float theta;
  uint8_t interleaved, pos_batched, pos_start;
  DType dtype;
  RopeFreqDivisors freqs;
  uint64_t gamma = kNoBuffer;
  float norm_eps = 0.f;
};

// out[i, :] = table[ids[i], :]; ids outside [0, vocab) give a zero row.
struct GatherParams {
  uint64_t table, ids, out;
  int64_t n_ids, vocab, row;
  DType dtype;
};

// out[i, :] = dequant(row ids[i]) of a table [vocab, row] held as quants
// (i32 rows of row / quant_elems_per_word(quant) words) and f16 scales
// [vocab, row / 32 * quant_scales_per_block(quant)] (rlx/quant.h), in
// `dtype`; ids outside [0, vocab) give a zero row.
struct GatherQParams {
  uint64_t quants, scales, ids, out;
  int64_t n_ids, vocab, row;
  DType dtype;
  QuantType quant;
};

// Strided copy with conversion: dst[idx . dst_stride] = src[idx . src_stride]
// for every idx in `shape`. Narrow, permute, cast and concat lower to this.
struct CopyParams {
  uint64_t src, dst;
  int64_t n;
  int32_t rank;
  int64_t shape[kMaxRank];
  int64_t src_stride[kMaxRank], dst_stride[kMaxRank];
  DType src_dtype, dst_dtype;
};

// x viewed as [outer, len, inner], reduced over len -> out [outer, inner].
struct ReduceParams {
  uint64_t x, out;
  int64_t outer, len, inner;
  ReduceKind kind;
  DType dtype;
};

// out[r] = logsumexp(logits[r,:]) - logits[r, labels[r]]; bad labels give NaN.
struct SoftmaxCEParams {
  uint64_t logits, labels, out;
  int64_t rows, classes;
  DType dtype;
};

// out[r, c] = silu(gate[r*gate_stride + gate_offset + c]) *
//             up[r*up_stride + up_offset + c]; out is dense [rows, cols].
struct SwiGluParams {
  uint64_t gate, up, out;
  int64_t rows, cols;
  int64_t gate_offset, up_offset, gate_stride, up_stride;
  DType dtype;
  Activation act = Activation::Silu;  // silu (SwiGLU) or gelu_tanh (GeGLU)
};

// cache[b, pos[b] + i, :] = rows[b, i, :] for i < n_new; cache is [batch,
// max_ctx, row], rows [batch, n_new, row]. A row whose position falls outside
// [0, max_ctx) is not written (the host checks positions that come straight
// from an input; see Schedule::index_checks).
// Row i of batch b is read at rows + (b * n_new + i) * rows_stride +
// rows_offset (elements). rope_heads > 0: the first rope_heads heads of
// head_dim are rotated at their write position as they are stored (the
// rope kernel's pairs and angles).
// slots != kNoBuffer: i32 [batch], batch b writes cache row slots[b] of
// cache_batch rows (a slot outside them is skipped); else row b.
struct KvWriteParams {
  uint64_t cache, rows, pos;
  int64_t batch, n_new, max_ctx, row;
  uint64_t slots = kNoBuffer;
  int64_t cache_batch = 0;
  int64_t rows_offset, rows_stride;
  int32_t rope_heads, head_dim, n_rot;
  float theta;
  uint8_t interleaved;
  DType dtype;
  RopeFreqDivisors freqs;
  uint64_t gamma = kNoBuffer;  // the rotated heads normalized first, as RopeParams::gamma
  float norm_eps = 0.f;
  uint8_t ring = 0;  // position t lands in row t mod max_ctx (KvWriteAttrs::ring)
};

// out[r] = the index of the largest of x[r, 0..cols) (i32), the lowest on
// ties; NaN counts as larger than every number, the first NaN wins.
struct ArgmaxParams {
  uint64_t x, out;
  int64_t rows, cols;
  DType dtype;
};

// out = the sum of x over the executable's tensor-parallel ranks (each rank
// its own x; every rank gets the same bits), n elements; one rank: a copy.
struct AllReduceParams {
  uint64_t x, out;
  int64_t n;
  DType dtype;
};

// out = every rank's x (n elements each) one after another in rank order
// (ranks * n elements), the same on every rank; one rank: a copy.
struct AllGatherParams {
  uint64_t x, out;
  int64_t n;
  int32_t ranks;
  DType dtype;
};

// out[r] = a token drawn from x[r, 0..cols) as src/thunks/sample_math.h
// defines it, its uniform hashed from (seed, positions[r]) (i32, read at run
// time). temperature > 0 (greedy is argmax), top_k >= 0, top_p in (0, 1].
struct SampleParams {
  uint64_t x, positions, out;
  int64_t rows, cols;
  uint64_t seed;
  float temperature, top_p;
  int32_t top_k;
  DType dtype;
};

// Mixture-of-experts routing: for each row r of logits [rows, experts],
// ids[r, 0..k) are the k largest logits' indices (largest first, the lower
// index on ties; NaN counts as -inf) and weights[r, j] = softmax(row)[ids[r,
// j]], computed in f32, divided by the k weights' sum when norm_topk.
struct MoeRouteParams {
  uint64_t logits, ids, weights;
  int64_t rows, experts;
  int32_t k;
  uint8_t norm_topk;
  DType dtype;
};

// out = x . w[e]^T per (row r, choice j), e = ids[r * top_k + j], w stacked
// [experts, n, k] (a choice whose id is outside [0, experts) gives zeros).
// Row (r, j) of x starts at element r * x_row_stride + j * x_choice_stride
// (x_choice_stride 0: every choice reads the row's one x). weights ==
// kNoBuffer: out [rows, top_k, n]; else out [rows, n] = sum over j in order
// of weights[r, j] * (x . w[e]^T), accumulated in f32 and rounded once.
struct MoeMatMulParams {
  uint64_t x, w, ids, weights, out;
  int64_t rows, top_k, experts, n, k;
  int64_t x_row_stride, x_choice_stride;
  DType dtype;
  uint8_t w_constant;  // w is a param (no thunk writes it): kernels may read it early
};

// moe_matmul over block-quantized experts: expert e's row c at quants +
// (e * n + c) * row bytes, its scales likewise (matmul_q's layout per expert).
struct MoeMatMulQParams {
  uint64_t x, quants, scales, ids, weights, out;
  int64_t rows, top_k, experts, n, k;
  int64_t x_row_stride, x_choice_stride;
  DType dtype;
  QuantType quant;
  uint8_t w_constant;  // quants and scales are params (no thunk writes them)
};

#define X(e, n, P)                                                      \
  static_assert(std::is_trivially_copyable_v<P>, #P " must be plain"); \
  static_assert(sizeof(P) <= 512, #P " too large for a kernel argument");
#include "thunks/thunks.def"
#undef X

enum class ThunkKind : uint8_t {
#define X(e, n, P) e,
#include "thunks/thunks.def"
#undef X
};
constexpr int kNumThunkKinds = 0
#define X(e, n, P) +1
#include "thunks/thunks.def"
#undef X
    ;

// The thunk kind whose params struct is P: one table, no second list.
template <class P> struct ThunkKindOf;
#define X(e, n, P) \
  template <> struct ThunkKindOf<P> { static constexpr ThunkKind value = ThunkKind::e; };
#include "thunks/thunks.def"
#undef X
template <class P> constexpr ThunkKind kind_of() { return ThunkKindOf<P>::value; }

// The dtype a thunk is keyed by in a backend's registry: what it computes in
// (a copy: its source; backends check a copy's destination dtype too).
template <class P> constexpr DType dtype_of(const P& p) {
  if constexpr (requires { p.src_dtype; }) return p.src_dtype;
  else return p.dtype;
}

}  // namespace rlx
