// Products of few rows (decode steps) run as matrix-vector kernels that read
// all of x for every weight row, so they also take the RMSNorm before them
// and the residual add after them (rlx/graph.h MatVecFusion). In a pre-norm
// decoder layer that removes both norm kernels: the attention-output and
// FFN-down products add the residual, the QKV, gate/up and LM-head products
// normalize their input. fuse_matvec_glu (for the GPU) then moves the
// SwiGLU/GeGLU after the gate/up product into it.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

bool is_product(const Node& n) { return !n.dead && (n.op == OpKind::MatMul || n.op == OpKind::MatMulQ); }

size_t fixed_inputs(const Node& n) { return n.op == OpKind::MatMul ? 2 : 3; }

MatVecFusion fusion_of(const Node& n) {
  return n.op == OpKind::MatMul ? attrs_of<MatMulAttrs>(n).fused : attrs_of<MatMulQAttrs>(n).fused;
}

// A product the matrix-vector kernels take: few rows of x (kMatVecRows
// quantized, kMatMulFusedRows float) in whole 16-byte chunks, times a 2-D
// W [n, k] read transposed.
bool matvec_product(const Graph& g, const Node& n) {
  if (!is_product(n)) return false;
  const Value& x = g.value(n.inputs[0]);
  if (!is_float(x.dtype) || x.shape.empty()) return false;
  const int64_t k = x.shape.back();
  const int64_t rows = n.op == OpKind::MatMulQ ? kMatVecRows : kMatMulFusedRows;
  if (k <= 0 || numel(x.shape) / k > rows || (uint64_t(k) * dtype_size(x.dtype)) % 16 != 0) return false;
  if (n.op == OpKind::MatMulQ) return true;
  const MatMulAttrs& at = attrs_of<MatMulAttrs>(n);
  return !at.trans_a && at.trans_b && g.value(n.inputs[1]).shape.size() == 2;
}

// Replaces product `id` by the same product of x with fusion f (gamma and
// residual are its inputs where f asks for them); returns the new output.
ValueId refuse(Graph& g, int32_t id, ValueId x, const MatVecFusion& f, ValueId gamma, ValueId residual) {
  const Node& n = g.node(id);
  const ProductInputs old = product_inputs(n.inputs.size(), fixed_inputs(n), fusion_of(n));
  std::vector<ValueId> in(n.inputs.begin(), n.inputs.begin() + long(fixed_inputs(n)));
  in[0] = x;
  if (old.bias >= 0) in.push_back(n.inputs[size_t(old.bias)]);
  if (f.rms_norm) in.push_back(gamma);
  if (f.residual) in.push_back(residual);
  Attrs attrs = n.attrs;
  if (auto* m = std::get_if<MatMulAttrs>(&attrs)) m->fused = f;
  else std::get<MatMulQAttrs>(attrs).fused = f;
  const OpKind op = n.op;
  const std::string name = n.name;
  const ValueId out = g.add_node(op, in, attrs, name)[0];
  g.node_mut(id).dead = true;
  return out;
}

// product -> add(product, r): r becomes the product's residual.
bool fuse_residual(Graph& g, int32_t id) {
  const Node& n = g.node(id);
  if (!matvec_product(g, n) || fusion_of(n).residual) return false;
  const ValueId y = n.outputs[0];
  const int32_t user = sole_user(g, y);
  if (user < 0 || g.node(user).op != OpKind::Add) return false;
  const Node& add = g.node(user);
  const ValueId r = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  if (r == y || g.value(r).shape != g.value(y).shape || g.value(r).dtype != g.value(y).dtype) return false;
  const ValueId sum = add.outputs[0];
  MatVecFusion f = fusion_of(n);
  f.residual = true;
  const ProductInputs old = product_inputs(n.inputs.size(), fixed_inputs(n), fusion_of(n));
  const ValueId gamma = old.gamma >= 0 ? n.inputs[size_t(old.gamma)] : -1;
  const ValueId fused = refuse(g, id, n.inputs[0], f, gamma, r);
  g.replace_uses(sum, fused);
  g.node_mut(user).dead = true;
  return true;
}

// rms_norm(x) read only as x of such products: each normalizes x itself.
bool fuse_norm(Graph& g, int32_t id) {
  const Node& norm = g.node(id);
  if (norm.dead || norm.op != OpKind::RmsNorm || norm.inputs.size() != 2) return false;
  const ValueId x = norm.inputs[0], gamma = norm.inputs[1], y = norm.outputs[0];
  const Value& xv = g.value(x);
  if (g.value(gamma).shape != Shape{xv.shape.back()} || g.value(gamma).dtype != xv.dtype) return false;
  const std::vector<int32_t> users = g.users(y);
  if (users.empty() || use_count(g, y) != int(users.size())) return false;  // no other reader, no output
  for (int32_t u : users) {
    const Node& p = g.node(u);
    if (!matvec_product(g, p) || fusion_of(p).rms_norm || p.inputs[0] != y) return false;
    for (size_t i = 1; i < p.inputs.size(); ++i)
      if (p.inputs[i] == y) return false;
  }
  const float eps = attrs_of<NormAttrs>(norm).eps;
  for (int32_t u : users) {
    const Node& p = g.node(u);
    MatVecFusion f = fusion_of(p);
    f.rms_norm = true;
    f.eps = eps;
    const ProductInputs old = product_inputs(p.inputs.size(), fixed_inputs(p), fusion_of(p));
    const ValueId residual = old.residual >= 0 ? p.inputs[size_t(old.residual)] : -1;
    const ValueId out = p.outputs[0];
    g.replace_uses(out, refuse(g, u, x, f, gamma, residual));
  }
  g.node_mut(id).dead = true;
  return true;
}

// swiglu(y, y) over the two halves of a product's output y = x . [W_gate;
// W_up]^T (gate columns first, no other reader of y): the product applies
// the gate itself and writes the n / 2 columns (MatVecFusion::glu).
bool fuse_glu(Graph& g, int32_t id) {
  const Node& s = g.node(id);
  if (s.dead || s.op != OpKind::SwiGlu || s.inputs[0] != s.inputs[1]) return false;
  const SwiGluAttrs& at = attrs_of<SwiGluAttrs>(s);
  const ValueId y = s.inputs[0];
  const Value& yv = g.value(y);
  if (at.cols <= 0 || at.gate_offset != 0 || at.up_offset != at.cols || yv.shape.back() != 2 * at.cols) return false;
  if (yv.producer < 0 || use_count(g, y) != 2) return false;
  const int32_t pid = yv.producer;
  const Node& p = g.node(pid);
  if (!matvec_product(g, p)) return false;  // a grouped expert product (moe_matmul) among others
  const MatVecFusion f0 = fusion_of(p);
  if (f0.residual || f0.glu != Activation::None) return false;
  if (p.op == OpKind::MatMul && attrs_of<MatMulAttrs>(p).act != Activation::None) return false;
  MatVecFusion f = f0;
  f.glu = at.act;
  const ProductInputs old = product_inputs(p.inputs.size(), fixed_inputs(p), f0);
  const ValueId gamma = old.gamma >= 0 ? p.inputs[size_t(old.gamma)] : -1;
  const ValueId out = s.outputs[0];
  const ValueId fused = refuse(g, pid, p.inputs[0], f, gamma, -1);
  g.replace_uses(out, fused);
  g.node_mut(id).dead = true;
  return true;
}

}  // namespace

void fuse_matvec_glu(Graph& g) {
  // RLX_FUSE_GLU=0 leaves the glu a kernel of its own (for measuring).
  if (const char* e = std::getenv("RLX_FUSE_GLU"); e && std::strcmp(e, "0") == 0) return;
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_glu(g, int32_t(i));
}

void fuse_matvec(Graph& g) {
  // Residuals first: the norm after a residual add then reads the product's
  // own output, not an add, so fuse_add_norm leaves it to this pass.
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_residual(g, int32_t(i));
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_norm(g, int32_t(i));
}

}  // namespace rlx
