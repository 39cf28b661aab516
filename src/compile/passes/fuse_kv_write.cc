// RoPE and slices into kv_write: the rows a kv_write stores are often
// rope(K slice) or concat(rope(K slice), V slice) of one fused QKV
// projection. The write then reads that projection in place (a column
// offset and a row stride) and rotates K itself, so neither the rope nor
// the concat runs: one kernel stores a layer's new K and V.
#include <optional>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

// Columns [start, start + len) of every row of `parent`, rotated if `rope`
// (after a head norm with gain `gamma` if rope->head_norm).
struct Segment {
  ValueId parent;
  int64_t start, len;
  std::optional<RopeAttrs> rope;
  ValueId gamma = -1;
};

Segment segment_of(const Graph& g, ValueId v, ValueId write_pos) {
  const Shape& vs = g.value(v).shape;
  if (produced_by(g, v, OpKind::Rope)) {
    const Node& r = producer(g, v);
    const auto& at = attrs_of<RopeAttrs>(r);
    if (at.pos_is_start && r.inputs[1] == write_pos)
      return {r.inputs[0], at.offset, int64_t(at.heads) * at.head_dim, at, at.head_norm ? r.inputs[2] : -1};
  }
  if (produced_by(g, v, OpKind::Narrow)) {
    const Node& n = producer(g, v);
    const auto& na = attrs_of<NarrowAttrs>(n);
    const Shape& ps = g.value(n.inputs[0]).shape;
    if (ps.size() == vs.size() && normalize_axis(na.axis, ps.size()) == int(ps.size()) - 1 &&
        std::equal(vs.begin(), vs.end() - 1, ps.begin()))
      return {n.inputs[0], na.start, na.length, std::nullopt};
  }
  return {v, 0, vs.back(), std::nullopt};
}

void fuse_one(Graph& g, int32_t id) {
  const Node& w = g.node(id);
  if (std::get<KvWriteAttrs>(w.attrs).stride != 0) return;  // already fused
  const ValueId rows = w.inputs[1], pos = w.inputs[2];
  const Shape& rs = g.value(rows).shape;
  if (rs.size() != 3) return;
  std::vector<ValueId> parts{rows};
  if (produced_by(g, rows, OpKind::Concat) &&
      normalize_axis(attrs_of<AxisAttrs>(producer(g, rows)).axis, rs.size()) == 2)
    parts = producer(g, rows).inputs;
  std::vector<Segment> segs;
  for (ValueId part : parts) segs.push_back(segment_of(g, part, pos));
  const ValueId parent = segs[0].parent;
  const Value& pv = g.value(parent);
  if (pv.shape.size() != 3 || pv.shape[0] != rs[0] || pv.shape[1] != rs[1] || pv.dtype != g.value(rows).dtype)
    return;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (segs[i].parent != parent || (i > 0 && segs[i].rope)) return;  // one source; only the first rotated
    if (i > 0 && segs[i].start != segs[i - 1].start + segs[i - 1].len) return;
  }
  if (parent == rows) return;  // nothing to fold
  KvWriteAttrs at;
  at.slots = std::get<KvWriteAttrs>(w.attrs).slots;
  at.ring = std::get<KvWriteAttrs>(w.attrs).ring;
  at.offset = segs[0].start;
  at.stride = pv.shape[2];
  if (segs[0].rope) {
    at.rotate = true;
    at.rope = *segs[0].rope;
    at.rope.offset = at.rope.stride = 0;
  }
  Node& n = g.node_mut(id);
  n.inputs[1] = parent;
  if (at.rotate && at.rope.head_norm) n.inputs.push_back(segs[0].gamma);  // the gain goes last
  n.attrs = at;
}

}  // namespace

void fuse_kv_write(Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.node(int32_t(i));
    if (!n.dead && n.op == OpKind::KvWrite) fuse_one(g, int32_t(i));
  }
}

}  // namespace rlx
