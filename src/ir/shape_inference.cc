// Output shapes and dtypes of every op; errors name the node and the problem.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "rlx/graph.h"
#include "rlx/quant.h"

namespace rlx {

namespace {

int norm_axis(int axis, size_t rank, const std::string& who) {
  int r = int(rank);
  int a = axis < 0 ? axis + r : axis;
  RLX_CHECK(a >= 0 && a < r, who << ": axis " << axis << " out of range for rank " << r);
  return a;
}

Shape broadcast(const Shape& a, const Shape& b, const std::string& who) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    RLX_CHECK(da == db || da == 1 || db == 1,
              who << ": shapes " << shape_str(a) << " and " << shape_str(b) << " do not broadcast");
    out[i] = std::max(da, db);
  }
  return out;
}

void need_inputs(const std::vector<ValueId>& in, size_t lo, size_t hi, const std::string& who) {
  RLX_CHECK(in.size() >= lo && in.size() <= hi,
            who << ": takes " << lo << (hi > lo ? ".." + std::to_string(hi) : "") << " inputs, got "
                << in.size());
}

void need_float(const Value& v, const std::string& who, const char* what) {
  RLX_CHECK(is_float(v.dtype), who << ": " << what << " must be a float type, got "
                                   << dtype_name(v.dtype));
}

void need_dtype(const Value& v, DType dt, const std::string& who, const char* what) {
  RLX_CHECK(v.dtype == dt, who << ": " << what << " must be " << dtype_name(dt) << ", got "
                               << dtype_name(v.dtype));
}

void need_vector(const Value& v, int64_t n, DType dt, const std::string& who, const char* what) {
  RLX_CHECK(v.shape == Shape{n}, who << ": " << what << " must be [" << n << "], got "
                                     << shape_str(v.shape));
  need_dtype(v, dt, who, what);
}

// Row layout of a q/k/v or rope input: `width` used columns from `offset`.
void check_rows(const Value& v, int64_t offset, int64_t stride, int64_t width, const std::string& who,
                const char* what) {
  RLX_CHECK(v.shape.size() == 3, who << ": " << what << " must be [batch, seq, features], got "
                                     << shape_str(v.shape));
  int64_t row = v.shape[2];
  RLX_CHECK(stride == 0 || stride == row,
            who << ": " << what << " row stride " << stride << " != its last dim " << row);
  RLX_CHECK(offset >= 0 && offset + width <= row,
            who << ": " << what << " columns [" << offset << ", " << offset + width
                << ") exceed its last dim " << row);
  RLX_CHECK(stride != 0 || offset != 0 || width == row,
            who << ": " << what << " has " << row << " features, expected " << width);
}

// A rotation's frequency divisors: none, or one positive finite value per
// rotated pair (at most 64, head_dim 128: what the kernels' params carry,
// kMaxRopePairs); its attention factor positive and finite.
void check_freq_divisors(const RopeAttrs& at, int n_rot, const std::string& who) {
  constexpr int kMaxRopePairs = 64;
  RLX_CHECK(std::isfinite(at.attention_factor) && at.attention_factor > 0.f,
            who << ": rope attention factor " << at.attention_factor << " is not positive");
  const auto& d = at.freq_divisors;
  if (d.empty()) return;
  RLX_CHECK(int64_t(d.size()) == n_rot / 2 && n_rot / 2 <= kMaxRopePairs,
            who << ": " << d.size() << " frequency divisors for " << n_rot / 2 << " rotated pairs (at most "
                << kMaxRopePairs << ")");
  for (float v : d) RLX_CHECK(std::isfinite(v) && v > 0.f, who << ": frequency divisor " << v << " is not positive");
}

size_t fused_inputs(const MatVecFusion& f) { return size_t(f.rms_norm) + size_t(f.residual); }

// Output columns of a product of n weight rows: n / 2 with a fused glu.
int64_t glu_cols(const MatVecFusion& f, int64_t n, const std::string& who) {
  if (f.glu == Activation::None) return n;
  RLX_CHECK(n % 2 == 0, who << ": a fused glu needs an even number of weight rows ([gate; up]), got " << n);
  return n / 2;
}

// A product's fused RMSNorm (gamma [k]) and residual (y's shape): only the
// matrix-vector kernels implement them, so x has at most kMatVecRows rows.
void need_matvec_fusion(const Graph& g, const std::vector<ValueId>& in, const MatVecFusion& f,
                        const ProductInputs& pi, const Value& x, const Shape& y, const std::string& who) {
  if (!f.rms_norm && !f.residual && f.glu == Activation::None) return;
  const int64_t k = x.shape.back();
  RLX_CHECK(k > 0 && numel(x.shape) / k <= kMatVecRows,
            who << ": a fused norm, residual or glu needs at most " << kMatVecRows << " rows of x, got "
                << shape_str(x.shape));
  RLX_CHECK(f.glu == Activation::None || !f.residual, who << ": a fused glu takes no residual");
  if (f.rms_norm) {
    need_vector(g.value(in.at(size_t(pi.gamma))), k, x.dtype, who, "norm gamma");
    RLX_CHECK(f.eps >= 0.f, who << ": norm eps must be >= 0, got " << f.eps);
  }
  if (f.residual) {
    const Value& r = g.value(in.at(size_t(pi.residual)));
    RLX_CHECK(r.shape == y, who << ": residual must be " << shape_str(y) << ", got " << shape_str(r.shape));
    need_dtype(r, x.dtype, who, "residual");
  }
}

}  // namespace

std::vector<Value> infer_outputs(const Graph& g, OpKind op, const std::vector<ValueId>& in,
                                 const Attrs& attrs, const std::string& who) {
  auto V = [&](size_t i) -> const Value& { return g.value(in.at(i)); };
  auto out = [](Shape s, DType d) { return std::vector<Value>{Value{std::move(s), d, -1, 0}}; };

  switch (op) {
    case OpKind::Input:
    case OpKind::Param:
    case OpKind::Constant:
    case OpKind::State:
      RLX_FAIL(who << ": leaves are created with input/param/constant/state, not add_node");

    case OpKind::MatMul: {
      const auto& at = std::get<MatMulAttrs>(attrs);
      need_inputs(in, 2, 3 + fused_inputs(at.fused), who);
      const Value &a = V(0), &b = V(1);
      need_float(a, who, "a");
      need_dtype(b, a.dtype, who, "b");
      RLX_CHECK(a.shape.size() >= 2 && b.shape.size() >= 2,
                who << ": operands must have rank >= 2, got " << shape_str(a.shape) << " and "
                    << shape_str(b.shape));
      size_t ra = a.shape.size(), rb = b.shape.size();
      int64_t m = at.trans_a ? a.shape[ra - 1] : a.shape[ra - 2];
      int64_t ka = at.trans_a ? a.shape[ra - 2] : a.shape[ra - 1];
      int64_t kb = at.trans_b ? b.shape[rb - 1] : b.shape[rb - 2];
      int64_t n = at.trans_b ? b.shape[rb - 2] : b.shape[rb - 1];
      RLX_CHECK(ka == kb, who << ": inner dims differ: " << shape_str(a.shape)
                              << (at.trans_a ? "^T" : "") << " @ " << shape_str(b.shape)
                              << (at.trans_b ? "^T" : ""));
      Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
      RLX_CHECK(ba.empty() || bb.empty() || ba == bb,
                who << ": batch dims " << shape_str(ba) << " and " << shape_str(bb)
                    << " must match (or one operand must be 2-D)");
      Shape s = ba.empty() ? bb : ba;
      s.push_back(m);
      s.push_back(glu_cols(at.fused, n, who));
      const ProductInputs pi = product_inputs(in.size(), 2, at.fused);
      if (pi.bias >= 0) need_vector(V(size_t(pi.bias)), n, a.dtype, who, "bias");
      if (at.fused.rms_norm || at.fused.residual || at.fused.glu != Activation::None) {
        RLX_CHECK(!at.trans_a && at.trans_b && b.shape.size() == 2,
                  who << ": a fused norm, residual or glu needs x [..., k] times a 2-D W [n, k] transposed");
        RLX_CHECK(at.fused.glu == Activation::None || at.act == Activation::None,
                  who << ": a fused glu takes no activation of its own");
      }
      need_matvec_fusion(g, in, at.fused, pi, a, s, who);
      return out(s, a.dtype);
    }

    case OpKind::MatMulQ: {
      const auto& at = std::get<MatMulQAttrs>(attrs);
      need_inputs(in, 3, 4 + fused_inputs(at.fused), who);
      const QuantType type = at.type;
      const Value &x = V(0), &q = V(1), &s = V(2);
      need_float(x, who, "x");
      need_dtype(q, DType::I32, who, "quants");
      need_dtype(s, DType::F16, who, "scales");
      RLX_CHECK(!x.shape.empty() && q.shape.size() == 2 && s.shape.size() == 2,
                who << ": x must have rank >= 1 and quants, scales rank 2, got " << shape_str(x.shape) << ", "
                    << shape_str(q.shape) << ", " << shape_str(s.shape));
      const int64_t k = x.shape.back(), n = q.shape[0];
      RLX_CHECK(k > 0 && k % kQuantBlock == 0,
                who << ": " << quant_type_name(type) << " needs rows of a multiple of " << kQuantBlock
                    << " elements, x has " << k);
      const int64_t scale_cols = k / kQuantBlock * quant_scales_per_block(type);
      RLX_CHECK(q.shape[1] * quant_elems_per_word(type) == k && s.shape == Shape({n, scale_cols}),
                who << ": " << quant_type_name(type) << " weight of " << k << " columns needs quants [" << n << ", "
                    << k / quant_elems_per_word(type) << "] and scales [" << n << ", " << scale_cols
                    << "], got " << shape_str(q.shape) << " and " << shape_str(s.shape));
      const ProductInputs pi = product_inputs(in.size(), 3, at.fused);
      if (pi.bias >= 0) need_vector(V(size_t(pi.bias)), n, x.dtype, who, "bias");
      Shape y = x.shape;
      y.back() = glu_cols(at.fused, n, who);
      need_matvec_fusion(g, in, at.fused, pi, x, y, who);
      auto outs = out(y, x.dtype);
      if (!at.any_rows_in_place && numel(x.shape) / k > kMatMulQVectorRows)
        outs.push_back(Value{Shape{n, k}, x.dtype, -1, 1});
      return outs;
    }

    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div: {
      need_inputs(in, 2, 2, who);
      // i32 adds and subtracts (positions advanced on the device), wrapping.
      if (V(0).dtype != DType::I32 || op == OpKind::Mul || op == OpKind::Div) need_float(V(0), who, "lhs");
      need_dtype(V(1), V(0).dtype, who, "rhs");
      RLX_CHECK(std::max(V(0).shape.size(), V(1).shape.size()) <= 6, who << ": rank above 6");
      return out(broadcast(V(0).shape, V(1).shape, who), V(0).dtype);
    }

    case OpKind::Gelu:
    case OpKind::GeluTanh:
    case OpKind::Silu:
    case OpKind::Relu:
    case OpKind::Tanh:
    case OpKind::Softmax:
      need_inputs(in, 1, 1, who);
      need_float(V(0), who, "input");
      return out(V(0).shape, V(0).dtype);

    case OpKind::LayerNorm:
    case OpKind::RmsNorm:
    case OpKind::AddNorm: {
      bool add = op == OpKind::AddNorm;
      const auto& at = std::get<NormAttrs>(attrs);
      bool layer = op == OpKind::LayerNorm || (add && at.kind == NormKind::Layer);
      size_t base = add ? 1 : 0;
      RLX_CHECK(!(add && at.add_after), who << ": add_after is for RmsNorm and LayerNorm");
      const size_t after = at.add_after ? 1 : 0;
      need_inputs(in, 2 + base + after, (layer ? 3 : 2) + base + after, who);
      const Value& x = V(0);
      need_float(x, who, "input");
      RLX_CHECK(!x.shape.empty(), who << ": input must have rank >= 1");
      if (add)
        RLX_CHECK(V(1).shape == x.shape && V(1).dtype == x.dtype,
                  who << ": residual " << shape_str(V(1).shape) << " must match input "
                      << shape_str(x.shape));
      RLX_CHECK(at.eps >= 0, who << ": eps must be >= 0");
      int64_t c = x.shape.back();
      need_vector(V(base + 1), c, x.dtype, who, "gamma");
      if (in.size() == base + 3 + after) need_vector(V(base + 2), c, x.dtype, who, "beta");
      if (after)
        RLX_CHECK(V(in.size() - 1).shape == x.shape && V(in.size() - 1).dtype == x.dtype,
                  who << ": add_after " << shape_str(V(in.size() - 1).shape) << " must match input "
                      << shape_str(x.shape));
      if (add) return {Value{x.shape, x.dtype, -1, 0}, Value{x.shape, x.dtype, -1, 1}};
      return out(x.shape, x.dtype);
    }

    case OpKind::Attention: {
      const auto& at = std::get<AttentionAttrs>(attrs);
      bool pad = at.mask == MaskKind::Padding;
      const size_t n_in = 3 + (pad ? 1 : 0) + (at.q_pos ? 1 : 0) + (at.kv_slots ? 1 : 0);
      need_inputs(in, n_in, n_in, who);
      RLX_CHECK(at.q_heads > 0 && at.kv_heads > 0 && at.head_dim > 0 &&
                    at.q_heads % at.kv_heads == 0,
                who << ": q_heads " << at.q_heads << " must be a positive multiple of kv_heads "
                    << at.kv_heads);
      RLX_CHECK(at.window >= 0 && at.window <= INT32_MAX,
                who << ": a sliding window (" << at.window << ") needs 0 <= window < 2^31");
      // A two-sided window centres on query i as key i: one sequence, no cache.
      RLX_CHECK(at.window == 0 || at.mask == MaskKind::Causal || (!at.q_pos && !at.kv_slots),
                who << ": a two-sided sliding window (" << at.window << ", no causal mask) cannot take query positions");
      RLX_CHECK(at.softcap >= 0.f && std::isfinite(at.softcap),
                who << ": softcap " << at.softcap << " must be finite and >= 0 (0 = off)");
      const Value &q = V(0), &k = V(1), &v = V(2);
      need_float(q, who, "q");
      need_dtype(k, q.dtype, who, "k");
      need_dtype(v, q.dtype, who, "v");
      check_rows(q, at.q_offset, at.q_stride, int64_t(at.q_heads) * at.head_dim, who, "q");
      check_rows(k, at.k_offset, at.k_stride, int64_t(at.kv_heads) * at.head_dim, who, "k");
      check_rows(v, at.v_offset, at.v_stride, int64_t(at.kv_heads) * at.head_dim, who, "v");
      RLX_CHECK((at.kv_slots || k.shape[0] == q.shape[0]) && v.shape[0] == k.shape[0] && v.shape[1] == k.shape[1],
                who << ": q " << shape_str(q.shape) << ", k " << shape_str(k.shape) << ", v "
                    << shape_str(v.shape) << " disagree on batch or key length");
      RLX_CHECK(at.window == 0 || at.mask == MaskKind::Causal || q.shape[1] == k.shape[1],
                who << ": a two-sided sliding window needs as many queries as keys, got " << q.shape[1] << " and "
                    << k.shape[1]);
      if (at.kv_slots) {
        RLX_CHECK(at.q_pos && !pad, who << ": k/v slots need query positions and no padding mask");
        need_vector(V(n_in - 1), q.shape[0], DType::I32, who, "k/v slots");
      }
      if (pad) {
        RLX_CHECK(V(3).shape == (Shape{q.shape[0], k.shape[1]}),
                  who << ": padding mask must be [batch, kv_seq] = [" << q.shape[0] << ", "
                      << k.shape[1] << "], got " << shape_str(V(3).shape));
        need_dtype(V(3), DType::I32, who, "padding mask");
      }
      if (at.q_pos) need_vector(V(attention_q_pos_input(at)), q.shape[0], DType::I32, who, "query start positions");
      if (at.ring)
        RLX_CHECK(at.mask == MaskKind::Causal && at.window > 0 && at.q_pos &&
                      k.shape[1] >= kv_ring_rows(at.window, q.shape[1]),
                  who << ": a ring of " << k.shape[1] << " keys needs a causal window, query positions and at least "
                      << kv_ring_rows(at.window, q.shape[1]) << " rows (window " << at.window << ", " << q.shape[1]
                      << " queries)");
      if (at.rotate_q) {
        const int n_rot = at.q_rope.n_rot ? at.q_rope.n_rot : at.q_rope.head_dim;
        RLX_CHECK(at.q_pos && q.shape[1] == 1, who << ": rotating q needs one query row at positions read "
                                                      "at run time (a decode step)");
        RLX_CHECK(!at.q_rope.head_norm, who << ": attention does not normalize q's heads");
        RLX_CHECK(at.q_rope.heads == at.q_heads && at.q_rope.head_dim == at.head_dim && n_rot > 0 &&
                      n_rot <= at.head_dim && n_rot % 2 == 0 && at.head_dim <= 256,
                  who << ": q's rotation (" << at.q_rope.heads << " heads of " << at.q_rope.head_dim << ", n_rot "
                      << n_rot << ") does not match its " << at.q_heads << " heads of " << at.head_dim
                      << " (head_dim at most 256)");
        check_freq_divisors(at.q_rope, n_rot, who);
      }
      return out({q.shape[0], q.shape[1], int64_t(at.q_heads) * at.head_dim}, q.dtype);
    }

    case OpKind::Rope: {
      const auto& at = std::get<RopeAttrs>(attrs);
      need_inputs(in, at.head_norm ? 3 : 2, at.head_norm ? 3 : 2, who);
      int n_rot = at.n_rot ? at.n_rot : at.head_dim;
      RLX_CHECK(at.heads > 0 && at.head_dim > 0 && n_rot > 0 && n_rot <= at.head_dim &&
                    n_rot % 2 == 0,
                who << ": n_rot " << n_rot << " must be even and within head_dim " << at.head_dim);
      check_freq_divisors(at, n_rot, who);
      const Value &x = V(0), &p = V(1);
      need_float(x, who, "input");
      check_rows(x, at.offset, at.stride, int64_t(at.heads) * at.head_dim, who, "input");
      need_dtype(p, DType::I32, who, "positions");
      if (at.head_norm) {
        need_vector(V(2), at.head_dim, x.dtype, who, "head norm gain");
        RLX_CHECK(at.head_norm_eps > 0.f, who << ": the head norm's eps must be positive");
      }
      if (at.pos_is_start)
        need_vector(p, x.shape[0], DType::I32, who, "start positions");
      else
        RLX_CHECK(p.shape == (Shape{x.shape[1]}) || p.shape == (Shape{x.shape[0], x.shape[1]}),
                  who << ": positions must be [seq] or [batch, seq], got " << shape_str(p.shape));
      return out({x.shape[0], x.shape[1], int64_t(at.heads) * at.head_dim}, x.dtype);
    }

    case OpKind::KvWrite: {
      const auto& at = std::get<KvWriteAttrs>(attrs);
      const size_t n_in = (at.slots ? 4 : 3) + (at.rotate && at.rope.head_norm ? 1 : 0);
      need_inputs(in, n_in, n_in, who);
      const Value &cache = V(0), &rows = V(1), &pos = V(2);
      RLX_CHECK(cache.producer >= 0 && g.node(cache.producer).op == OpKind::State,
                who << ": the cache must be a state tensor, not the output of "
                    << g.describe(cache.producer));
      const bool sliced = at.offset != 0 || at.stride != 0;
      RLX_CHECK(cache.shape.size() >= 3 && rows.shape.size() == cache.shape.size() &&
                    (at.slots || rows.shape[0] == cache.shape[0]) && rows.shape[1] <= cache.shape[1] &&
                    (sliced || std::equal(rows.shape.begin() + 2, rows.shape.end(), cache.shape.begin() + 2)),
                who << ": rows " << shape_str(rows.shape) << " do not fit the cache " << shape_str(cache.shape)
                    << " (want [batch, n <= max_ctx, ...] with the cache's batch and row shape)");
      const int64_t row = numel(cache.shape) / (cache.shape[0] * cache.shape[1]);
      if (sliced) {
        RLX_CHECK(cache.shape.size() == 3, who << ": a sliced write needs a [batch, max_ctx, row] cache, got "
                                               << shape_str(cache.shape));
        check_rows(rows, at.offset, at.stride, row, who, "rows");
      }
      if (at.rotate) {
        const int n_rot = at.rope.n_rot ? at.rope.n_rot : at.rope.head_dim;
        RLX_CHECK(at.rope.heads > 0 && at.rope.head_dim > 0 && n_rot > 0 && n_rot <= at.rope.head_dim &&
                      n_rot % 2 == 0 && int64_t(at.rope.heads) * at.rope.head_dim <= row,
                  who << ": rotating " << at.rope.heads << " heads of " << at.rope.head_dim << " (n_rot " << n_rot
                      << ") does not fit a row of " << row);
        check_freq_divisors(at.rope, n_rot, who);
        if (at.rope.head_norm) {
          need_vector(V(n_in - 1), at.rope.head_dim, cache.dtype, who, "head norm gain");
          RLX_CHECK(at.rope.head_norm_eps > 0.f, who << ": the head norm's eps must be positive");
        }
      }
      need_float(cache, who, "cache");
      need_dtype(rows, cache.dtype, who, "rows");
      need_vector(pos, rows.shape[0], DType::I32, who, "positions");
      if (at.slots) need_vector(V(3), rows.shape[0], DType::I32, who, "cache slots");
      return out(cache.shape, cache.dtype);
    }

    case OpKind::MoeRoute: {
      need_inputs(in, 1, 1, who);
      const auto& at = std::get<MoeRouteAttrs>(attrs);
      const Value& x = V(0);
      need_float(x, who, "router logits");
      RLX_CHECK(x.shape.size() == 2 && x.shape[1] > 0 && x.shape[1] <= INT32_MAX,
                who << ": router logits must be [rows, experts], got " << shape_str(x.shape));
      RLX_CHECK(at.k >= 1 && at.k <= x.shape[1] && at.k <= kMaxMoeTopK,
                who << ": top-k " << at.k << " must be in [1, min(experts " << x.shape[1] << ", " << kMaxMoeTopK
                    << ")]");
      return {Value{{x.shape[0], at.k}, DType::I32, -1, 0}, Value{{x.shape[0], at.k}, x.dtype, -1, 1}};
    }

    case OpKind::MoeMatMulQ: {
      const auto& at = std::get<MatMulQAttrs>(attrs);
      need_inputs(in, 4, 5, who);
      RLX_CHECK(fused_inputs(at.fused) == 0 && at.fused.glu == Activation::None && !at.any_rows_in_place,
                who << ": takes the block format only, no fusion");
      const QuantType type = at.type;
      const Value &x = V(0), &q = V(1), &s = V(2), &ids = V(3);
      need_float(x, who, "x");
      need_dtype(q, DType::I32, who, "quants");
      need_dtype(s, DType::F16, who, "scales");
      need_dtype(ids, DType::I32, who, "expert ids");
      RLX_CHECK(q.shape.size() == 3 && s.shape.size() == 3 && q.shape[0] > 0 && q.shape[1] > 0 && q.shape[2] > 0,
                who << ": quants and scales must be [experts, n, ...], got " << shape_str(q.shape) << " and "
                    << shape_str(s.shape));
      const int64_t E = q.shape[0], n = q.shape[1], k = q.shape[2] * quant_elems_per_word(type);
      const int64_t scale_cols = k / kQuantBlock * quant_scales_per_block(type);
      RLX_CHECK(k % kQuantBlock == 0 && s.shape == Shape({E, n, scale_cols}),
                who << ": " << quant_type_name(type) << " experts of " << k << " columns need scales [" << E << ", "
                    << n << ", " << scale_cols << "], got " << shape_str(s.shape));
      RLX_CHECK(ids.shape.size() == 2 && ids.shape[1] > 0,
                who << ": expert ids must be [rows, top_k], got " << shape_str(ids.shape));
      const int64_t rows = ids.shape[0], top_k = ids.shape[1];
      RLX_CHECK((x.shape == Shape{rows, k}) || (x.shape == Shape{rows, top_k, k}),
                who << ": x must be [" << rows << ", " << k << "] or [" << rows << ", " << top_k << ", " << k
                    << "], got " << shape_str(x.shape));
      if (in.size() == 5) {
        RLX_CHECK(V(4).shape == ids.shape, who << ": weights must be " << shape_str(ids.shape) << ", got "
                                               << shape_str(V(4).shape));
        need_dtype(V(4), x.dtype, who, "weights");
        return out({rows, n}, x.dtype);
      }
      return out({rows, top_k, n}, x.dtype);
    }

    case OpKind::MoeMatMul: {
      need_inputs(in, 3, 4, who);
      const Value &x = V(0), &w = V(1), &ids = V(2);
      need_float(x, who, "x");
      need_dtype(w, x.dtype, who, "experts");
      need_dtype(ids, DType::I32, who, "expert ids");
      RLX_CHECK(w.shape.size() == 3 && w.shape[0] > 0 && w.shape[1] > 0 && w.shape[2] > 0,
                who << ": experts must be [experts, n, k], got " << shape_str(w.shape));
      RLX_CHECK(ids.shape.size() == 2 && ids.shape[1] > 0,
                who << ": expert ids must be [rows, top_k], got " << shape_str(ids.shape));
      const int64_t rows = ids.shape[0], top_k = ids.shape[1];
      const bool per_choice = x.shape.size() == 3;
      RLX_CHECK((x.shape == Shape{rows, w.shape[2]}) || (x.shape == Shape{rows, top_k, w.shape[2]}),
                who << ": x must be [" << rows << ", " << w.shape[2] << "] or [" << rows << ", " << top_k << ", "
                    << w.shape[2] << "], got " << shape_str(x.shape) << (per_choice ? " (per choice)" : ""));
      if (in.size() == 4) {
        RLX_CHECK(V(3).shape == ids.shape, who << ": weights must be " << shape_str(ids.shape) << ", got "
                                               << shape_str(V(3).shape));
        need_dtype(V(3), x.dtype, who, "weights");
        return out({rows, w.shape[1]}, x.dtype);
      }
      return out({rows, top_k, w.shape[1]}, x.dtype);
    }

    case OpKind::AllReduce:
      need_inputs(in, 1, 1, who);
      need_float(V(0), who, "input");
      return out(V(0).shape, V(0).dtype);

    case OpKind::AllGather: {
      need_inputs(in, 1, 1, who);
      need_float(V(0), who, "input");
      const int ranks = std::get<AllGatherAttrs>(attrs).ranks;
      RLX_CHECK(ranks >= 1 && ranks <= 64, who << ": ranks " << ranks << " outside 1..64");
      RLX_CHECK(!V(0).shape.empty(), who << ": needs at least one dim");
      Shape s = V(0).shape;
      s[0] *= ranks;
      return out(s, V(0).dtype);
    }

    case OpKind::Argmax: {
      need_inputs(in, 1, 1, who);
      need_float(V(0), who, "input");
      RLX_CHECK(!V(0).shape.empty() && V(0).shape.back() > 0 && V(0).shape.back() <= INT32_MAX,
                who << ": needs a last dim in [1, 2^31), got " << shape_str(V(0).shape));
      return out(Shape(V(0).shape.begin(), V(0).shape.end() - 1), DType::I32);
    }

    case OpKind::Sample: {
      need_inputs(in, 2, 2, who);
      const auto& at = std::get<SampleAttrs>(attrs);
      need_float(V(0), who, "input");
      RLX_CHECK(!V(0).shape.empty() && V(0).shape.back() > 0 && V(0).shape.back() <= INT32_MAX,
                who << ": needs a last dim in [1, 2^31), got " << shape_str(V(0).shape));
      const Shape rows(V(0).shape.begin(), V(0).shape.end() - 1);
      RLX_CHECK(V(1).shape == rows, who << ": positions must be " << shape_str(rows) << ", got "
                                        << shape_str(V(1).shape));
      need_dtype(V(1), DType::I32, who, "positions");
      RLX_CHECK(std::isfinite(at.temperature) && at.temperature > 0.f,
                who << ": temperature must be finite and > 0 (greedy is argmax), not " << at.temperature);
      RLX_CHECK(at.top_k >= 0, who << ": top-k must be >= 0, not " << at.top_k);
      RLX_CHECK(at.top_p > 0.f && at.top_p <= 1.f, who << ": top-p must be in (0, 1], not " << at.top_p);
      return out(rows, DType::I32);
    }

    case OpKind::SwiGlu: {
      need_inputs(in, 2, 2, who);
      const auto& at = std::get<SwiGluAttrs>(attrs);
      const Value &gate = V(0), &up = V(1);
      RLX_CHECK(at.act == Activation::Silu || at.act == Activation::Gelu || at.act == Activation::GeluTanh,
                who << ": the gate's activation must be silu, gelu or gelu_tanh");
      need_float(gate, who, "gate");
      need_dtype(up, gate.dtype, who, "up");
      RLX_CHECK(!gate.shape.empty() && Shape(gate.shape.begin(), gate.shape.end() - 1) ==
                                           Shape(up.shape.begin(), up.shape.end() - 1),
                who << ": gate " << shape_str(gate.shape) << " and up " << shape_str(up.shape)
                    << " disagree on rows");
      const int64_t cols = at.cols ? at.cols : gate.shape.back();
      RLX_CHECK(cols > 0 && at.gate_offset >= 0 && at.up_offset >= 0 &&
                    at.gate_offset + cols <= gate.shape.back() && at.up_offset + cols <= up.shape.back(),
                who << ": columns [" << at.gate_offset << ", +" << cols << ") of gate " << shape_str(gate.shape)
                    << " or [" << at.up_offset << ", +" << cols << ") of up " << shape_str(up.shape)
                    << " exceed a row");
      RLX_CHECK(at.cols || up.shape.back() == cols,
                who << ": up has " << up.shape.back() << " columns, gate " << cols);
      Shape s = gate.shape;
      s.back() = cols;
      return out(s, gate.dtype);
    }

    case OpKind::Gather: {
      need_inputs(in, 2, 2, who);
      const Value &t = V(0), &ids = V(1);
      RLX_CHECK(t.shape.size() == 2, who << ": table must be [vocab, dim], got " << shape_str(t.shape));
      need_dtype(ids, DType::I32, who, "ids");
      Shape s = ids.shape;
      s.push_back(t.shape[1]);
      return out(s, t.dtype);
    }

    case OpKind::GatherQ: {
      need_inputs(in, 3, 3, who);
      const auto& at = std::get<GatherQAttrs>(attrs);
      const Value &q = V(0), &s = V(1), &ids = V(2);
      need_dtype(q, DType::I32, who, "quants");
      need_dtype(s, DType::F16, who, "scales");
      need_dtype(ids, DType::I32, who, "ids");
      RLX_CHECK(is_float(at.dtype), who << ": rows are dequantized to f32, f16 or bf16");
      RLX_CHECK(q.shape.size() == 2 && s.shape.size() == 2 && q.shape[1] > 0,
                who << ": quants and scales must have rank 2, got " << shape_str(q.shape) << ", " << shape_str(s.shape));
      const int64_t vocab = q.shape[0], dim = q.shape[1] * quant_elems_per_word(at.type);
      RLX_CHECK(dim % kQuantBlock == 0 && s.shape == Shape({vocab, dim / kQuantBlock * quant_scales_per_block(at.type)}),
                who << ": a " << quant_type_name(at.type) << " table of quants " << shape_str(q.shape)
                    << " needs scales [" << vocab << ", " << dim / kQuantBlock * quant_scales_per_block(at.type)
                    << "], got " << shape_str(s.shape));
      Shape y = ids.shape;
      y.push_back(dim);
      return out(y, at.dtype);
    }

    case OpKind::Narrow: {
      need_inputs(in, 1, 1, who);
      const auto& at = std::get<NarrowAttrs>(attrs);
      Shape s = V(0).shape;
      int a = norm_axis(at.axis, s.size(), who);
      RLX_CHECK(at.start >= 0 && at.length > 0 && at.start + at.length <= s[size_t(a)],
                who << ": [" << at.start << ", " << at.start + at.length << ") out of range for dim "
                    << s[size_t(a)]);
      s[size_t(a)] = at.length;
      return out(s, V(0).dtype);
    }

    case OpKind::Concat: {
      RLX_CHECK(!in.empty(), who << ": needs at least one input");
      const auto& at = std::get<AxisAttrs>(attrs);
      Shape s = V(0).shape;
      int a = norm_axis(at.axis, s.size(), who);
      for (size_t i = 1; i < in.size(); ++i) {
        const Value& v = V(i);
        need_dtype(v, V(0).dtype, who, "every input");
        Shape t = v.shape;
        RLX_CHECK(t.size() == s.size(), who << ": input " << i << " has rank " << t.size());
        for (size_t d = 0; d < s.size(); ++d)
          RLX_CHECK(d == size_t(a) || t[d] == s[d], who << ": input " << i << " " << shape_str(t)
                                                        << " differs from " << shape_str(V(0).shape)
                                                        << " off the concat axis");
        s[size_t(a)] += t[size_t(a)];
      }
      return out(s, V(0).dtype);
    }

    case OpKind::Permute: {
      need_inputs(in, 1, 1, who);
      const auto& perm = std::get<PermuteAttrs>(attrs).perm;
      const Shape& x = V(0).shape;
      RLX_CHECK(perm.size() == x.size() && x.size() <= 6,
                who << ": permutation of " << perm.size() << " axes for rank " << x.size());
      std::vector<bool> seen(x.size());
      Shape s;
      for (int p : perm) {
        RLX_CHECK(p >= 0 && size_t(p) < x.size() && !seen[size_t(p)], who << ": not a permutation");
        seen[size_t(p)] = true;
        s.push_back(x[size_t(p)]);
      }
      return out(s, V(0).dtype);
    }

    case OpKind::Reshape: {
      need_inputs(in, 1, 1, who);
      Shape s = std::get<ShapeAttrs>(attrs).shape;
      int64_t known = 1;
      int infer = -1;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == -1) {
          RLX_CHECK(infer < 0, who << ": more than one -1 in " << shape_str(s));
          infer = int(i);
        } else {
          RLX_CHECK(s[i] > 0, who << ": bad target shape " << shape_str(s));
          known *= s[i];
        }
      }
      int64_t n = numel(V(0).shape);
      if (infer >= 0) {
        RLX_CHECK(known > 0 && n % known == 0, who << ": cannot reshape " << shape_str(V(0).shape)
                                                   << " to " << shape_str(s));
        s[size_t(infer)] = n / known;
      }
      RLX_CHECK(numel(s) == n, who << ": cannot reshape " << shape_str(V(0).shape) << " ("
                                   << n << " elements) to " << shape_str(s));
      return out(s, V(0).dtype);
    }

    case OpKind::Cast:
      need_inputs(in, 1, 1, who);
      return out(V(0).shape, std::get<CastAttrs>(attrs).to);

    case OpKind::Reduce: {
      need_inputs(in, 1, 1, who);
      const auto& at = std::get<ReduceAttrs>(attrs);
      need_float(V(0), who, "input");
      Shape s = V(0).shape;
      int a = norm_axis(at.axis, s.size(), who);
      if (at.keepdim) s[size_t(a)] = 1;
      else s.erase(s.begin() + a);
      return out(s, V(0).dtype);
    }

    case OpKind::SoftmaxCrossEntropy: {
      need_inputs(in, 2, 2, who);
      const Value &l = V(0), &y = V(1);
      need_float(l, who, "logits");
      RLX_CHECK(l.shape.size() == 2, who << ": logits must be [rows, classes], got "
                                         << shape_str(l.shape));
      need_dtype(y, DType::I32, who, "labels");
      RLX_CHECK(y.shape == Shape{l.shape[0]}, who << ": labels must be [" << l.shape[0] << "], got "
                                                  << shape_str(y.shape));
      return out({l.shape[0]}, l.dtype);
    }
  }
  RLX_FAIL(who << ": unknown op");
}

}  // namespace rlx
