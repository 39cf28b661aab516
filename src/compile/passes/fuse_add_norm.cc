// Residual add + norm: norm(a + b) becomes one AddNorm with two outputs, the
// sum and the normalized value. The sum replaces the add everywhere, so the
// fusion also fires in pre-norm decoders, where the sum is the next residual.
// Then the other order: norm(a) + r, a sandwich norm (Gemma's post-attention
// and post-FFN norms) whose add is left where the next norm went into a
// product, becomes one norm that adds r after (NormAttrs::add_after).
#include <cstdlib>
#include <cstring>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

bool fuse_one(Graph& g, int32_t id) {
  const Node& norm = g.node(id);
  if (norm.dead || (norm.op != OpKind::LayerNorm && norm.op != OpKind::RmsNorm)) return false;
  if (attrs_of<NormAttrs>(norm).add_after) return false;
  const ValueId x = norm.inputs[0];
  if (!produced_by(g, x, OpKind::Add)) return false;
  const int32_t add_id = g.value(x).producer;
  const Node& add = g.node(add_id);
  const ValueId a = add.inputs[0], b = add.inputs[1];
  // No broadcasting: both operands are full tensors of the norm's input type.
  if (g.value(a).shape != g.value(b).shape || g.value(a).shape != g.value(x).shape) return false;
  if (g.value(a).dtype != g.value(b).dtype) return false;

  std::vector<ValueId> inputs = {a, b};
  inputs.insert(inputs.end(), norm.inputs.begin() + 1, norm.inputs.end());  // gamma[, beta]
  const NormAttrs at = attrs_of<NormAttrs>(norm);
  const ValueId norm_out = norm.outputs[0];
  const std::string name = norm.name;
  std::vector<ValueId> outs = g.add_node(OpKind::AddNorm, inputs, at, name);
  g.replace_uses(x, outs[0]);
  g.replace_uses(norm_out, outs[1]);
  g.node_mut(id).dead = true;
  g.node_mut(add_id).dead = true;
  return true;
}

// norm(a) + r -> norm(a) with r added after.
bool fuse_after(Graph& g, int32_t id) {
  const Node& norm = g.node(id);
  if (norm.dead || (norm.op != OpKind::LayerNorm && norm.op != OpKind::RmsNorm)) return false;
  NormAttrs at = attrs_of<NormAttrs>(norm);
  if (at.add_after) return false;
  const ValueId y = norm.outputs[0];
  const int32_t add_id = sole_user(g, y);
  if (add_id < 0 || g.node(add_id).op != OpKind::Add) return false;
  const Node& add = g.node(add_id);
  const ValueId r = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  // No broadcasting: r is a full tensor of the norm's type.
  if (r == y || g.value(r).shape != g.value(y).shape || g.value(r).dtype != g.value(y).dtype) return false;
  std::vector<ValueId> inputs = norm.inputs;
  inputs.push_back(r);
  at.add_after = true;
  const ValueId sum = add.outputs[0];
  const OpKind op = norm.op;
  const std::string name = norm.name;
  const ValueId out = g.add_node(op, inputs, at, name)[0];
  g.replace_uses(sum, out);
  g.node_mut(id).dead = true;
  g.node_mut(add_id).dead = true;
  return true;
}

}  // namespace

void fuse_add_norm(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_one(g, int32_t(i));
  // RLX_FUSE_NORM_ADD=0 keeps the sandwich norms' adds (for measuring what
  // the fusion saves).
  if (const char* e = std::getenv("RLX_FUSE_NORM_ADD"); e && std::strcmp(e, "0") == 0) return;
  for (size_t i = 0; i < g.nodes().size(); ++i) fuse_after(g, int32_t(i));
}

}  // namespace rlx
