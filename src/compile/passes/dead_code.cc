// Dead-code elimination: a node is live when some graph output depends on it.
// Inputs, params and state are always kept, because the user binds them by
// name (and state keeps its place in the arena); KV writes and the values
// state updates take are kept for their effect.
#include <vector>

#include "compile/passes.h"

namespace rlx {

void eliminate_dead_code(Graph& g) {
  std::vector<bool> live(g.nodes().size(), false);
  std::vector<int32_t> stack;
  auto mark = [&](ValueId v) {
    int32_t p = g.value(v).producer;
    if (p >= 0 && !live[size_t(p)]) {
      live[size_t(p)] = true;
      stack.push_back(p);
    }
  };
  for (const auto& [name, v] : g.outputs()) mark(v);
  for (const auto& [st, v] : g.state_updates()) mark(v);  // the next run reads it
  // A KV write changes state that later runs read: it is live for its effect.
  for (const Node& n : g.nodes())
    if (!n.dead && n.op == OpKind::KvWrite) mark(n.outputs[0]);
  while (!stack.empty()) {
    int32_t n = stack.back();
    stack.pop_back();
    for (ValueId in : g.node(n).inputs) mark(in);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.node_mut(int32_t(i));
    if (n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::State) continue;
    if (!live[i]) n.dead = true;
  }
}

}  // namespace rlx
