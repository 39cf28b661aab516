// Small queries the graph passes share. Internal to src/compile/passes/.
#pragma once
#include <variant>

#include "rlx/graph.h"

namespace rlx::pass_util {

// The node that produces v.
inline const Node& producer(const Graph& g, ValueId v) { return g.node(g.value(v).producer); }

inline bool produced_by(const Graph& g, ValueId v, OpKind op) {
  const Node& n = producer(g, v);
  return !n.dead && n.op == op;
}

// How many times v is read: by live nodes (an input listed twice counts
// twice), by graph outputs and by state updates. A value with one use can be fused away.
inline int use_count(const Graph& g, ValueId v) {
  int uses = 0;
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    for (ValueId in : n.inputs) uses += in == v;
  }
  for (const auto& [name, out] : g.outputs()) uses += out == v;
  for (const auto& [st, val] : g.state_updates()) uses += val == v;
  return uses;
}

// The single live node reading v, or -1 if v has another use (or none).
inline int32_t sole_user(const Graph& g, ValueId v) {
  if (use_count(g, v) != 1) return -1;
  std::vector<int32_t> users = g.users(v);
  return users.size() == 1 ? users[0] : -1;
}

// Axis normalised to [0, rank).
inline int normalize_axis(int axis, size_t rank) { return axis < 0 ? axis + int(rank) : axis; }

template <class A>
const A& attrs_of(const Node& n) {
  return std::get<A>(n.attrs);
}

}  // namespace rlx::pass_util
