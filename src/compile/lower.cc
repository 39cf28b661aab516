// Lowering: order nodes, place every value in the arena, emit thunks.
// Arena layout: [state | params + constants | inputs | outputs | scratch],
// each region 256-byte aligned; scratch slots are reused by liveness.
#include "compile/lower.h"

#include <algorithm>
#include <queue>

#include "compile/memory_plan.h"

namespace rlx {

namespace {

std::vector<int32_t> topo_order(const Graph& g) {
  size_t n = g.nodes().size();
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int32_t>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = g.nodes()[i];
    if (nd.dead) continue;
    for (ValueId v : nd.inputs) {
      int32_t p = g.value(v).producer;
      RLX_CHECK(!g.node(p).dead, g.describe(int32_t(i)) << " reads a value of dead " << g.describe(p));
      ++pending[i];
      consumers[size_t(p)].push_back(int32_t(i));
    }
  }
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;  // stable by index
  for (size_t i = 0; i < n; ++i)
    if (!g.nodes()[i].dead && pending[i] == 0) ready.push(int32_t(i));
  std::vector<int32_t> order;
  while (!ready.empty()) {
    int32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int32_t c : consumers[size_t(i)])
      if (--pending[size_t(c)] == 0) ready.push(c);
  }
  RLX_CHECK(order.size() == g.live_node_count(), "the graph has a cycle");
  return order;
}

}  // namespace

bool is_param_group(const Graph& g, const Node& n) {
  if (n.op != OpKind::Concat) return false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ValueId v = n.inputs[i];
    if (g.node(g.value(v).producer).op != OpKind::Param) return false;
    if (g.users(v).size() != 1) return false;
    if (std::count(n.inputs.begin(), n.inputs.end(), v) != 1) return false;
    for (auto& o : g.outputs())
      if (o.second == v) return false;
  }
  return true;
}

namespace {

enum class Home { None, State, Params, Inputs, Outputs, Scratch };

}  // namespace

std::unique_ptr<Schedule> lower(const Graph& g) {
  auto s = std::make_unique<Schedule>();
  const size_t nv = g.values().size();
  std::vector<int32_t> order = topo_order(g);

  // Where each value's bytes live: a root value with a slot, plus a byte offset.
  std::vector<ValueId> root(nv, -1);
  std::vector<uint64_t> view_off(nv, 0);
  std::vector<Home> region(nv, Home::None);
  std::vector<uint64_t> slot(nv, 0);  // offset inside the region, for roots
  auto bytes_of = [&](ValueId v) {
    const Value& x = g.value(v);
    return uint64_t(numel(x.shape)) * dtype_size(x.dtype);
  };

  // Thunk index range of each node, known before placement: lowering each
  // node once with every value at offset 0 says how many thunks it emits.
  std::vector<int32_t> t_begin(g.nodes().size(), 0), t_end(g.nodes().size(), 0), n_emitted(g.nodes().size(), 0);
  {
    std::vector<Thunk> dry;
    for (int32_t id : order) {
      if (is_param_group(g, g.node(id))) continue;
      dry.clear();
      lower_node(g, id, [](ValueId) -> uint64_t { return 0; }, dry);
      n_emitted[size_t(id)] = int32_t(dry.size());
    }
  }
  int32_t t = 0;
  auto emits = [&](int32_t id) { return n_emitted[size_t(id)]; };
  for (int32_t id : order) {
    t_begin[size_t(id)] = t;
    t += emits(id);
    t_end[size_t(id)] = t;
  }

  // Places every node of kind `op` (a named leaf: state or input) one after
  // another in its own region; returns the region's size.
  auto place_leaves = [&](OpKind op, Home home, std::vector<Binding>& bindings) {
    uint64_t top = 0;
    for (int32_t id : order) {
      const Node& n = g.node(id);
      if (n.op != op) continue;
      ValueId v = n.outputs[0];
      root[size_t(v)] = v;
      region[size_t(v)] = home;
      slot[size_t(v)] = top;
      const Value& x = g.value(v);
      bindings.push_back(Binding{n.name, x.shape, x.dtype, top, 1, bytes_of(v), bytes_of(v)});
      top = align_up(top + bytes_of(v));
    }
    return top;
  };

  // State region: persists across runs, placed first so that every graph of
  // one builder (prefill and decode) puts it at the same offsets.
  const uint64_t state_top = place_leaves(OpKind::State, Home::State, s->state_bindings);

  // Params region: params, grouped params, constants.
  uint64_t param_top = 0;
  std::vector<bool> grouped(nv, false);
  for (int32_t id : order) {
    const Node& n = g.node(id);
    if (!is_param_group(g, n)) continue;
    ValueId out = n.outputs[0];
    root[size_t(out)] = out;
    region[size_t(out)] = Home::Params;
    slot[size_t(out)] = param_top;
    const Value& y = g.value(out);
    int axis = std::get<AxisAttrs>(n.attrs).axis;
    if (axis < 0) axis += int(y.shape.size());
    std::vector<int64_t> yst = contiguous_strides(y.shape);
    int64_t at = 0;
    for (ValueId in : n.inputs) {
      const Value& x = g.value(in);
      grouped[size_t(in)] = true;
      Binding b;
      b.name = g.node(x.producer).name;
      b.shape = x.shape;
      b.dtype = x.dtype;
      b.offset = param_top + uint64_t(at * yst[size_t(axis)]) * dtype_size(y.dtype);
      b.outer = numel(Shape(y.shape.begin(), y.shape.begin() + axis));
      b.inner_bytes = uint64_t(numel(Shape(x.shape.begin() + axis, x.shape.end()))) * dtype_size(x.dtype);
      b.outer_stride_bytes = uint64_t(yst[size_t(axis)] * y.shape[size_t(axis)]) * dtype_size(y.dtype);
      s->param_bindings.push_back(b);
      at += x.shape[size_t(axis)];
    }
    param_top = align_up(param_top + bytes_of(out));
  }
  // Params before constants: graphs built by one builder at other shapes
  // then lay out their params identically (see CompileOptions::arena_share).
  for (OpKind kind : {OpKind::Param, OpKind::Constant}) {
    for (int32_t id : order) {
      const Node& n = g.node(id);
      if (n.op != kind) continue;
      ValueId v = n.outputs[0];
      if (grouped[size_t(v)]) continue;
      root[size_t(v)] = v;
      region[size_t(v)] = Home::Params;
      slot[size_t(v)] = param_top;
      if (n.op == OpKind::Param) {
        const Value& x = g.value(v);
        s->param_bindings.push_back(Binding{n.name, x.shape, x.dtype, param_top, 1, bytes_of(v), bytes_of(v)});
      } else {
        s->constants.emplace_back(param_top, n.data);
      }
      param_top = align_up(param_top + bytes_of(v));
    }
  }

  // Inputs region.
  const uint64_t input_top = place_leaves(OpKind::Input, Home::Inputs, s->input_bindings);

  // Views alias their input; everything else computed is its own root.
  for (int32_t id : order) {
    const Node& n = g.node(id);
    if (n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::Constant || n.op == OpKind::State)
      continue;
    if (is_param_group(g, n)) continue;
    if (n.op == OpKind::KvWrite) {  // writes the cache in place: its output is the cache
      root[size_t(n.outputs[0])] = root[size_t(n.inputs[0])];
      continue;
    }
    if (is_view(g, id)) {
      ValueId in = n.inputs[0], out = n.outputs[0];
      root[size_t(out)] = root[size_t(in)];
      view_off[size_t(out)] = view_off[size_t(in)];
      if (n.op == OpKind::Narrow) {
        const auto& at = std::get<NarrowAttrs>(n.attrs);
        const Shape& xs = g.value(in).shape;
        int axis = at.axis < 0 ? at.axis + int(xs.size()) : at.axis;
        view_off[size_t(out)] += uint64_t(at.start * contiguous_strides(xs)[size_t(axis)]) *
                                 dtype_size(g.value(in).dtype);
      }
      continue;
    }
    for (ValueId v : n.outputs) {
      root[size_t(v)] = v;
      region[size_t(v)] = Home::Scratch;
    }
  }

  // Graph outputs: written in place by their producer when it is a thunk
  // whose root is its own; otherwise copied at the end of the schedule.
  uint64_t output_top = 0;
  std::vector<std::pair<ValueId, uint64_t>> output_copies;  // value -> output slot
  for (auto& [name, v] : g.outputs()) {
    const Value& x = g.value(v);
    uint64_t off;
    if (root[size_t(v)] == v && region[size_t(v)] == Home::Scratch) {
      region[size_t(v)] = Home::Outputs;
      slot[size_t(v)] = off = output_top;
    } else {
      off = output_top;
      output_copies.emplace_back(v, off);
    }
    s->output_bindings.push_back(Binding{name, x.shape, x.dtype, off, 1, bytes_of(v), bytes_of(v)});
    output_top = align_up(output_top + bytes_of(v));
  }
  // State updates: copies after the output copies, so after every reader.
  const int32_t first_update = t + int32_t(output_copies.size());
  int32_t n_thunks = first_update + int32_t(g.state_updates().size());

  // Liveness of scratch roots: from the producer's first thunk to the last
  // thunk of any reader of the root or of a view of it.
  std::vector<int32_t> last(nv, -1);
  for (int32_t id : order) {
    const Node& n = g.node(id);
    for (ValueId v : n.inputs) {
      ValueId r = root[size_t(v)];
      if (r >= 0) last[size_t(r)] = std::max(last[size_t(r)], t_end[size_t(id)] - 1);
    }
  }
  for (size_t i = 0; i < output_copies.size(); ++i) {
    ValueId r = root[size_t(output_copies[i].first)];
    last[size_t(r)] = std::max(last[size_t(r)], t + int32_t(i));
  }
  for (size_t i = 0; i < g.state_updates().size(); ++i) {
    ValueId r = root[size_t(g.state_updates()[i].second)];
    last[size_t(r)] = std::max(last[size_t(r)], first_update + int32_t(i));
  }
  std::vector<ValueId> scratch;
  std::vector<LiveRange> ranges;
  for (size_t v = 0; v < nv; ++v) {
    if (region[v] != Home::Scratch) continue;
    int32_t p = g.value(ValueId(v)).producer;
    if (g.node(p).dead) continue;
    int32_t first = t_begin[size_t(p)];
    scratch.push_back(ValueId(v));
    ranges.push_back(LiveRange{bytes_of(ValueId(v)), first, std::max(last[v], t_end[size_t(p)] - 1)});
    s->intermediate_bytes += align_up(bytes_of(ValueId(v)));
  }
  Placement pl = place(ranges);

  s->state = {0, state_top};
  s->params = {state_top, param_top};
  s->inputs = {s->params.offset + align_up(param_top), input_top};
  s->outputs = {s->inputs.offset + align_up(input_top), output_top};
  s->scratch = {s->outputs.offset + align_up(output_top), pl.region_bytes};
  s->arena_bytes = s->scratch.offset + pl.region_bytes;
  s->peak_live_bytes = pl.peak_live_bytes;
  for (size_t i = 0; i < scratch.size(); ++i) {
    slot[size_t(scratch[i])] = pl.offsets[i];
    s->planned.push_back(PlannedValue{scratch[i], s->scratch.offset + pl.offsets[i], ranges[i].size,
                                      ranges[i].first, ranges[i].last});
  }
  for (auto& b : s->param_bindings) b.offset += s->params.offset;
  for (auto& c : s->constants) c.first += s->params.offset;
  for (auto& b : s->input_bindings) b.offset += s->inputs.offset;
  for (auto& b : s->output_bindings) b.offset += s->outputs.offset;
  for (auto& c : output_copies) c.second += s->outputs.offset;

  auto addr = [&](ValueId v) -> uint64_t {
    ValueId r = root[size_t(v)];
    RLX_CHECK(r >= 0, "value " << v << " has no storage");
    uint64_t base = region[size_t(r)] == Home::State     ? s->state.offset
                    : region[size_t(r)] == Home::Params  ? s->params.offset
                    : region[size_t(r)] == Home::Inputs  ? s->inputs.offset
                    : region[size_t(r)] == Home::Outputs ? s->outputs.offset
                                                           : s->scratch.offset;
    return base + slot[size_t(r)] + view_off[size_t(v)];
  };

  for (int32_t id : order) {
    if (emits(id) == 0) continue;
    size_t before = s->thunks.size();
    lower_node(g, id, addr, s->thunks);
    RLX_CHECK(int32_t(s->thunks.size() - before) == emits(id),
              g.describe(id) << ": lowering emitted an unexpected number of thunks");
    const Node& n = g.node(id);
    for (size_t k = before; k < s->thunks.size(); ++k) {
      Thunk& th = s->thunks[k];
      for (ValueId v : n.inputs) th.uses.push_back(BufferUse{addr(v), bytes_of(v), false});
      for (ValueId v : n.outputs) th.uses.push_back(BufferUse{addr(v), bytes_of(v), true});
    }
  }
  auto copy_to = [&](ValueId v, uint64_t dst, const std::string& label) {
    const Value& x = g.value(v);
    std::vector<int64_t> st = contiguous_strides(x.shape);
    CopyParams p{};
    p.src = addr(v);
    p.dst = dst;
    p.n = numel(x.shape);
    p.rank = int32_t(x.shape.size());
    for (size_t i = 0; i < x.shape.size(); ++i) {
      p.shape[i] = x.shape[i];
      p.src_stride[i] = p.dst_stride[i] = st[i];
    }
    p.src_dtype = p.dst_dtype = x.dtype;
    Thunk th;
    th.params = p;
    th.node = x.producer;
    th.label = label;
    th.uses = {BufferUse{addr(v), bytes_of(v), false}, BufferUse{dst, bytes_of(v), true}};
    s->thunks.push_back(std::move(th));
  };
  for (auto& [v, dst] : output_copies) copy_to(v, dst, "output copy");
  for (auto& [st, v] : g.state_updates()) {
    const std::string& name = g.node(g.value(st).producer).name;
    s->state_updates.push_back(StateUpdate{int32_t(s->thunks.size()), name});
    copy_to(v, addr(st), "state update '" + name + "'");
  }
  RLX_CHECK(int32_t(s->thunks.size()) == n_thunks, "lowering: thunk count mismatch");

  // Ids and labels that come straight from an input are range-checked on the host.
  auto source_input = [&](ValueId v) -> const Node* {
    const Node* n = &g.node(g.value(v).producer);
    while (n->op == OpKind::Reshape) n = &g.node(g.value(n->inputs[0]).producer);
    return n->op == OpKind::Input ? n : nullptr;
  };
  // A KV write's positions straight from an input must leave room for its rows.
  for (int32_t id : order) {
    const Node& n = g.node(id);
    if (n.op != OpKind::KvWrite) continue;
    const Node* in = source_input(n.inputs[2]);
    if (!in) continue;
    // A ring takes any position; only its rows' positions must fit an i32.
    const int64_t limit = std::get<KvWriteAttrs>(n.attrs).ring
                              ? int64_t(INT32_MAX) - g.value(n.inputs[1]).shape[1] + 1
                              : g.value(n.inputs[0]).shape[1] - g.value(n.inputs[1]).shape[1] + 1;
    s->index_checks.push_back(IndexCheck{in->name, limit, "positions of " + g.describe(id) + " (" +
                                                              std::to_string(g.value(n.inputs[1]).shape[1]) +
                                                              " rows into " +
                                                              std::to_string(g.value(n.inputs[0]).shape[1]) + ")"});
  }
  // Cache slots straight from an input must name a row of the pool.
  for (int32_t id : order) {
    const Node& n = g.node(id);
    if (n.op != OpKind::KvWrite || !std::get<KvWriteAttrs>(n.attrs).slots) continue;
    if (const Node* in = source_input(n.inputs[3]))
      s->index_checks.push_back(IndexCheck{in->name, g.value(n.inputs[0]).shape[0], "cache slots of " + g.describe(id)});
  }
  for (int32_t id : order) {
    const Node& n = g.node(id);
    if (n.op != OpKind::Gather && n.op != OpKind::GatherQ && n.op != OpKind::SoftmaxCrossEntropy) continue;
    const bool lookup = n.op != OpKind::SoftmaxCrossEntropy;
    const Node* in = source_input(n.inputs[n.op == OpKind::GatherQ ? 2 : 1]);
    if (!in) continue;
    int64_t limit = lookup ? g.value(n.inputs[0]).shape[0] : g.value(n.inputs[0]).shape[1];
    s->index_checks.push_back(IndexCheck{in->name, limit,
                                         std::string(lookup ? "ids of " : "labels of ") +
                                             g.describe(id)});
  }
  return s;
}

}  // namespace rlx
