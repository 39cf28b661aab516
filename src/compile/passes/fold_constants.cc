// Constant folding: a node whose inputs are all constants is evaluated once,
// at compile time, on the CPU, and replaced by constants holding its outputs.
// Evaluation compiles a one-node graph whose constants enter as inputs, so
// the evaluation itself never folds again.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compile/passes.h"
#include "compile/passes/pass_util.h"
#include "rlx/session.h"

namespace rlx {
namespace {

using namespace pass_util;

bool foldable(const Graph& g, const Node& n) {
  if (n.dead || n.inputs.empty()) return false;
  if (n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::Constant) return false;
  for (ValueId in : n.inputs)
    if (!produced_by(g, in, OpKind::Constant)) return false;
  return true;
}

// Runs node `id` on its constant inputs; returns one tensor per output.
std::vector<HostTensor> evaluate(const Graph& g, int32_t id) {
  const Node& n = g.node(id);
  Graph tiny;
  std::map<std::string, HostTensor> feeds;
  std::vector<ValueId> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& v = g.value(n.inputs[i]);
    const Node& c = producer(g, n.inputs[i]);
    std::string name = "in" + std::to_string(i);
    ins.push_back(tiny.input(name, v.shape, v.dtype));
    HostTensor t;
    t.dtype = v.dtype;
    t.shape = v.shape;
    RLX_CHECK(c.data && c.data->size() == size_t(numel(v.shape)) * dtype_size(v.dtype),
              "fold_constants: " + g.describe(g.value(n.inputs[i]).producer) +
                  " has no payload of the right size");
    t.bytes = *c.data;
    feeds[name] = std::move(t);
  }
  // A reshape keeps its bytes; its target shape is on its output value.
  if (n.op == OpKind::Reshape) {
    feeds.at("in0").shape = g.value(n.outputs[0]).shape;
    return {feeds.at("in0")};
  }
  std::vector<ValueId> outs = tiny.add_node(n.op, ins, n.attrs, n.name);
  for (size_t i = 0; i < outs.size(); ++i) tiny.output("out" + std::to_string(i), outs[i]);
  CompileOptions opts;
  opts.device = Device::Cpu;
  opts.fuse = false;
  opts.threads = 1;
  std::map<std::string, HostTensor> results = compile(tiny, opts)->run(feeds);
  std::vector<HostTensor> tensors;
  for (size_t i = 0; i < outs.size(); ++i) tensors.push_back(results.at("out" + std::to_string(i)));
  return tensors;
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
      std::vector<HostTensor> results = evaluate(g, int32_t(i));
      const std::vector<ValueId> outputs = g.node(int32_t(i)).outputs;
      for (size_t o = 0; o < outputs.size(); ++o) {
        const Value& v = g.value(outputs[o]);
        ValueId c = g.constant(v.shape, v.dtype, std::move(results[o].bytes));
        g.replace_uses(outputs[o], c);
      }
      g.node_mut(int32_t(i)).dead = true;
      changed = true;
    }
  }
}

}  // namespace rlx
