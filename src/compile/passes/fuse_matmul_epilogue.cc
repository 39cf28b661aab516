// MatMul epilogues: a bias add and then an activation that only read the
// matmul's result fold into the matmul (its optional 3rd input and `act`),
// so the product is written once instead of three times.
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

bool is_plain_matmul(const Node& n) {
  return !n.dead && n.op == OpKind::MatMul && attrs_of<MatMulAttrs>(n).act == Activation::None;
}

// A bias of n elements: [n] or [1, ..., 1, n].
bool is_row_bias(const Value& b, int64_t n) {
  if (b.shape.empty() || b.shape.back() != n) return false;
  for (size_t i = 0; i + 1 < b.shape.size(); ++i)
    if (b.shape[i] != 1) return false;
  return true;
}

bool fuse_bias(Graph& g, int32_t id) {
  const Node& mm = g.node(id);
  if (!is_plain_matmul(mm) || mm.inputs.size() != 2) return false;
  const ValueId out = mm.outputs[0];
  const int32_t user = sole_user(g, out);
  if (user < 0 || g.node(user).op != OpKind::Add) return false;
  const Node& add = g.node(user);
  const ValueId bias = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  const Value& ov = g.value(out);
  const Value& bv = g.value(bias);
  if (bias == out || bv.dtype != ov.dtype || ov.shape.empty()) return false;
  // The bias must not widen the result (the fused matmul's output is ov's shape).
  if (!is_row_bias(bv, ov.shape.back()) || bv.shape.size() > ov.shape.size()) return false;
  if (g.value(add.outputs[0]).shape != ov.shape) return false;

  const ValueId a = mm.inputs[0], b = mm.inputs[1], add_out = add.outputs[0];
  const MatMulAttrs at = attrs_of<MatMulAttrs>(mm);
  const std::string name = mm.name;
  ValueId bias_1d = bv.shape.size() == 1 ? bias : g.reshape(bias, Shape{ov.shape.back()});
  ValueId fused = g.add_node(OpKind::MatMul, {a, b, bias_1d}, at, name)[0];
  g.replace_uses(add_out, fused);
  g.node_mut(id).dead = true;
  g.node_mut(user).dead = true;
  return true;
}

bool activation_of(OpKind op, Activation& act) {
  switch (op) {
    case OpKind::Gelu: act = Activation::Gelu; return true;
    case OpKind::GeluTanh: act = Activation::GeluTanh; return true;
    case OpKind::Silu: act = Activation::Silu; return true;
    case OpKind::Relu: act = Activation::Relu; return true;
    case OpKind::Tanh: act = Activation::Tanh; return true;
    default: return false;
  }
}

bool fuse_activation(Graph& g, int32_t id) {
  const Node& mm = g.node(id);
  if (!is_plain_matmul(mm)) return false;
  const int32_t user = sole_user(g, mm.outputs[0]);
  Activation act;
  if (user < 0 || !activation_of(g.node(user).op, act)) return false;
  MatMulAttrs at = attrs_of<MatMulAttrs>(mm);
  at.act = act;
  const std::vector<ValueId> inputs = mm.inputs;
  const std::string name = mm.name;
  const ValueId act_out = g.node(user).outputs[0];
  ValueId fused = g.add_node(OpKind::MatMul, inputs, at, name)[0];
  g.replace_uses(act_out, fused);
  g.node_mut(id).dead = true;
  g.node_mut(user).dead = true;
  return true;
}

}  // namespace

void fuse_matmul_epilogue(Graph& g) {
  // Biases first, over every matmul (including ones appended here), then
  // activations, so matmul -> add -> gelu becomes one node.
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_bias(g, int32_t(i));
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_activation(g, int32_t(i));
}

}  // namespace rlx
