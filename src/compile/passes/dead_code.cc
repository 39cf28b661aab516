// Dead-code elimination: a node is live when some graph output depends on it.
// Inputs and params are always kept, because the user binds them by name.
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
  while (!stack.empty()) {
    int32_t n = stack.back();
    stack.pop_back();
    for (ValueId in : g.node(n).inputs) mark(in);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.node_mut(int32_t(i));
    if (n.op == OpKind::Input || n.op == OpKind::Param) continue;
    if (!live[i]) n.dead = true;
  }
}

}  // namespace rlx
