// Sibling matmuls that read the same activation (x@Wq, x@Wk, x@Wv, or a
// gate/up pair) become one matmul against the concatenation of their weights,
// followed by a narrow per original output. The concatenation is of params
// only, so lowering lays the params out side by side once, at load: set_param
// by the original names keeps working and nothing is copied per forward.
// When every sibling is followed by a bias add, the biases are concatenated
// too and one add is emitted before the narrows.
#include <map>
#include <tuple>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

struct Sibling {
  int32_t matmul = -1;
  ValueId weight = -1;
  int64_t n = 0;            // output columns
  int32_t bias_add = -1;    // the add that follows, if any
  ValueId bias = -1;        // 1-D param [n] of that add
};

// A param read only by this matmul (so concatenating it changes nothing else).
bool is_private_param(const Graph& g, ValueId v) {
  return produced_by(g, v, OpKind::Param) && use_count(g, v) == 1;
}

// If the matmul's output feeds exactly one add with a private 1-D param bias
// of n elements and the same dtype, fill s.bias_add / s.bias.
void find_bias(const Graph& g, ValueId out, Sibling& s) {
  int32_t user = sole_user(g, out);
  if (user < 0 || g.node(user).op != OpKind::Add) return;
  const Node& add = g.node(user);
  ValueId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  if (other == out || !is_private_param(g, other)) return;
  const Value& b = g.value(other);
  if (b.shape != Shape{s.n} || b.dtype != g.value(out).dtype) return;
  if (g.value(add.outputs[0]).shape != g.value(out).shape) return;
  s.bias_add = user;
  s.bias = other;
}

void merge_group(Graph& g, ValueId a, bool trans_b, const std::vector<int32_t>& group) {
  std::vector<Sibling> sibs;
  for (int32_t m : group) {
    Sibling s;
    s.matmul = m;
    s.weight = g.node(m).inputs[1];
    const Shape& w = g.value(s.weight).shape;
    s.n = trans_b ? w[0] : w[1];
    find_bias(g, g.node(m).outputs[0], s);
    sibs.push_back(s);
  }
  bool all_biased = true;
  for (const Sibling& s : sibs) all_biased = all_biased && s.bias_add >= 0;

  std::vector<ValueId> weights;
  for (const Sibling& s : sibs) weights.push_back(s.weight);
  std::string name = g.node(sibs[0].matmul).name;
  ValueId w = g.concat(weights, trans_b ? 0 : 1);
  ValueId merged = g.add_node(OpKind::MatMul, {a, w}, MatMulAttrs{false, trans_b, Activation::None},
                              name.empty() ? "" : name + ".merged")[0];
  if (all_biased) {
    std::vector<ValueId> biases;
    for (const Sibling& s : sibs) biases.push_back(s.bias);
    merged = g.add(merged, g.concat(biases, 0));
  }
  const int last = int(g.value(merged).shape.size()) - 1;
  int64_t offset = 0;
  for (const Sibling& s : sibs) {
    ValueId part = g.narrow(merged, last, offset, s.n);
    offset += s.n;
    if (all_biased) {
      g.replace_uses(g.node(s.bias_add).outputs[0], part);
      g.node_mut(s.bias_add).dead = true;
    } else {
      g.replace_uses(g.node(s.matmul).outputs[0], part);
    }
    g.node_mut(s.matmul).dead = true;
  }
}

}  // namespace

void merge_sibling_matmuls(Graph& g) {
  // Candidates keyed by (activation, trans_b, weight dtype, K); node order
  // within a group keeps the concatenation order deterministic.
  std::map<std::tuple<ValueId, bool, DType, int64_t>, std::vector<int32_t>> groups;
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.node(int32_t(i));
    if (n.dead || n.op != OpKind::MatMul || n.inputs.size() != 2) continue;
    const auto& at = attrs_of<MatMulAttrs>(n);
    if (at.trans_a || at.act != Activation::None) continue;
    ValueId w = n.inputs[1];
    if (w == n.inputs[0] || !is_private_param(g, w)) continue;
    const Value& wv = g.value(w);
    if (wv.shape.size() != 2) continue;
    const int64_t k = at.trans_b ? wv.shape[1] : wv.shape[0];
    groups[{n.inputs[0], at.trans_b, wv.dtype, k}].push_back(int32_t(i));
  }
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    merge_group(g, std::get<0>(key), std::get<1>(key), group);
  }
}

}  // namespace rlx
