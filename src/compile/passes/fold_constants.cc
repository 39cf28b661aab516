// Constant folding: a node whose inputs are all constants is evaluated once,
// at compile time, on the CPU, and replaced by constants holding its outputs.
// Evaluation lowers a one-node graph whose constants enter as inputs and runs
// it on the CPU backend (evaluate_on_cpu), not through compile().
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_evaluate.h"
#include "compile/lower.h"
#include "compile/passes.h"
#include "compile/passes/pass_util.h"

namespace rlx {
namespace {

using namespace pass_util;

bool foldable(const Graph& g, const Node& n) {
  if (n.dead || n.inputs.empty()) return false;
  if (n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::Constant) return false;
  if (n.op == OpKind::AllReduce || n.op == OpKind::AllGather) return false;  // its value is the other ranks' too
  for (ValueId in : n.inputs)
    if (!produced_by(g, in, OpKind::Constant)) return false;
  return true;
}

// Runs node `id` on its constant inputs; returns the bytes of each output.
std::vector<std::vector<uint8_t>> evaluate(const Graph& g, int32_t id) {
  const Node& n = g.node(id);
  std::vector<const void*> feeds;
  for (ValueId in : n.inputs) {
    const Value& v = g.value(in);
    const Node& c = producer(g, in);
    RLX_CHECK(c.data && c.data->size() == size_t(numel(v.shape)) * dtype_size(v.dtype),
              "fold_constants: " + g.describe(v.producer) + " has no payload of the right size");
    feeds.push_back(c.data->data());
  }
  // A reshape keeps its bytes; its target shape is on its output value.
  if (n.op == OpKind::Reshape) return {*producer(g, n.inputs[0]).data};
  Graph tiny;
  std::vector<ValueId> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& v = g.value(n.inputs[i]);
    ins.push_back(tiny.input("in" + std::to_string(i), v.shape, v.dtype));
  }
  std::vector<ValueId> outs = tiny.add_node(n.op, ins, n.attrs, n.name);
  for (size_t i = 0; i < outs.size(); ++i) tiny.output("out" + std::to_string(i), outs[i]);
  std::unique_ptr<Schedule> s = lower(tiny);
  std::vector<const void*> ordered;  // input bindings are named "in<i>"
  for (const Binding& b : s->input_bindings) ordered.push_back(feeds.at(size_t(std::stoi(b.name.substr(2)))));
  return evaluate_on_cpu(*s, ordered);  // outputs in declaration order
}

}  // namespace

void fold_constants(Graph& g) {
  // Folding one node can make its users foldable; appended nodes may be read
  // by earlier ones, so sweep until nothing changes.
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (!foldable(g, g.node(int32_t(i)))) continue;
      std::vector<std::vector<uint8_t>> results = evaluate(g, int32_t(i));
      const std::vector<ValueId> outputs = g.node(int32_t(i)).outputs;
      for (size_t o = 0; o < outputs.size(); ++o) {
        const Value& v = g.value(outputs[o]);
        ValueId c = g.constant(v.shape, v.dtype, std::move(results[o]));
        g.replace_uses(outputs[o], c);
      }
      g.node_mut(int32_t(i)).dead = true;
      changed = true;
    }
  }
}

}  // namespace rlx
