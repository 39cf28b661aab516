// One case per op: how a compute node becomes thunk params.
#include <algorithm>

#include "compile/lower.h"
#include "rlx/quant.h"

namespace rlx {

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

namespace {

Activation activation_of(OpKind op) {
  switch (op) {
    case OpKind::Gelu: return Activation::Gelu;
    case OpKind::GeluTanh: return Activation::GeluTanh;
    case OpKind::Silu: return Activation::Silu;
    case OpKind::Relu: return Activation::Relu;
    case OpKind::Tanh: return Activation::Tanh;
    default: return Activation::None;
  }
}

// dst[idx] = src[idx] over `shape`, with given element strides.
CopyParams copy_params(uint64_t src, DType sdt, const std::vector<int64_t>& sst, uint64_t dst,
                       DType ddt, const std::vector<int64_t>& dstst, const Shape& shape) {
  CopyParams p{};
  p.src = src;
  p.dst = dst;
  p.n = numel(shape);
  p.rank = int32_t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    p.shape[i] = shape[i];
    p.src_stride[i] = sst[i];
    p.dst_stride[i] = dstst[i];
  }
  p.src_dtype = sdt;
  p.dst_dtype = ddt;
  return p;
}

// Nothing reads v: no live node, graph output or state update.
bool unread(const Graph& g, ValueId v) {
  for (const auto& [name, out] : g.outputs())
    if (out == v) return false;
  for (const auto& [state, from] : g.state_updates())
    if (from == v || state == v) return false;
  return g.users(v).empty();
}

// v is a param or constant, a param group (params laid side by side at
// load: no thunk writes it), or a view of one.
bool is_constant(const Graph& g, ValueId v) {
  for (;;) {
    const int32_t id = g.value(v).producer;
    if (id < 0) return false;
    const OpKind op = g.node(id).op;
    if (op == OpKind::Param || op == OpKind::Constant || is_param_group(g, g.node(id))) return true;
    if (!is_view(g, id)) return false;
    v = g.node(id).inputs[0];
  }
}

static_assert(kMaxRopePairs == 64, "shape inference checks divisors against 64 pairs");
RopeFreqDivisors rope_freq_divisors(const RopeAttrs& at) {
  RopeFreqDivisors f{};
  f.count = int32_t(at.freq_divisors.size());  // at most kMaxRopePairs: shape inference checks
  for (int32_t i = 0; i < f.count; ++i) f.div[i] = at.freq_divisors[size_t(i)];
  f.scale = at.attention_factor;
  return f;
}

MatVecFusionParams fusion_params(const Graph& g, const MatVecFusion& f, const ProductInputs& pi, const Node& n,
                                 const std::function<uint64_t(ValueId)>& addr) {
  MatVecFusionParams r;
  if (pi.gamma >= 0) {
    r.norm_gamma = addr(n.inputs[size_t(pi.gamma)]);
    r.norm_gamma_constant = is_constant(g, n.inputs[size_t(pi.gamma)]);
  }
  if (pi.residual >= 0) r.residual = addr(n.inputs[size_t(pi.residual)]);
  r.norm_eps = f.eps;
  r.glu = f.glu;
  return r;
}

}  // namespace

bool is_view(const Graph& g, int32_t node) {
  const Node& n = g.node(node);
  if (n.op == OpKind::Reshape) return true;
  if (n.op != OpKind::Narrow) return false;
  const Shape& xs = g.value(n.inputs[0]).shape;
  int axis = std::get<NarrowAttrs>(n.attrs).axis;
  if (axis < 0) axis += int(xs.size());
  return numel(Shape(xs.begin(), xs.begin() + axis)) == 1;  // one contiguous run
}

void lower_node(const Graph& g, int32_t id, const std::function<uint64_t(ValueId)>& addr,
                std::vector<Thunk>& out) {
  const Node& n = g.node(id);
  if (is_view(g, id)) return;
  auto V = [&](size_t i) -> const Value& { return g.value(n.inputs.at(i)); };
  const Value& y = g.value(n.outputs.at(0));
  std::string label = std::string(op_name(n.op)) + (n.name.empty() ? "" : " '" + n.name + "'");
  auto emit = [&](ThunkParams p) {
    Thunk t;
    t.params = p;
    t.node = id;
    t.label = label;
    out.push_back(std::move(t));
  };

  switch (n.op) {
    case OpKind::MatMul: {
      const auto& at = std::get<MatMulAttrs>(n.attrs);
      const Value &a = V(0), &b = V(1);
      size_t ra = a.shape.size(), rb = b.shape.size();
      int64_t M = at.trans_a ? a.shape[ra - 1] : a.shape[ra - 2];
      int64_t K = at.trans_a ? a.shape[ra - 2] : a.shape[ra - 1];
      int64_t N = at.trans_b ? b.shape[rb - 2] : b.shape[rb - 1];
      int64_t batch_a = numel(a.shape) / (M * K), batch_b = numel(b.shape) / (K * N);
      MatMulParams p{};
      p.a = addr(n.inputs[0]);
      p.b = addr(n.inputs[1]);
      const ProductInputs pi = product_inputs(n.inputs.size(), 2, at.fused);
      p.bias = pi.bias >= 0 ? addr(n.inputs[size_t(pi.bias)]) : kNoBuffer;
      p.fused = fusion_params(g, at.fused, pi, n, addr);
      p.out = addr(n.outputs[0]);
      p.n = N;
      p.k = K;
      p.lda = at.trans_a ? M : K;
      p.ldb = at.trans_b ? K : N;
      p.ldc = p.fused.out_cols(N);
      if (rb == 2 && !at.trans_a) {  // fold a's batch into rows: one larger GEMM
        p.batch = 1;
        p.m = M * batch_a;
      } else {
        p.m = M;
        p.batch = std::max(batch_a, batch_b);
        p.stride_a = ra == 2 ? 0 : M * K;
        p.stride_b = rb == 2 ? 0 : K * N;
        p.stride_out = M * N;
      }
      p.dtype = a.dtype;
      p.act = at.act;
      p.trans_a = at.trans_a;
      p.trans_b = at.trans_b;
      p.b_constant = is_constant(g, n.inputs[1]);
      return emit(p);
    }
    case OpKind::MatMulQ: {
      const Value& x = V(0);
      const auto& at = std::get<MatMulQAttrs>(n.attrs);
      const ProductInputs pi = product_inputs(n.inputs.size(), 3, at.fused);
      MatMulQParams p{};
      p.x = addr(n.inputs[0]);
      p.quants = addr(n.inputs[1]);
      p.scales = addr(n.inputs[2]);
      p.bias = pi.bias >= 0 ? addr(n.inputs[size_t(pi.bias)]) : kNoBuffer;
      p.fused = fusion_params(g, at.fused, pi, n, addr);
      p.out = addr(n.outputs[0]);
      p.dequantized = n.outputs.size() > 1 ? addr(n.outputs[1]) : kNoBuffer;
      p.k = x.shape.back();
      p.m = numel(x.shape) / p.k;
      p.n = V(1).shape[0];
      p.dtype = x.dtype;
      p.quant = at.type;
      p.weights_constant = is_constant(g, n.inputs[1]) && is_constant(g, n.inputs[2]);
      return emit(p);
    }
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: {
      BinaryParams p{};
      p.a = addr(n.inputs[0]);
      p.b = addr(n.inputs[1]);
      p.out = addr(n.outputs[0]);
      p.n = numel(y.shape);
      p.rank = int32_t(y.shape.size());
      for (int side = 0; side < 2; ++side) {
        const Shape& s = V(size_t(side)).shape;
        std::vector<int64_t> st = contiguous_strides(s);
        for (size_t i = 0; i < y.shape.size(); ++i) {
          size_t lead = y.shape.size() - s.size();
          int64_t stride = i < lead || s[i - lead] == 1 ? 0 : st[i - lead];
          (side ? p.stride_b : p.stride_a)[i] = stride;
        }
      }
      for (size_t i = 0; i < y.shape.size(); ++i) p.shape[i] = y.shape[i];
      p.dtype = y.dtype;
      p.op = n.op == OpKind::Add ? BinaryOp::Add
             : n.op == OpKind::Sub ? BinaryOp::Sub
             : n.op == OpKind::Mul ? BinaryOp::Mul
                                   : BinaryOp::Div;
      return emit(p);
    }
    case OpKind::Gelu:
    case OpKind::GeluTanh:
    case OpKind::Silu:
    case OpKind::Relu:
    case OpKind::Tanh:
      return emit(UnaryParams{addr(n.inputs[0]), addr(n.outputs[0]), numel(y.shape),
                                                y.dtype, activation_of(n.op)});
    case OpKind::LayerNorm:
    case OpKind::RmsNorm:
    case OpKind::AddNorm: {
      const auto& at = std::get<NormAttrs>(n.attrs);
      bool add = n.op == OpKind::AddNorm;
      size_t base = add ? 1 : 0;
      NormParams p{};
      p.x = addr(n.inputs[0]);
      p.residual = add ? addr(n.inputs[1]) : kNoBuffer;
      const size_t after = at.add_after ? 1 : 0;
      p.gamma = addr(n.inputs[base + 1]);
      p.beta = n.inputs.size() > base + 2 + after ? addr(n.inputs[base + 2]) : kNoBuffer;
      p.add_after = after ? addr(n.inputs.back()) : kNoBuffer;
      // Post-norm encoders read only the normalized value: the sum is not stored.
      p.sum_out = add && !unread(g, n.outputs[0]) ? addr(n.outputs[0]) : kNoBuffer;
      p.out = addr(n.outputs[add ? 1 : 0]);
      p.cols = V(0).shape.back();
      p.rows = numel(V(0).shape) / p.cols;
      p.eps = at.eps;
      p.dtype = V(0).dtype;
      p.kind = n.op == OpKind::LayerNorm ? NormKind::Layer
               : n.op == OpKind::RmsNorm ? NormKind::Rms
                                         : at.kind;
      return emit(p);
    }
    case OpKind::Softmax: {
      int64_t cols = y.shape.back();
      return emit(SoftmaxParams{addr(n.inputs[0]), addr(n.outputs[0]),
                                                    numel(y.shape) / cols, cols, y.dtype});
    }
    case OpKind::Attention: {
      const auto& at = std::get<AttentionAttrs>(n.attrs);
      AttentionParams p{};
      p.q = addr(n.inputs[0]);
      p.k = addr(n.inputs[1]);
      p.v = addr(n.inputs[2]);
      p.mask = at.mask == MaskKind::Padding ? addr(n.inputs[3]) : kNoBuffer;
      p.pos = at.q_pos ? addr(n.inputs[attention_q_pos_input(at)]) : kNoBuffer;
      if (at.kv_slots) {
        p.kv_slots = addr(n.inputs[attention_kv_slots_input(at)]);
        p.kv_batch = V(1).shape[0];
      }
      p.out = addr(n.outputs[0]);
      p.batch = V(0).shape[0];
      p.sq = V(0).shape[1];
      p.skv = V(1).shape[1];
      p.q_offset = at.q_offset;
      p.k_offset = at.k_offset;
      p.v_offset = at.v_offset;
      p.q_stride = at.q_stride ? at.q_stride : V(0).shape[2];
      p.k_stride = at.k_stride ? at.k_stride : V(1).shape[2];
      p.v_stride = at.v_stride ? at.v_stride : V(2).shape[2];
      p.q_heads = at.q_heads;
      p.kv_heads = at.kv_heads;
      p.head_dim = at.head_dim;
      p.scale = at.scale;
      p.window = int32_t(at.window);
      p.softcap = at.softcap;
      p.mask_kind = at.mask;
      p.dtype = V(0).dtype;
      p.ring = at.ring;
      if (at.rotate_q) {
        p.q_rope_n_rot = at.q_rope.n_rot ? at.q_rope.n_rot : at.q_rope.head_dim;
        p.q_rope_theta = at.q_rope.theta;
        p.q_rope_interleaved = at.q_rope.interleaved;
        p.q_rope_freqs = rope_freq_divisors(at.q_rope);
      }
      return emit(p);
    }
    case OpKind::Rope: {
      const auto& at = std::get<RopeAttrs>(n.attrs);
      RopeParams p{};
      p.x = addr(n.inputs[0]);
      p.pos = addr(n.inputs[1]);
      p.out = addr(n.outputs[0]);
      p.batch = V(0).shape[0];
      p.seq = V(0).shape[1];
      p.offset = at.offset;
      p.stride = at.stride ? at.stride : V(0).shape[2];
      p.heads = at.heads;
      p.head_dim = at.head_dim;
      p.n_rot = at.n_rot ? at.n_rot : at.head_dim;
      p.theta = at.theta;
      p.interleaved = at.interleaved;
      p.pos_batched = V(1).shape.size() == 2;
      p.pos_start = at.pos_is_start;
      p.freqs = rope_freq_divisors(at);
      p.dtype = V(0).dtype;
      if (at.head_norm) {
        p.gamma = addr(n.inputs[2]);
        p.norm_eps = at.head_norm_eps;
      }
      return emit(p);
    }
    case OpKind::Gather:
      return emit(GatherParams{addr(n.inputs[0]), addr(n.inputs[1]), addr(n.outputs[0]),
                               numel(V(1).shape), V(0).shape[0], V(0).shape[1], V(0).dtype});
    case OpKind::GatherQ: {
      const auto& at = std::get<GatherQAttrs>(n.attrs);
      return emit(GatherQParams{addr(n.inputs[0]), addr(n.inputs[1]), addr(n.inputs[2]), addr(n.outputs[0]),
                                numel(V(2).shape), V(0).shape[0], V(0).shape[1] * quant_elems_per_word(at.type),
                                at.dtype, at.type});
    }
    case OpKind::Narrow: {
      const auto& at = std::get<NarrowAttrs>(n.attrs);
      const Shape& xs = V(0).shape;
      int axis = at.axis < 0 ? at.axis + int(xs.size()) : at.axis;
      std::vector<int64_t> st = contiguous_strides(xs);
      uint64_t src = addr(n.inputs[0]) + uint64_t(at.start * st[size_t(axis)]) * dtype_size(y.dtype);
      return emit(copy_params(src, y.dtype, st, addr(n.outputs[0]), y.dtype,
                                               contiguous_strides(y.shape), y.shape));
    }
    case OpKind::Permute: {
      const auto& perm = std::get<PermuteAttrs>(n.attrs).perm;
      std::vector<int64_t> in_st = contiguous_strides(V(0).shape), st(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) st[i] = in_st[size_t(perm[i])];
      return emit(copy_params(addr(n.inputs[0]), y.dtype, st, addr(n.outputs[0]),
                                               y.dtype, contiguous_strides(y.shape), y.shape));
    }
    case OpKind::Cast: {
      std::vector<int64_t> st = contiguous_strides(y.shape);
      return emit(copy_params(addr(n.inputs[0]), V(0).dtype, st, addr(n.outputs[0]),
                                               y.dtype, st, y.shape));
    }
    case OpKind::Concat: {
      int axis = std::get<AxisAttrs>(n.attrs).axis;
      if (axis < 0) axis += int(y.shape.size());
      std::vector<int64_t> yst = contiguous_strides(y.shape);
      int64_t at = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Shape& s = V(i).shape;
        uint64_t dst = addr(n.outputs[0]) + uint64_t(at * yst[size_t(axis)]) * dtype_size(y.dtype);
        emit(copy_params(addr(n.inputs[i]), y.dtype, contiguous_strides(s), dst,
                                          y.dtype, yst, s));
        at += s[size_t(axis)];
      }
      return;
    }
    case OpKind::Reduce: {
      const auto& at = std::get<ReduceAttrs>(n.attrs);
      const Shape& xs = V(0).shape;
      int axis = at.axis < 0 ? at.axis + int(xs.size()) : at.axis;
      ReduceParams p{};
      p.x = addr(n.inputs[0]);
      p.out = addr(n.outputs[0]);
      p.len = xs[size_t(axis)];
      p.outer = numel(Shape(xs.begin(), xs.begin() + axis));
      p.inner = numel(xs) / (p.outer * p.len);
      p.kind = at.kind;
      p.dtype = y.dtype;
      return emit(p);
    }
    case OpKind::SoftmaxCrossEntropy:
      return emit(SoftmaxCEParams{addr(n.inputs[0]), addr(n.inputs[1]), addr(n.outputs[0]),
                                  V(0).shape[0], V(0).shape[1], V(0).dtype});
    case OpKind::SwiGlu: {
      const auto& at = std::get<SwiGluAttrs>(n.attrs);
      SwiGluParams p{};
      p.gate = addr(n.inputs[0]);
      p.up = addr(n.inputs[1]);
      p.out = addr(n.outputs[0]);
      p.cols = y.shape.back();
      p.rows = numel(y.shape) / p.cols;
      p.gate_offset = at.gate_offset;
      p.up_offset = at.up_offset;
      p.gate_stride = V(0).shape.back();
      p.up_stride = V(1).shape.back();
      p.dtype = y.dtype;
      p.act = at.act;
      return emit(p);
    }
    case OpKind::KvWrite: {
      const Shape& cs = V(0).shape;
      KvWriteParams p{};
      p.cache = addr(n.inputs[0]);
      p.rows = addr(n.inputs[1]);
      p.pos = addr(n.inputs[2]);
      p.batch = V(1).shape[0];
      p.cache_batch = cs[0];
      const auto& wa = std::get<KvWriteAttrs>(n.attrs);
      if (wa.slots) p.slots = addr(n.inputs[3]);
      p.n_new = V(1).shape[1];
      p.max_ctx = cs[1];
      p.row = numel(cs) / (cs[0] * cs[1]);
      const auto& at = std::get<KvWriteAttrs>(n.attrs);
      p.rows_offset = at.offset;
      p.rows_stride = at.stride ? at.stride : p.row;
      p.ring = at.ring;
      if (at.rotate) {
        p.rope_heads = at.rope.heads;
        p.head_dim = at.rope.head_dim;
        p.n_rot = at.rope.n_rot ? at.rope.n_rot : at.rope.head_dim;
        p.theta = at.rope.theta;
        p.interleaved = at.rope.interleaved;
        p.freqs = rope_freq_divisors(at.rope);
        if (at.rope.head_norm) {
          p.gamma = addr(n.inputs.back());
          p.norm_eps = at.rope.head_norm_eps;
        }
      }
      p.dtype = V(0).dtype;
      return emit(p);
    }
    case OpKind::MoeRoute: {
      const auto& at = std::get<MoeRouteAttrs>(n.attrs);
      MoeRouteParams p{};
      p.logits = addr(n.inputs[0]);
      p.ids = addr(n.outputs[0]);
      p.weights = addr(n.outputs[1]);
      p.rows = V(0).shape[0];
      p.experts = V(0).shape[1];
      p.k = at.k;
      p.norm_topk = at.norm_topk;
      p.dtype = V(0).dtype;
      return emit(p);
    }
    case OpKind::MoeMatMulQ: {
      const Shape &xs = V(0).shape, &qs = V(1).shape;
      MoeMatMulQParams p{};
      p.x = addr(n.inputs[0]);
      p.quants = addr(n.inputs[1]);
      p.scales = addr(n.inputs[2]);
      p.ids = addr(n.inputs[3]);
      p.weights = n.inputs.size() > 4 ? addr(n.inputs[4]) : kNoBuffer;
      p.out = addr(n.outputs[0]);
      p.rows = V(3).shape[0];
      p.top_k = V(3).shape[1];
      p.quant = std::get<MatMulQAttrs>(n.attrs).type;
      p.experts = qs[0];
      p.n = qs[1];
      p.k = qs[2] * quant_elems_per_word(p.quant);
      const bool per_choice = xs.size() == 3;
      p.x_row_stride = per_choice ? p.top_k * p.k : p.k;
      p.x_choice_stride = per_choice ? p.k : 0;
      p.dtype = V(0).dtype;
      p.w_constant = is_constant(g, n.inputs[1]) && is_constant(g, n.inputs[2]);
      return emit(p);
    }
    case OpKind::MoeMatMul: {
      const Shape &xs = V(0).shape, &ws = V(1).shape;
      MoeMatMulParams p{};
      p.x = addr(n.inputs[0]);
      p.w = addr(n.inputs[1]);
      p.ids = addr(n.inputs[2]);
      p.weights = n.inputs.size() > 3 ? addr(n.inputs[3]) : kNoBuffer;
      p.out = addr(n.outputs[0]);
      p.rows = V(2).shape[0];
      p.top_k = V(2).shape[1];
      p.experts = ws[0];
      p.n = ws[1];
      p.k = ws[2];
      const bool per_choice = xs.size() == 3;
      p.x_row_stride = per_choice ? p.top_k * p.k : p.k;
      p.x_choice_stride = per_choice ? p.k : 0;
      p.dtype = V(0).dtype;
      p.w_constant = is_constant(g, n.inputs[1]);
      return emit(p);
    }
    case OpKind::AllReduce:
      return emit(AllReduceParams{addr(n.inputs[0]), addr(n.outputs[0]), numel(y.shape), y.dtype});
    case OpKind::AllGather:
      return emit(AllGatherParams{addr(n.inputs[0]), addr(n.outputs[0]), numel(V(0).shape),
                                  int32_t(std::get<AllGatherAttrs>(n.attrs).ranks), y.dtype});
    case OpKind::Argmax: {
      ArgmaxParams p{};
      p.x = addr(n.inputs[0]);
      p.out = addr(n.outputs[0]);
      p.cols = V(0).shape.back();
      p.rows = numel(V(0).shape) / p.cols;
      p.dtype = V(0).dtype;
      return emit(p);
    }
    case OpKind::Sample: {
      const auto& at = std::get<SampleAttrs>(n.attrs);
      SampleParams p{};
      p.x = addr(n.inputs[0]);
      p.positions = addr(n.inputs[1]);
      p.out = addr(n.outputs[0]);
      p.cols = V(0).shape.back();
      p.rows = numel(V(0).shape) / p.cols;
      p.seed = at.seed;
      p.temperature = at.temperature;
      p.top_p = at.top_p;
      p.top_k = at.top_k;
      p.dtype = V(0).dtype;
      return emit(p);
    }
    case OpKind::Input:
    case OpKind::Param:
    case OpKind::Constant:
    case OpKind::State:
    case OpKind::Reshape: return;
  }
}

}  // namespace rlx
