// Graph builder: every op goes through add_node, which runs shape inference.
#include "rlx/graph.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace rlx {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

ProductInputs product_inputs(size_t inputs, size_t fixed, const MatVecFusion& f) {
  ProductInputs r;
  const size_t fused = size_t(f.rms_norm) + size_t(f.residual);
  size_t next = fixed;
  if (inputs > fixed + fused) r.bias = int(next++);
  if (f.rms_norm) r.gamma = int(next++);
  if (f.residual) r.residual = int(next++);
  return r;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const char* op_name(OpKind k) {
  static const char* names[] = {
#define X(e, n, a) n,
#include "rlx/ops.def"
#undef X
  };
  return names[size_t(k)];
}

const Value& Graph::value(ValueId v) const {
  RLX_CHECK(v >= 0 && size_t(v) < values_.size(), "no value with id " << std::to_string(v));
  return values_[size_t(v)];
}

std::string Graph::describe(int32_t n) const {
  const Node& nd = nodes_.at(size_t(n));
  std::string s = "node " + std::to_string(n) + " (" + op_name(nd.op);
  if (!nd.name.empty()) s += " '" + nd.name + "'";
  return s + ")";
}

size_t Graph::live_node_count() const {
  return size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
}

void Graph::replace_uses(ValueId from, ValueId to) {
  for (Node& n : nodes_) {
    if (n.dead) continue;
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
  }
  for (auto& [name, v] : outputs_)
    if (v == from) v = to;
  for (auto& [st, v] : state_updates_)
    if (v == from) v = to;
}

std::vector<int32_t> Graph::users(ValueId v) const {
  std::vector<int32_t> r;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].dead) continue;
    if (std::find(nodes_[i].inputs.begin(), nodes_[i].inputs.end(), v) != nodes_[i].inputs.end())
      r.push_back(int32_t(i));
  }
  return r;
}

std::vector<ValueId> Graph::add_node(OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                                     const std::string& name) {
  std::string label = std::string(op_name(op)) + (name.empty() ? "" : " '" + name + "'");
  label = "node " + std::to_string(nodes_.size()) + " (" + label + ")";
  for (ValueId v : inputs)
    RLX_CHECK(v >= 0 && size_t(v) < values_.size(), label << ": input value " << std::to_string(v)
                                                           << " does not exist");
  std::vector<Value> outs = infer_outputs(*this, op, inputs, attrs, label);
  Node n{op, std::move(inputs), {}, std::move(attrs), name, nullptr, false};
  int32_t id = int32_t(nodes_.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].producer = id;
    outs[i].index = int32_t(i);
    n.outputs.push_back(ValueId(values_.size()));
    values_.push_back(outs[i]);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

namespace {

void check_name(const std::vector<Node>& nodes, OpKind op, const std::string& name) {
  RLX_CHECK(!name.empty(), op_name(op) << " needs a name");
  for (const Node& n : nodes)
    RLX_CHECK(n.op != op || n.name != name,
              op_name(op) << " name '" << name << "' is used twice");
}

ValueId leaf(std::vector<Node>& nodes, std::vector<Value>& values, OpKind op, const std::string& name,
             Shape shape, DType dt) {
  for (int64_t d : shape)
    RLX_CHECK(d > 0, op_name(op) << " '" << name << "': shape " << shape_str(shape)
                                 << " has a non-positive dim");
  ValueId v = ValueId(values.size());
  values.push_back(Value{std::move(shape), dt, int32_t(nodes.size()), 0});
  nodes.push_back(Node{op, {}, {v}, NoAttrs{}, name, nullptr, false});
  return v;
}

}  // namespace

ValueId Graph::input(const std::string& name, Shape shape, DType dt) {
  check_name(nodes_, OpKind::Input, name);
  return leaf(nodes_, values_, OpKind::Input, name, std::move(shape), dt);
}

ValueId Graph::param(const std::string& name, Shape shape, DType dt) {
  check_name(nodes_, OpKind::Param, name);
  return leaf(nodes_, values_, OpKind::Param, name, std::move(shape), dt);
}

ValueId Graph::state(const std::string& name, Shape shape, DType dt) {
  check_name(nodes_, OpKind::State, name);
  return leaf(nodes_, values_, OpKind::State, name, std::move(shape), dt);
}

ValueId Graph::constant(Shape shape, DType dt, std::vector<uint8_t> bytes, const std::string& name) {
  RLX_CHECK(bytes.size() == size_t(numel(shape)) * dtype_size(dt),
            "constant '" << name << "': " << std::to_string(bytes.size()) << " bytes for shape "
                         << shape_str(shape) << " of " << std::string(dtype_name(dt)));
  ValueId v = leaf(nodes_, values_, OpKind::Constant, name, std::move(shape), dt);
  nodes_.back().data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return v;
}

ValueId Graph::constant_f32(Shape shape, DType dt, const std::vector<float>& values,
                            const std::string& name) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dt));
  for (size_t i = 0; i < values.size(); ++i) store_from_float(bytes.data(), dt, i, values[i]);
  return constant(std::move(shape), dt, std::move(bytes), name);
}

ValueId Graph::matmul(ValueId a, ValueId b, bool ta, bool tb) {
  return add_node(OpKind::MatMul, {a, b}, MatMulAttrs{ta, tb, Activation::None})[0];
}
ValueId Graph::linear(ValueId a, ValueId b, ValueId bias, Activation act, bool tb) {
  std::vector<ValueId> in{a, b};
  if (bias >= 0) in.push_back(bias);
  return add_node(OpKind::MatMul, in, MatMulAttrs{false, tb, act})[0];
}
ValueId Graph::matmul_q(ValueId x, ValueId quants, ValueId scales, QuantType type, ValueId bias) {
  std::vector<ValueId> in{x, quants, scales};
  if (bias >= 0) in.push_back(bias);
  return add_node(OpKind::MatMulQ, in, MatMulQAttrs{type})[0];
}
ValueId Graph::add(ValueId a, ValueId b) { return add_node(OpKind::Add, {a, b}, NoAttrs{})[0]; }
ValueId Graph::sub(ValueId a, ValueId b) { return add_node(OpKind::Sub, {a, b}, NoAttrs{})[0]; }
ValueId Graph::mul(ValueId a, ValueId b) { return add_node(OpKind::Mul, {a, b}, NoAttrs{})[0]; }
ValueId Graph::div(ValueId a, ValueId b) { return add_node(OpKind::Div, {a, b}, NoAttrs{})[0]; }
ValueId Graph::gelu(ValueId x) { return add_node(OpKind::Gelu, {x}, NoAttrs{})[0]; }
ValueId Graph::gelu_tanh(ValueId x) { return add_node(OpKind::GeluTanh, {x}, NoAttrs{})[0]; }
ValueId Graph::silu(ValueId x) { return add_node(OpKind::Silu, {x}, NoAttrs{})[0]; }
ValueId Graph::relu(ValueId x) { return add_node(OpKind::Relu, {x}, NoAttrs{})[0]; }
ValueId Graph::tanh(ValueId x) { return add_node(OpKind::Tanh, {x}, NoAttrs{})[0]; }

ValueId Graph::activation(ValueId x, Activation act) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Gelu: return gelu(x);
    case Activation::GeluTanh: return gelu_tanh(x);
    case Activation::Silu: return silu(x);
    case Activation::Relu: return relu(x);
    case Activation::Tanh: return tanh(x);
  }
  return x;
}

ValueId Graph::layer_norm(ValueId x, ValueId gamma, ValueId beta, float eps) {
  std::vector<ValueId> in{x, gamma};
  if (beta >= 0) in.push_back(beta);
  return add_node(OpKind::LayerNorm, in, NormAttrs{NormKind::Layer, eps})[0];
}
ValueId Graph::rms_norm(ValueId x, ValueId gamma, float eps) {
  return add_node(OpKind::RmsNorm, {x, gamma}, NormAttrs{NormKind::Rms, eps})[0];
}
std::pair<ValueId, ValueId> Graph::add_norm(ValueId x, ValueId residual, ValueId gamma, ValueId beta,
                                            NormKind kind, float eps) {
  std::vector<ValueId> in{x, residual, gamma};
  if (beta >= 0) in.push_back(beta);
  auto o = add_node(OpKind::AddNorm, in, NormAttrs{kind, eps});
  return {o[0], o[1]};
}
ValueId Graph::softmax(ValueId x) { return add_node(OpKind::Softmax, {x}, NoAttrs{})[0]; }
ValueId Graph::attention(ValueId q, ValueId k, ValueId v, ValueId mask, const AttentionAttrs& a, ValueId q_pos,
                         ValueId kv_slots) {
  std::vector<ValueId> in{q, k, v};
  if (mask >= 0) in.push_back(mask);
  if (q_pos >= 0) in.push_back(q_pos);
  if (kv_slots >= 0) in.push_back(kv_slots);
  return add_node(OpKind::Attention, in, a)[0];
}
ValueId Graph::kv_write(ValueId cache, ValueId rows, ValueId pos, ValueId slots, bool ring) {
  KvWriteAttrs at;
  at.slots = slots >= 0;
  at.ring = ring;
  if (slots >= 0) return add_node(OpKind::KvWrite, {cache, rows, pos, slots}, at)[0];
  return add_node(OpKind::KvWrite, {cache, rows, pos}, at)[0];
}
std::pair<ValueId, ValueId> Graph::moe_route(ValueId logits, const MoeRouteAttrs& a) {
  auto o = add_node(OpKind::MoeRoute, {logits}, a);
  return {o[0], o[1]};
}
ValueId Graph::moe_matmul(ValueId x, ValueId w, ValueId ids, ValueId weights) {
  std::vector<ValueId> in{x, w, ids};
  if (weights >= 0) in.push_back(weights);
  return add_node(OpKind::MoeMatMul, in, NoAttrs{})[0];
}
ValueId Graph::moe_matmul_q(ValueId x, ValueId quants, ValueId scales, QuantType type, ValueId ids,
                            ValueId weights) {
  std::vector<ValueId> in{x, quants, scales, ids};
  if (weights >= 0) in.push_back(weights);
  MatMulQAttrs a;
  a.type = type;
  return add_node(OpKind::MoeMatMulQ, in, a)[0];
}
ValueId Graph::all_reduce(ValueId x) { return add_node(OpKind::AllReduce, {x}, NoAttrs{})[0]; }
ValueId Graph::all_gather(ValueId x, int ranks) { return add_node(OpKind::AllGather, {x}, AllGatherAttrs{ranks})[0]; }
ValueId Graph::argmax(ValueId x) { return add_node(OpKind::Argmax, {x}, NoAttrs{})[0]; }
ValueId Graph::sample(ValueId x, ValueId positions, const SampleAttrs& a) {
  return add_node(OpKind::Sample, {x, positions}, a)[0];
}
ValueId Graph::rope(ValueId x, ValueId positions, const RopeAttrs& a) {
  return add_node(OpKind::Rope, {x, positions}, a)[0];
}
ValueId Graph::gather(ValueId table, ValueId ids) {
  return add_node(OpKind::Gather, {table, ids}, NoAttrs{})[0];
}
ValueId Graph::gather_q(ValueId quants, ValueId scales, ValueId ids, QuantType type, DType dt) {
  return add_node(OpKind::GatherQ, {quants, scales, ids}, GatherQAttrs{type, dt})[0];
}
ValueId Graph::narrow(ValueId x, int axis, int64_t start, int64_t length) {
  return add_node(OpKind::Narrow, {x}, NarrowAttrs{axis, start, length})[0];
}
ValueId Graph::concat(const std::vector<ValueId>& xs, int axis) {
  return add_node(OpKind::Concat, xs, AxisAttrs{axis})[0];
}
ValueId Graph::permute(ValueId x, std::vector<int> perm) {
  return add_node(OpKind::Permute, {x}, PermuteAttrs{std::move(perm)})[0];
}
ValueId Graph::transpose(ValueId x, int a0, int a1) {
  int r = int(value(x).shape.size());
  if (a0 < 0) a0 += r;
  if (a1 < 0) a1 += r;
  RLX_CHECK(a0 >= 0 && a0 < r && a1 >= 0 && a1 < r,
            "transpose: axes out of range for rank " << std::to_string(r));
  std::vector<int> perm(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) perm[size_t(i)] = i;
  std::swap(perm[size_t(a0)], perm[size_t(a1)]);
  return permute(x, perm);
}
ValueId Graph::reshape(ValueId x, Shape shape) {
  return add_node(OpKind::Reshape, {x}, ShapeAttrs{std::move(shape)})[0];
}
ValueId Graph::cast(ValueId x, DType dt) { return add_node(OpKind::Cast, {x}, CastAttrs{dt})[0]; }
ValueId Graph::reduce(ValueId x, int axis, ReduceKind kind, bool keepdim) {
  return add_node(OpKind::Reduce, {x}, ReduceAttrs{axis, kind, keepdim})[0];
}
ValueId Graph::softmax_cross_entropy(ValueId logits, ValueId labels) {
  return add_node(OpKind::SoftmaxCrossEntropy, {logits, labels}, NoAttrs{})[0];
}

ValueId Graph::swiglu(ValueId gate, ValueId up, Activation act) {
  return add_node(OpKind::SwiGlu, {gate, up}, SwiGluAttrs{0, 0, 0, act})[0];
}
ValueId Graph::swiglu_fused(ValueId gate_up) {
  const int64_t cols = value(gate_up).shape.empty() ? 0 : value(gate_up).shape.back() / 2;
  return add_node(OpKind::SwiGlu, {gate_up, gate_up}, SwiGluAttrs{cols, 0, cols})[0];
}

void Graph::output(const std::string& name, ValueId v) {
  value(v);
  RLX_CHECK(!name.empty(), "an output needs a name");
  for (auto& o : outputs_) RLX_CHECK(o.first != name, "output name '" << name << "' is used twice");
  outputs_.emplace_back(name, v);
}

void Graph::update_state(ValueId state, ValueId v) {
  const Value& s = value(state);
  const Value& x = value(v);
  RLX_CHECK(s.producer >= 0 && node(s.producer).op == OpKind::State,
            "update_state: the target must be a state tensor, not the output of " << describe(s.producer));
  const std::string& name = node(s.producer).name;
  RLX_CHECK(s.shape == x.shape && s.dtype == x.dtype,
            "update_state: state '" << name << "' is " << shape_str(s.shape) << " " << std::string(dtype_name(s.dtype))
                                    << ", the new value " << shape_str(x.shape) << " "
                                    << std::string(dtype_name(x.dtype)));
  for (auto& [st, old] : state_updates_)
    RLX_CHECK(st != state, "update_state: state '" << name << "' already has an update");
  state_updates_.emplace_back(state, v);
}

void verify(const Graph& g) {
  std::vector<bool> live(g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) live[i] = !g.nodes()[i].dead;
  std::set<std::pair<int, std::string>> names;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.dead) continue;
    std::string who = g.describe(int32_t(i));
    if (n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::State) {
      RLX_CHECK(names.insert({int(n.op), n.name}).second, who << ": duplicate name");
      continue;
    }
    if (n.op == OpKind::Constant) {
      const Value& v = g.value(n.outputs.at(0));
      RLX_CHECK(n.data && n.data->size() == size_t(numel(v.shape)) * dtype_size(v.dtype),
                who << ": constant payload does not match its shape");
      continue;
    }
    for (ValueId v : n.inputs) {
      const Value& val = g.value(v);
      RLX_CHECK(live[size_t(val.producer)],
                who << ": input comes from dead " << g.describe(val.producer));
    }
    std::vector<Value> want = infer_outputs(g, n.op, n.inputs, n.attrs, who);
    RLX_CHECK(want.size() == n.outputs.size(), who << ": wrong number of outputs");
    for (size_t o = 0; o < want.size(); ++o) {
      const Value& have = g.value(n.outputs[o]);
      RLX_CHECK(have.shape == want[o].shape && have.dtype == want[o].dtype,
                who << ": output " << std::to_string(o) << " is " << shape_str(have.shape) << " "
                    << std::string(dtype_name(have.dtype)) << " but inference says "
                    << shape_str(want[o].shape) << " " << std::string(dtype_name(want[o].dtype)));
    }
  }
  for (auto& [name, v] : g.outputs())
    RLX_CHECK(live[size_t(g.value(v).producer)], "output '" << name << "' comes from a dead node");
  std::set<ValueId> updated;
  for (auto& [st, v] : g.state_updates()) {
    const Node& sn = g.node(g.value(st).producer);
    RLX_CHECK(sn.op == OpKind::State && !sn.dead, "a state update targets " << g.describe(g.value(st).producer)
                                                                             << ", not a live state");
    RLX_CHECK(updated.insert(st).second, "state '" << sn.name << "' has two updates");
    RLX_CHECK(live[size_t(g.value(v).producer)], "the update of state '" << sn.name << "' comes from a dead node");
    RLX_CHECK(g.value(v).shape == g.value(st).shape && g.value(v).dtype == g.value(st).dtype,
              "the update of state '" << sn.name << "' does not match its shape and dtype");
  }
}

}  // namespace rlx
