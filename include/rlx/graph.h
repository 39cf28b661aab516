// The graph IR and its builder API. Every node is shape-checked when it is
// added; errors name the node, the op and what is wrong.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/enums.h"
#include "rlx/error.h"

namespace rlx {

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

// ---- attribute structs, one per op family (see ops.def) ----
struct NoAttrs {};
// Products of at most kMatVecRows rows (decode steps) run as matrix-vector
// kernels, which read all of x for every weight row anyway, so they also
// take an RMSNorm of x before the product and a residual added after it
// (fuse_matvec): out = act(rms_norm(x) . W^T + bias) + residual. Each adds
// an input after the bias: gamma [k], then the residual (the output's shape).
constexpr int64_t kMatVecRows = 8;
// Float products fuse up to this many rows only: there a backend's
// matrix-vector kernel is always the fastest product, while from 5 rows on
// (batched decoding) a library GEMM can be faster than fusing into it.
// Quantized products have no other kernel up to kMatVecRows.
constexpr int64_t kMatMulFusedRows = 4;
// glu != None: W's n rows are two halves [gate; up] and the product yields
// n / 2 columns, out = glu(x . W_gate^T + bias_gate) * (x . W_up^T + bias_up):
// the SwiGLU (Silu) or GeGLU (GeluTanh) after a fused gate/up projection
// (fuse_matvec_glu), with no act and no residual of its own.
struct MatVecFusion {
  bool rms_norm = false;
  float eps = 0.f;
  bool residual = false;
  Activation glu = Activation::None;
};
struct MatMulAttrs {
  bool trans_a = false, trans_b = false;
  Activation act = Activation::None;  // applied after the optional bias (3rd input)
  MatVecFusion fused{};
};
// Where the optional inputs of a product sit: `fixed` leading operands (2 for
// matmul, 3 for matmul_q), then bias, gamma and residual as present; -1 when
// absent.
struct ProductInputs {
  int bias = -1, gamma = -1, residual = -1;
};
ProductInputs product_inputs(size_t inputs, size_t fixed, const MatVecFusion& f);
// x [..., k] . dequant(W)^T (+ bias [n]) for W [n, k] held block-quantized
// as quants and scales (rlx/quant.h). A product of more rows than
// kMatMulQVectorRows has a second output, W dequantized to x's dtype [n, k]:
// scratch the memory plan reuses across products, which the product then
// reads as a plain matrix product (prefill); fewer rows dequantize on the fly.
struct MatMulQAttrs {
  QuantType type = QuantType::Q8_0;
  MatVecFusion fused{};
  // Any number of rows multiplied on the quantized blocks (the CPU backend):
  // no dequantized copy of W for products of more than kMatMulQVectorRows rows.
  bool any_rows_in_place = false;
};
constexpr int64_t kMatMulQVectorRows = kMatVecRows;
// gather_q: rows of a table [vocab, dim] held block-quantized as quants and
// scales (rlx/quant.h, as a matmul_q weight), dequantized into `dtype`.
struct GatherQAttrs {
  QuantType type = QuantType::Q8_0;
  DType dtype = DType::F32;
};
struct NormAttrs {
  NormKind kind = NormKind::Layer;
  float eps = 1e-5f;
  // RmsNorm/LayerNorm only: a last input r added to the result, out = r +
  // norm(x) * gamma [+ beta], the normalized value rounded to the type
  // first (a sandwich norm and the residual add after it, in one kernel).
  bool add_after = false;
};
// x: [B, S, *] (heads packed per row), positions: i32 [B, S] or [S].
struct RopeAttrs {
  int heads = 1, head_dim = 1, n_rot = 0;  // n_rot 0 = head_dim
  float theta = 10000.f;
  bool interleaved = false;  // false: rotate halves (NeoX/HF); true: pairs (GPT-J/GGUF)
  // Empty, or n_rot/2 divisors (at most 128): pair i turns at
  // theta^(-2i/n_rot) / freq_divisors[i] (Llama 3 rope scaling, GGUF's
  // rope_freqs.weight).
  std::vector<float> freq_divisors;
  // cos and sin are multiplied by this (YaRN's mscale, LongRoPE's attention
  // factor), so q.k scales by its square.
  float attention_factor = 1.f;
  // positions is i32 [batch]: the start position, row i is at positions[b] + i.
  bool pos_is_start = false;
  int64_t offset = 0, stride = 0;  // like AttentionAttrs
  // Each head RMS-normalized first, with the gain [head_dim] as the third
  // input (Qwen3's q/k norm; fuse_head_norm_rope sets it).
  bool head_norm = false;
  float head_norm_eps = 0.f;
};
// q: [B, Sq, *], k/v: [B, Skv, *]; head h of q is columns
// [offset + h*head_dim, +head_dim) of a row; a row is `stride` elements apart
// (0 = the tensor's own last dim). Narrow fuses into these offsets/strides.
struct AttentionAttrs {
  int q_heads = 1, kv_heads = 1, head_dim = 1;
  float scale = 1.f;
  MaskKind mask = MaskKind::None;  // Padding: 4th input, i32 [B, Skv], 1 = keep
  // Last input i32 [B]: the first query of batch b sits at position pos[b],
  // so keys j >= pos[b] + Sq are not valid yet and Causal keeps j <= pos[b] + i
  // (a decoder attending its KV cache). Read from device memory at run time.
  bool q_pos = false;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  // rotate_q: q's heads are rotated at the query positions (q_rope: RopeAttrs
  // over all q heads, offset/stride unused) as they are read; one query row
  // with q_pos only (a decode step). The fusion of RoPE on q.
  bool rotate_q = false;
  RopeAttrs q_rope;
  // kv_slots: the input after q_pos, i32 [B], names the row of k/v's batch
  // (a pool of caches [S, Skv, *], S any size) that batch b of q attends: a
  // ragged decode batch reads each sequence's own cache slot. Read at run
  // time; needs q_pos and no padding mask.
  bool kv_slots = false;
  // window > 0: a sliding window. Causal: a query at position p attends
  // keys in (p - window, p] (Gemma's local layers). Otherwise two-sided: query
  // i attends keys j with |i - j| < window (ModernBERT's local layers); that
  // needs Sq == Skv and no q_pos.
  int64_t window = 0;
  // softcap > 0: each scaled score s becomes softcap * tanh(s / softcap)
  // before the softmax (Gemma 2's attention-logit soft-capping).
  float softcap = 0.f;
  // ring: k/v are a ring of Skv rows per sequence, the key at position j in
  // row j mod Skv (a sliding-window layer's cache that does not grow past
  // the window; kv_write with ring fills it). Needs a causal window, query
  // positions and Skv >= kv_ring_rows(window, Sq).
  bool ring = false;
};
// The rows a ring cache needs for runs of up to max_run tokens: the window,
// the rows one run writes, and a margin that lets the CPU read from the
// window's first key rounded down to 32 (so a step sums its keys in the
// lanes a cache of every position would), none of them overwritten yet.
inline constexpr int64_t kKvRingMargin = 32;
inline int64_t kv_ring_rows(int64_t window, int64_t max_run) { return window + max_run + kKvRingMargin; }
// Where attention's optional inputs sit: q, k, v, [mask], [q_pos], [kv_slots].
inline size_t attention_q_pos_input(const AttentionAttrs& a) { return a.mask == MaskKind::Padding ? 4 : 3; }
inline size_t attention_kv_slots_input(const AttentionAttrs& a) { return attention_q_pos_input(a) + 1; }
// out = act(gate) * up over [..., cols]: act is silu (SwiGLU) or GELU
// (GeGLU: the tanh form for Gemma, erf for ModernBERT). gate's columns are [gate_offset,
// +cols) of each row of its input, up's [up_offset, +cols) of its: one fused
// gate/up matmul output [..., 2*cols] feeds both (offsets 0 and cols).
// cols 0 = the inputs' last dim (then offsets must be 0).
struct SwiGluAttrs {
  int64_t cols = 0, gate_offset = 0, up_offset = 0;
  Activation act = Activation::Silu;
};
// kv_write's rows are columns [offset, offset + the cache's row) of each row
// of its input, rows `stride` elements apart (0 = the input's own last dim).
// With rotate, the first rope.heads heads of each row are rotated (RopeAttrs,
// positions = the write positions, rope.offset/stride unused) as they are
// stored: the fusion of RoPE on K and the K/V slices of a fused projection.
// With slots, a 4th input i32 [B] names the cache row (of a pool [S,
// max_ctx, row], S any size) each batch b writes; a slot outside the pool is
// skipped like a position outside the cache.
// rope.head_norm (with rotate): the gain is the last input.
// With ring, position t lands in row t mod max_ctx (AttentionAttrs::ring):
// no position is outside the cache.
struct KvWriteAttrs {
  int64_t offset = 0, stride = 0;
  bool rotate = false;
  RopeAttrs rope;
  bool slots = false;
  bool ring = false;
};
struct NarrowAttrs { int axis = 0; int64_t start = 0, length = 0; };
struct AxisAttrs { int axis = 0; };
struct PermuteAttrs { std::vector<int> perm; };
struct ShapeAttrs { Shape shape; };  // reshape target; one dim may be -1
struct CastAttrs { DType to = DType::F32; };
struct ReduceAttrs { int axis = -1; ReduceKind kind = ReduceKind::Sum; bool keepdim = false; };
// Token sampling (see Graph::sample): temperature > 0, top_k >= 0 (0 = no
// limit), top_p in (0, 1].
struct SampleAttrs {
  float temperature = 1.f;
  int32_t top_k = 0;
  float top_p = 1.f;
  uint64_t seed = 0;
};

// Mixture-of-experts routing (see Graph::moe_route): k experts per row;
// norm_topk: the k weights are renormalised to sum to 1 (Qwen3-MoE's
// norm_topk_prob; Mixtral's softmax over its top-k logits is the same).
constexpr int kMaxMoeTopK = 32;
struct MoeRouteAttrs {
  int k = 1;
  bool norm_topk = true;
};

// Tensor parallelism (see Graph::all_gather): the ranks of the group.
struct AllGatherAttrs {
  int ranks = 1;
};

using Attrs = std::variant<NoAttrs, MatMulAttrs, MatMulQAttrs, NormAttrs, AttentionAttrs, RopeAttrs, NarrowAttrs,
                           AxisAttrs, PermuteAttrs, ShapeAttrs, CastAttrs, ReduceAttrs, SwiGluAttrs,
                           KvWriteAttrs, SampleAttrs, MoeRouteAttrs, GatherQAttrs, AllGatherAttrs>;

enum class OpKind : uint8_t {
#define X(e, n, a) e,
#include "rlx/ops.def"
#undef X
};
const char* op_name(OpKind k);
constexpr int kNumOps = 0
#define X(e, n, a) +1
#include "rlx/ops.def"
#undef X
    ;

using ValueId = int32_t;

struct Value {
  Shape shape;
  DType dtype = DType::F32;
  int32_t producer = -1;  // node index
  int32_t index = 0;      // which output of the producer
};

struct Node {
  OpKind op;
  std::vector<ValueId> inputs, outputs;
  Attrs attrs;
  std::string name;  // Input/Param names are their binding names
  std::shared_ptr<const std::vector<uint8_t>> data;  // Constant payload
  bool dead = false;  // removed by a pass; kept so node ids stay stable
};

// A graph and its builder. Ops return the id of their (first) output value.
class Graph {
 public:
  ValueId input(const std::string& name, Shape shape, DType dt);
  ValueId param(const std::string& name, Shape shape, DType dt);
  ValueId constant(Shape shape, DType dt, std::vector<uint8_t> bytes, const std::string& name = "");
  // Memory that persists across runs (a KV cache): zeroed at creation and by
  // Executable::reset_state(), shared by executables of one arena share.
  ValueId state(const std::string& name, Shape shape, DType dt);
  ValueId constant_f32(Shape shape, DType dt, const std::vector<float>& values, const std::string& name = "");

  ValueId matmul(ValueId a, ValueId b, bool trans_a = false, bool trans_b = false);
  // a @ b (+ bias) then act: the fused form the MatMul fusion pass produces.
  ValueId linear(ValueId a, ValueId b, ValueId bias, Activation act, bool trans_b = true);
  // x . dequant(W)^T (+ bias; -1 = none), W given by its quants and scales.
  ValueId matmul_q(ValueId x, ValueId quants, ValueId scales, QuantType type, ValueId bias = -1);
  ValueId add(ValueId a, ValueId b);
  ValueId sub(ValueId a, ValueId b);
  ValueId mul(ValueId a, ValueId b);
  ValueId div(ValueId a, ValueId b);
  ValueId gelu(ValueId x);
  ValueId gelu_tanh(ValueId x);
  ValueId silu(ValueId x);
  ValueId relu(ValueId x);
  ValueId tanh(ValueId x);
  ValueId activation(ValueId x, Activation act);
  ValueId layer_norm(ValueId x, ValueId gamma, ValueId beta, float eps);  // beta may be -1
  ValueId rms_norm(ValueId x, ValueId gamma, float eps);
  // Fused residual + norm: returns {x + residual, norm(x + residual)}.
  std::pair<ValueId, ValueId> add_norm(ValueId x, ValueId residual, ValueId gamma, ValueId beta,
                                       NormKind kind, float eps);
  ValueId softmax(ValueId x);
  // mask: the padding mask or -1; q_pos: the start positions when a.q_pos,
  // else -1; kv_slots: each batch's k/v row when a.kv_slots, else -1.
  ValueId attention(ValueId q, ValueId k, ValueId v, ValueId mask, const AttentionAttrs& a, ValueId q_pos = -1,
                    ValueId kv_slots = -1);
  ValueId rope(ValueId x, ValueId positions, const RopeAttrs& a);
  ValueId gather(ValueId table, ValueId ids);
  // gather over a table [vocab, dim] held as the quants and scales of a
  // matmul_q weight: out[..., :] = dequant(row ids[...]) in dt (an id
  // outside the table gives a zero row).
  ValueId gather_q(ValueId quants, ValueId scales, ValueId ids, QuantType type, DType dt);
  ValueId narrow(ValueId x, int axis, int64_t start, int64_t length);
  ValueId concat(const std::vector<ValueId>& xs, int axis);
  ValueId permute(ValueId x, std::vector<int> perm);
  ValueId transpose(ValueId x, int a0, int a1);
  ValueId reshape(ValueId x, Shape shape);  // one dim may be -1
  ValueId cast(ValueId x, DType dt);
  ValueId reduce(ValueId x, int axis, ReduceKind kind, bool keepdim = false);
  ValueId softmax_cross_entropy(ValueId logits, ValueId labels);  // per-row loss [N]
  ValueId swiglu(ValueId gate, ValueId up, Activation act = Activation::Silu);  // act(gate) * up
  // Stores rows [B, n, ...] into the state `cache` [B, max_ctx, ...] at rows
  // pos[b] .. pos[b]+n-1 (pos: i32 [B], read at run time). Returns the cache
  // after the write (the same memory): readers of it run after the write.
  // With slots (i32 [B], read at run time) batch b writes cache row slots[b]
  // of a pool [S, max_ctx, ...] instead of row b. With ring, position t
  // goes to row t mod max_ctx (KvWriteAttrs::ring).
  ValueId kv_write(ValueId cache, ValueId rows, ValueId pos, ValueId slots = -1, bool ring = false);
  // silu(first half) * second half of each row of a fused gate/up [..., 2*cols].
  ValueId swiglu_fused(ValueId gate_up);
  // i32 [...]: the index of the largest element along x's last dim; ties and
  // several NaNs give the lowest index, and a NaN counts as larger than any
  // number (torch.argmax / numpy.argmax).
  ValueId argmax(ValueId x);
  // i32 [...]: a token index drawn from softmax(x / temperature) along x's
  // last dim, limited to the top_k largest values (ties at the k-th all
  // kept) and then to the most likely ones whose mass first reaches top_p.
  // The uniform of row r is a hash of (seed, positions[r]) (positions: i32
  // shaped like x without its last dim, read at run time), so a replayed
  // graph draws anew when its positions advance. NaN counts as -inf; a row
  // whose largest value is not finite gives the lowest index holding it.
  // The exact definition: src/thunks/sample_math.h.
  ValueId sample(ValueId x, ValueId positions, const SampleAttrs& a);
  // Mixture-of-experts routing of router logits [rows, experts]: {ids i32
  // [rows, k], weights [rows, k]} of the k largest logits (the lower index
  // first on ties), weights the softmax over all experts at those ids (in
  // f32, stored in the logits' dtype), renormalised over the k when
  // a.norm_topk.
  std::pair<ValueId, ValueId> moe_route(ValueId logits, const MoeRouteAttrs& a);
  // Stacked experts w [experts, n, k_in] applied to the rows their ids
  // [rows, top_k] (i32, read at run time) choose: x is [rows, k_in] (each
  // row read by all of its experts) or [rows, top_k, k_in] (one row per
  // choice); out [rows, top_k, n] = x . w[id]^T. With weights [rows, top_k]
  // (-1 = none) out is [rows, n], the choices' products weighted and summed
  // in choice order. An id outside [0, experts) contributes zeros.
  ValueId moe_matmul(ValueId x, ValueId w, ValueId ids, ValueId weights = -1);
  // The same with the experts block-quantized as `type`: quants [experts, n,
  // k_in / elems per word] (i32) and scales [experts, n, k_in / 32 * scales
  // per block] (f16), each expert's rows as matmul_q holds a weight's.
  ValueId moe_matmul_q(ValueId x, ValueId quants, ValueId scales, QuantType type, ValueId ids,
                       ValueId weights = -1);
  // Tensor parallelism: x summed elementwise over the ranks of the
  // executable's group (CompileOptions::collective), the same on every
  // rank; with one rank, x itself. Each rank's graph must hold the same
  // all_reduce nodes in the same order.
  ValueId all_reduce(ValueId x);
  // Tensor parallelism: every rank's x [d0, ...] stacked in rank order,
  // [ranks * d0, ...], the same on every rank (ranks: the group's size; one
  // rank: x itself).
  ValueId all_gather(ValueId x, int ranks);

  void output(const std::string& name, ValueId v);
  // The state `state` takes `value` (same shape and dtype) at the end of each
  // run: lowered to a copy into the state's slot after every thunk that reads
  // the state, so the whole run sees the old value. One update per state.
  void update_state(ValueId state, ValueId value);

  // Generic node creation: infers output shapes, checks inputs. Passes use it.
  std::vector<ValueId> add_node(OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                                const std::string& name = "");

  const Value& value(ValueId v) const;
  Value& value_mut(ValueId v) { return values_.at(size_t(v)); }
  const Node& node(int32_t n) const { return nodes_.at(size_t(n)); }
  Node& node_mut(int32_t n) { return nodes_.at(size_t(n)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<std::pair<std::string, ValueId>>& outputs() const { return outputs_; }
  std::vector<std::pair<std::string, ValueId>>& outputs_mut() { return outputs_; }
  // {state value, its value at the end of the run}, in the order declared.
  const std::vector<std::pair<ValueId, ValueId>>& state_updates() const { return state_updates_; }
  size_t live_node_count() const;

  // Replace every use of `from` (node inputs, graph outputs, state updates) by `to`.
  void replace_uses(ValueId from, ValueId to);
  // Nodes using value v as an input (live nodes only).
  std::vector<int32_t> users(ValueId v) const;
  // "node 12 (matmul 'l0.q')": how errors name a node.
  std::string describe(int32_t node) const;

 private:
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<std::pair<std::string, ValueId>> outputs_;
  std::vector<std::pair<ValueId, ValueId>> state_updates_;
};

// Output shapes/dtypes of a node (throws rlx::Error naming the node).
std::vector<Value> infer_outputs(const Graph& g, OpKind op, const std::vector<ValueId>& inputs,
                                 const Attrs& attrs, const std::string& label);

// Full-graph verifier: every live node's inputs exist, are live, and its
// stored output types equal what shape inference says; names are unique.
void verify(const Graph& g);

}  // namespace rlx
