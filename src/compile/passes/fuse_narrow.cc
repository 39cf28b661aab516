// Narrow into rope/attention/swiglu: a rope, attention or swiglu input that
// is a narrow of the last axis (the q, k or v slice of a fused projection,
// the gate or up half of a merged gate/up product) is read in place from the
// parent through a column offset and a row stride, so the slice is never
// copied.
#include <algorithm>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

// If input `slot` of node `id` is narrow(parent, last axis, start, len) with
// parent's leading dims, point the slot at parent and update offset/stride.
// Rows of a dense input are its own last dim apart; a stride set by an
// earlier fusion must equal that for the composition to stay exact.
bool fold_narrow(Graph& g, int32_t id, size_t slot, int64_t& offset, int64_t& stride) {
  const ValueId x = g.node(id).inputs[slot];
  if (!produced_by(g, x, OpKind::Narrow)) return false;
  const Node& narrow = producer(g, x);
  const auto& na = attrs_of<NarrowAttrs>(narrow);
  const ValueId parent = narrow.inputs[0];
  const Shape& xs = g.value(x).shape;
  const Shape& ps = g.value(parent).shape;
  if (xs.empty() || ps.size() != xs.size()) return false;
  if (normalize_axis(na.axis, ps.size()) != int(ps.size()) - 1) return false;
  if (!std::equal(xs.begin(), xs.end() - 1, ps.begin())) return false;
  if (g.value(parent).dtype != g.value(x).dtype) return false;
  if (stride != 0 && stride != xs.back()) return false;
  offset += na.start;
  stride = ps.back();
  g.node_mut(id).inputs[slot] = parent;
  return true;
}

void fuse_rope(Graph& g, int32_t id) {
  RopeAttrs at = attrs_of<RopeAttrs>(g.node(id));
  bool changed = false;
  // A chain of narrows collapses one link per step.
  while (fold_narrow(g, id, 0, at.offset, at.stride)) changed = true;
  if (changed) g.node_mut(id).attrs = at;
}

void fuse_attention(Graph& g, int32_t id) {
  AttentionAttrs at = attrs_of<AttentionAttrs>(g.node(id));
  bool changed = false;
  while (fold_narrow(g, id, 0, at.q_offset, at.q_stride)) changed = true;
  while (fold_narrow(g, id, 1, at.k_offset, at.k_stride)) changed = true;
  while (fold_narrow(g, id, 2, at.v_offset, at.v_stride)) changed = true;
  if (changed) g.node_mut(id).attrs = at;
}

// SwiGLU's row strides are its inputs' widths, so only the offsets and the
// column count (the slice's width, fixed before the first fold) change.
void fuse_swiglu(Graph& g, int32_t id) {
  SwiGluAttrs at = attrs_of<SwiGluAttrs>(g.node(id));
  const int64_t cols = at.cols ? at.cols : g.value(g.node(id).inputs[0]).shape.back();
  int64_t gate_stride = 0, up_stride = 0;
  bool changed = false;
  while (fold_narrow(g, id, 0, at.gate_offset, gate_stride)) changed = true;
  while (fold_narrow(g, id, 1, at.up_offset, up_stride)) changed = true;
  if (!changed) return;
  at.cols = cols;
  g.node_mut(id).attrs = at;
}

}  // namespace

void fuse_narrow(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(int32_t(i));
    if (n.dead) continue;
    if (n.op == OpKind::Rope) {
      fuse_rope(g, int32_t(i));
    } else if (n.op == OpKind::Attention) {
      fuse_attention(g, int32_t(i));
    } else if (n.op == OpKind::SwiGlu) {
      fuse_swiglu(g, int32_t(i));
    }
  }
}

}  // namespace rlx
