// RoPE on q into a decode step's attention: attention(rope(q), k, v) with one
// query row at positions read at run time (a cached decode step), the rope
// at those same positions, becomes an attention that reads the unrotated q
// (in place, through the rope's offset and stride) and rotates each head as
// it loads it, so the rope kernel does not run.
#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

void fuse_one(Graph& g, int32_t id) {
  const Node& n = g.node(id);
  AttentionAttrs at = attrs_of<AttentionAttrs>(n);
  const ValueId q = n.inputs[0];
  if (at.rotate_q || !at.q_pos || at.q_offset != 0 || at.q_stride != 0 || g.value(q).shape[1] != 1) return;
  if (!produced_by(g, q, OpKind::Rope)) return;
  const Node& rope = producer(g, q);
  const auto& ra = attrs_of<RopeAttrs>(rope);
  if (!ra.pos_is_start || rope.inputs[1] != n.inputs[attention_q_pos_input(at)] || ra.heads != at.q_heads ||
      ra.head_dim != at.head_dim || at.head_dim > 256 || ra.head_norm)  // attention does not normalize q
    return;
  at.rotate_q = true;
  at.q_rope = ra;
  at.q_rope.offset = at.q_rope.stride = 0;
  at.q_offset = ra.offset;
  at.q_stride = ra.stride;
  Node& m = g.node_mut(id);
  m.inputs[0] = rope.inputs[0];
  m.attrs = at;
}

}  // namespace

void fuse_rope_attention(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(int32_t(i));
    if (!n.dead && n.op == OpKind::Attention) fuse_one(g, int32_t(i));
  }
}

}  // namespace rlx
