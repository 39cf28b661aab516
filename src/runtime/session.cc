// The public Session API: compile a graph, bind params, run with checks.
#include "rlx/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "backends/backend.h"
#include "compile/lower.h"
#include "compile/plan_verify.h"
#include "compile/passes.h"

namespace rlx {

namespace {

// n floats of one float dtype as another, the dtype switches outside the loop.
void convert_floats(DType from, const void* src, DType to, void* dst, size_t n) {
  auto with_load = [&](auto load) {
    switch (to) {
      case DType::F32:
        for (size_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = load(i);
        break;
      case DType::F16:
        for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = float_to_half(load(i));
        break;
      case DType::BF16:
        for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = float_to_bf16(load(i));
        break;
      case DType::I32: break;
    }
  };
  // src may be unaligned: a safetensors file places its tensors at any byte
  // offset (the header's length is free), and they are read in place.
  const auto* bytes = static_cast<const uint8_t*>(src);
  auto at = [bytes](auto zero, size_t i) {
    decltype(zero) v;
    std::memcpy(&v, bytes + i * sizeof v, sizeof v);
    return v;
  };
  switch (from) {
    case DType::F32: return with_load([&](size_t i) { return at(0.f, i); });
    case DType::F16: return with_load([&](size_t i) { return half_to_float(at(uint16_t(0), i)); });
    case DType::BF16: return with_load([&](size_t i) { return bf16_to_float(at(uint16_t(0), i)); });
    case DType::I32: return;
  }
}

}  // namespace

HostTensor HostTensor::from_f32(Shape shape, const std::vector<float>& v, DType dt) {
  RLX_CHECK(int64_t(v.size()) == rlx::numel(shape),
            "HostTensor: " << v.size() << " values for shape " << shape_str(shape));
  HostTensor t{dt, std::move(shape), std::vector<uint8_t>(v.size() * dtype_size(dt))};
  for (size_t i = 0; i < v.size(); ++i) store_from_float(t.bytes.data(), dt, i, v[i]);
  return t;
}

HostTensor HostTensor::from_i32(Shape shape, const std::vector<int32_t>& v) {
  RLX_CHECK(int64_t(v.size()) == rlx::numel(shape),
            "HostTensor: " << v.size() << " values for shape " << shape_str(shape));
  HostTensor t{DType::I32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> r(static_cast<size_t>(numel()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = load_as_float(bytes.data(), dtype, i);
  return r;
}

std::vector<int32_t> HostTensor::to_i32() const {
  RLX_CHECK(dtype == DType::I32, "HostTensor::to_i32 on a " << dtype_name(dtype) << " tensor");
  std::vector<int32_t> r(static_cast<size_t>(numel()));
  std::memcpy(r.data(), bytes.data(), r.size() * 4);
  return r;
}

bool cuda_available() { return cuda_backend() != nullptr; }

namespace {

std::unique_ptr<Schedule> plan(const Graph& graph, const CompileOptions& opts, CompileReport& rep) {
  Graph g = graph;
  rep.nodes_before = g.live_node_count();
  RLX_CHECK(!g.outputs().empty(), "compile: the graph has no outputs");
  verify(g);
  // The passes see the device the schedule will run on (compile's choice for Auto).
  CompileOptions resolved = opts;
  if (resolved.device == Device::Auto) resolved.device = cuda_backend() ? Device::Cuda : Device::Cpu;
  run_passes(g, resolved);
  verify(g);
  rep.nodes_after = g.live_node_count();
  std::unique_ptr<Schedule> s = lower(g);
#ifdef NDEBUG
  if (opts.verify_plan) verify_plan(*s);
#else
  verify_plan(*s);
#endif
  return s;
}

}  // namespace

uint64_t planned_arena_bytes(const Graph& g, const CompileOptions& opts) {
  CompileReport rep;
  return plan(g, opts, rep)->arena_bytes;
}

std::unique_ptr<Executable> compile(const Graph& graph, const CompileOptions& opts) {
  CompileReport rep;
  auto sched = plan(graph, opts, rep);

  Backend* be = nullptr;
  if (opts.device == Device::Cuda) {
    be = cuda_backend();
    RLX_CHECK(be, "compile: device cuda requested but no CUDA device is available ("
                      << cuda_unavailable_reason() << ")");
  } else if (opts.device == Device::Auto) {
    be = cuda_backend();
  }
  if (!be) be = &cpu_backend();
  require_support(*be, *sched, graph);

  rep.backend = be->name();
  rep.thunk_histogram = sched->histogram();
  rep.thunk_count = sched->thunks.size();
  rep.schedule = sched->to_string();
  rep.arena_bytes = sched->arena_bytes;
  rep.peak_live_bytes = sched->peak_live_bytes;
  rep.intermediate_bytes = sched->intermediate_bytes;
  rep.param_bytes = sched->params.size;
  rep.scratch_bytes = sched->scratch.size;
  const char* trace = std::getenv("RLX_TRACE");
  if (trace && std::string(trace) == "schedule") {
    std::cerr << "rlx: " << rep.thunk_count << " thunks on " << rep.backend << ":";
    for (auto& [k, n] : rep.thunk_histogram) std::cerr << " " << k << "=" << n;
    std::cerr << "\n" << rep.schedule;
  }
  auto prepared = be->prepare(*sched, opts);
  std::vector<size_t> out_bytes;
  for (const Binding& b : sched->output_bindings) out_bytes.push_back(b.bytes());
  prepared->set_output_bytes(out_bytes);
  return std::make_unique<Executable>(std::move(sched), std::move(prepared), std::move(rep), opts);
}

Executable::Executable(std::unique_ptr<Schedule> s, std::unique_ptr<BackendExecutable> be, CompileReport r,
                       CompileOptions opts)
    : schedule_(std::move(s)), backend_(std::move(be)), report_(std::move(r)),
      param_set_(schedule_->param_bindings.size(), false), opts_(std::move(opts)) {
  // A new arena holds garbage (NaN bytes on the GPU): state starts at zero.
  if (!schedule_->state_bindings.empty() && (!opts_.arena_share || opts_.arena_share->claim_state_zeroing()))
    reset_state();
}

void Executable::reset_state() {
  std::lock_guard<std::mutex> lock(run_mutex());
  for (const Binding& b : schedule_->state_bindings) {
    const std::vector<uint8_t> zeros(b.bytes(), 0);  // 0 bytes are 0.0 in every float dtype
    backend_->write_binding(b, zeros.data());
  }
}

double Executable::last_device_us() const { return backend_->last_device_us(); }

std::vector<double> Executable::time_device_forwards(int runs) {
  RLX_CHECK(runs >= 1, "time_device_forwards: runs must be at least 1, got " << runs);
  RLX_CHECK(schedule_->state_bindings.empty(),
            "time_device_forwards: the schedule has state ('" << schedule_->state_bindings.front().name
                                                              << "'), which replays would advance");
  std::lock_guard<std::mutex> lock(run_mutex());
  RLX_CHECK(runs_ > 0, "time_device_forwards: run the executable once first, so its inputs are in the arena");
  return backend_->time_device_forwards(runs);
}

std::vector<std::string> Executable::state_names() const {
  std::vector<std::string> r;
  for (const Binding& b : schedule_->state_bindings) r.push_back(b.name);
  return r;
}

std::mutex& Executable::run_mutex() const {
  return opts_.arena_share ? opts_.arena_share->run_mutex() : own_mutex_;
}

void Executable::share_params_with(const Executable& other) {
  std::lock_guard<std::mutex> lock(run_mutex());
  RLX_CHECK(opts_.arena_share && opts_.arena_share == other.opts_.arena_share,
            "share_params_with: the executables were not compiled with one arena share");
  // compile() checked that both lay out their params identically.
  param_set_ = other.param_set_;
}

Executable::~Executable() = default;

void Executable::set_param(const std::string& name, const HostTensor& t) {
  std::lock_guard<std::mutex> lock(run_mutex());
  for (size_t i = 0; i < schedule_->param_bindings.size(); ++i) {
    const Binding& b = schedule_->param_bindings[i];
    if (b.name != name) continue;
    RLX_CHECK(t.shape == b.shape, "set_param '" << name << "': shape " << shape_str(t.shape)
                                                << " does not match the param's " << shape_str(b.shape));
    RLX_CHECK(t.bytes.size() == size_t(t.numel()) * dtype_size(t.dtype),
              "set_param '" << name << "': " << t.bytes.size() << " bytes for shape "
                            << shape_str(t.shape) << " of " << dtype_name(t.dtype));
    if (t.dtype == b.dtype) {
      backend_->write_binding(b, t.bytes.data());
    } else {
      RLX_CHECK(is_float(t.dtype) && is_float(b.dtype),
                "set_param '" << name << "': cannot convert " << dtype_name(t.dtype) << " to "
                              << dtype_name(b.dtype));
      HostTensor c = HostTensor::from_f32(b.shape, t.to_f32(), b.dtype);
      backend_->write_binding(b, c.bytes.data());
    }
    param_set_[i] = true;
    return;
  }
  std::string known;
  for (const Binding& b : schedule_->param_bindings) known += (known.empty() ? "" : ", ") + b.name;
  RLX_FAIL("set_param: no param named '" << name << "' (params: " << known << ")");
}

void Executable::set_param_f32(const std::string& name, const float* data, size_t count) {
  set_param_bytes(name, DType::F32, data, count * sizeof(float));
}

void Executable::set_param_bytes(const std::string& name, DType dt, const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(run_mutex());
  for (size_t i = 0; i < schedule_->param_bindings.size(); ++i) {
    const Binding& b = schedule_->param_bindings[i];
    if (b.name != name) continue;
    const size_t n = size_t(rlx::numel(b.shape));
    RLX_CHECK(bytes == n * dtype_size(dt), "set_param '" << name << "': " << bytes / dtype_size(dt) << " values of "
                                                         << dtype_name(dt) << " for shape " << shape_str(b.shape));
    if (dt == b.dtype) {
      backend_->write_binding(b, data);
    } else {
      RLX_CHECK(is_float(dt) && is_float(b.dtype), "set_param '" << name << "': cannot convert " << dtype_name(dt)
                                                                 << " to " << dtype_name(b.dtype));
      std::vector<uint8_t> c(n * dtype_size(b.dtype));
      convert_floats(dt, data, b.dtype, c.data(), n);
      backend_->write_binding(b, c.data());
    }
    param_set_[i] = true;
    return;
  }
  set_param(name, HostTensor{});  // reports the unknown name
}

std::vector<const void*> Executable::check_inputs(const std::map<std::string, HostTensor>& inputs) const {
  for (size_t i = 0; i < param_set_.size(); ++i)
    RLX_CHECK(param_set_[i], "run: param '" << schedule_->param_bindings[i].name << "' was never set");
  for (auto& [name, t] : inputs) {
    bool known = false;
    for (const Binding& b : schedule_->input_bindings) known = known || b.name == name;
    RLX_CHECK(known, "run: the graph has no input named '" << name << "'");
  }
  std::vector<const void*> ptrs;
  for (const Binding& b : schedule_->input_bindings) {
    auto it = inputs.find(b.name);
    RLX_CHECK(it != inputs.end(), "run: input '" << b.name << "' is missing");
    const HostTensor& t = it->second;
    RLX_CHECK(t.shape == b.shape, "run: input '" << b.name << "' has shape " << shape_str(t.shape)
                                                 << ", expected " << shape_str(b.shape));
    RLX_CHECK(t.dtype == b.dtype, "run: input '" << b.name << "' is " << dtype_name(t.dtype)
                                                 << ", expected " << dtype_name(b.dtype));
    RLX_CHECK(t.bytes.size() == b.bytes(), "run: input '" << b.name << "' holds " << t.bytes.size()
                                                          << " bytes, expected " << b.bytes());
    ptrs.push_back(t.bytes.data());
  }
  for (const IndexCheck& c : schedule_->index_checks) {
    const HostTensor& t = inputs.at(c.input);
    const int32_t* v = reinterpret_cast<const int32_t*>(t.bytes.data());
    for (int64_t i = 0; i < t.numel(); ++i)
      RLX_CHECK(v[i] >= 0 && v[i] < c.limit, "run: input '" << c.input << "' [" << i << "] = " << v[i]
                                                            << " is out of range [0, " << c.limit
                                                            << ") (" << c.what << ")");
  }
  return ptrs;
}

namespace {

std::map<std::string, HostTensor> empty_outputs(const Schedule& s, std::vector<void*>& ptrs) {
  std::map<std::string, HostTensor> out;
  for (const Binding& b : s.output_bindings)
    out[b.name] = HostTensor{b.dtype, b.shape, std::vector<uint8_t>(b.bytes())};
  for (const Binding& b : s.output_bindings) ptrs.push_back(out[b.name].bytes.data());
  return out;
}

}  // namespace

std::map<std::string, HostTensor> Executable::run(const std::map<std::string, HostTensor>& inputs) {
  std::lock_guard<std::mutex> lock(run_mutex());
  std::vector<const void*> in = check_inputs(inputs);
  std::vector<void*> ptrs;
  auto out = empty_outputs(*schedule_, ptrs);
  backend_->run(in, ptrs);
  ++runs_;
  return out;
}

uint64_t Executable::submit(const std::map<std::string, HostTensor>& inputs) {
  std::lock_guard<std::mutex> lock(run_mutex());
  const uint64_t ticket = backend_->submit(check_inputs(inputs));
  ++runs_;
  return ticket;
}

std::map<std::string, HostTensor> Executable::wait(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(run_mutex());
  std::vector<void*> ptrs;
  auto out = empty_outputs(*schedule_, ptrs);
  backend_->wait(ticket, ptrs);
  return out;
}

std::vector<std::map<std::string, HostTensor>> Executable::run_pipelined(
    const std::vector<std::map<std::string, HostTensor>>& batches) {
  // Keep at most `ring` runs in flight: deeper queues only park outputs.
  const size_t depth = size_t(std::max(1, opts_.ring));
  std::vector<uint64_t> tickets;
  std::vector<std::map<std::string, HostTensor>> out;
  for (const auto& b : batches) {
    if (tickets.size() - out.size() == depth) out.push_back(wait(tickets[out.size()]));
    tickets.push_back(submit(b));
  }
  while (out.size() < tickets.size()) out.push_back(wait(tickets[out.size()]));
  return out;
}

std::string Executable::backend_summary() const { return backend_->summary(); }

std::vector<std::string> Executable::param_names() const {
  std::vector<std::string> r;
  for (const Binding& b : schedule_->param_bindings) r.push_back(b.name);
  return r;
}
std::vector<std::string> Executable::input_names() const {
  std::vector<std::string> r;
  for (const Binding& b : schedule_->input_bindings) r.push_back(b.name);
  return r;
}
std::vector<std::string> Executable::output_names() const {
  std::vector<std::string> r;
  for (const Binding& b : schedule_->output_bindings) r.push_back(b.name);
  return r;
}

}  // namespace rlx
