// A per-head RMSNorm into the rope after it: Qwen3's (and Gemma 3's) q/k
// norm is reshape(rms_norm(reshape(x, [.., heads, head_dim]), gamma)) back
// to [.., heads * head_dim], then rope. The rope then reads x and normalizes
// each head itself (RopeAttrs::head_norm), so the norm kernel does not run,
// and K's rope stays a rope of a slice of the QKV product that fuse_kv_write
// folds into the cache write together with V.
#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

void fuse_one(Graph& g, int32_t id) {
  const Node& rope = g.node(id);
  RopeAttrs at = attrs_of<RopeAttrs>(rope);
  if (at.head_norm || at.offset != 0 || at.stride != 0) return;
  // rope(joined), joined = reshape(normed), normed = rms_norm(split, gamma), split = reshape(x).
  const ValueId joined = rope.inputs[0];
  if (!produced_by(g, joined, OpKind::Reshape) || sole_user(g, joined) != id) return;
  const int32_t join = g.value(joined).producer;
  const ValueId normed = g.node(join).inputs[0];
  if (!produced_by(g, normed, OpKind::RmsNorm) || sole_user(g, normed) != join) return;
  const Node& norm = producer(g, normed);
  if (attrs_of<NormAttrs>(norm).add_after) return;
  const ValueId split = norm.inputs[0], gamma = norm.inputs[1];
  if (!produced_by(g, split, OpKind::Reshape)) return;
  const ValueId x = producer(g, split).inputs[0];
  const Shape &xs = g.value(x).shape, &ss = g.value(split).shape, &js = g.value(joined).shape;
  // Only a split of the last axis into the rope's heads, and back.
  const int64_t width = int64_t(at.heads) * at.head_dim;
  if (xs.size() != 3 || js != xs || xs[2] != width || ss.size() != 4 || ss[0] != xs[0] || ss[1] != xs[1] ||
      ss[2] != at.heads || ss[3] != at.head_dim || g.value(gamma).shape != Shape{at.head_dim} ||
      g.value(gamma).dtype != g.value(x).dtype)
    return;
  at.head_norm = true;
  at.head_norm_eps = attrs_of<NormAttrs>(norm).eps;
  const ValueId pos = rope.inputs[1];
  Node& m = g.node_mut(id);
  m.inputs = {x, pos, gamma};
  m.attrs = at;
}

}  // namespace

void fuse_head_norm_rope(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(int32_t(i));
    if (!n.dead && n.op == OpKind::Rope) fuse_one(g, int32_t(i));
  }
}

}  // namespace rlx
