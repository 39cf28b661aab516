// On the CPU a matmul_q of any number of rows runs on the quantized blocks
// (the integer kernels; the f32 one dequantizes a block at a time), so its
// products need no dequantized copy of W: dropping that scratch output takes
// the largest product's f32 weight (the LM head's: 113 MB for SmolLM2)
// off the arena of every prefill graph.
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {

void keep_products_quantized(Graph& g) {
  const size_t count = g.nodes().size();  // nodes added here are already in place
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.node(int32_t(i));
    if (n.dead || n.op != OpKind::MatMulQ || n.outputs.size() < 2) continue;
    MatMulQAttrs at = pass_util::attrs_of<MatMulQAttrs>(n);
    at.any_rows_in_place = true;
    const std::vector<ValueId> in = n.inputs;
    const ValueId y = n.outputs[0];
    const std::string name = n.name;
    const ValueId out = g.add_node(OpKind::MatMulQ, in, at, name)[0];
    g.replace_uses(y, out);
    g.node_mut(int32_t(i)).dead = true;
  }
}

}  // namespace rlx
