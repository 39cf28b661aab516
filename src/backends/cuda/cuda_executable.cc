#include "backends/cuda/cuda_executable.h"

#include <functional>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kMinSegment = 2;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

void count_nodes(cudaGraph_t g, int& kernels, int& memcpys) {
  size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) check(cudaGraphGetNodes(g, nodes.data(), &n), "cudaGraphGetNodes");
  kernels = memcpys = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    check(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType");
    if (t == cudaGraphNodeTypeKernel) ++kernels;
    if (t == cudaGraphNodeTypeMemcpy) ++memcpys;
  }
}

// Async copy of a binding between the arena and contiguous host staging.
void copy_binding(uint8_t* arena, const Binding& b, uint8_t* host, bool to_device, cudaStream_t s) {
  if (b.bytes() == 0) return;
  uint8_t* dev = arena + b.offset;
  if (b.outer <= 1) {
    check(to_device ? cudaMemcpyAsync(dev, host, b.bytes(), cudaMemcpyHostToDevice, s)
                    : cudaMemcpyAsync(host, dev, b.bytes(), cudaMemcpyDeviceToHost, s),
          "copy of '" + b.name + "'");
  } else {
    check(to_device ? cudaMemcpy2DAsync(dev, b.outer_stride_bytes, host, b.inner_bytes, b.inner_bytes,
                                        b.outer, cudaMemcpyHostToDevice, s)
                    : cudaMemcpy2DAsync(host, b.inner_bytes, dev, b.outer_stride_bytes, b.inner_bytes,
                                        b.outer, cudaMemcpyDeviceToHost, s),
          "copy of '" + b.name + "'");
  }
}

const char* mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::PerOp: return "perop";
    case ExecMode::Graph: return "graph";
    case ExecMode::Segmented: return "segmented";
    case ExecMode::Auto: return "auto";
  }
  return "?";
}

}  // namespace

CudaExecutable::CudaExecutable(const Schedule& s, const CompileOptions& o) : schedule_(s) {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream creation");
  // A new arena starts as NaN bytes, so anything a kernel fails to write shows.
  share_ = o.arena_share ? o.arena_share : make_arena_share();
  bool fresh = false;
  auto alloc = [](uint64_t bytes) -> uint8_t* {
    uint8_t* p = nullptr;
    check(cudaMalloc(&p, bytes), "arena allocation");
    check(cudaMemset(p, 0xff, bytes), "arena poison");
    return p;
  };
  arena_ = share_->acquire(s, "cuda", alloc, [](uint8_t* p) { cudaFree(p); }, &fresh);
  for (const auto& [offset, bytes] : s.constants)
    RLX_CHECK(offset + bytes->size() <= s.arena_bytes, "constant at offset " + std::to_string(offset) +
                                                           " lies outside the arena");
  upload_constants_if_needed();

  bool any_matmul = std::any_of(s.thunks.begin(), s.thunks.end(),
                                [](const Thunk& t) { return t.kind == ThunkKind::MatMul; });
  DeviceResources res{arena_, nullptr, nullptr, 0, o.allow_tf32};
  if (any_matmul) {
    check(cublasLtCreate(&lt_), "cuBLASLt handle");
    check(cudaMalloc(&workspace_, kWorkspaceBytes), "matmul workspace");
    res = {arena_, lt_, workspace_, kWorkspaceBytes, o.allow_tf32};
  }
  for (const Thunk& t : s.thunks) thunks_.push_back(make_device_thunk(t, res));

  for (const Binding& b : s.input_bindings) {
    in_offsets_.push_back(in_bytes_);
    in_bytes_ = align_up(in_bytes_ + b.bytes(), 256);
  }
  for (const Binding& b : s.output_bindings) {
    out_offsets_.push_back(out_bytes_);
    out_bytes_ = align_up(out_bytes_ + b.bytes(), 256);
  }
  slots_.resize(size_t(std::max(1, o.ring)));
  for (Slot& slot : slots_) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&slot.in), std::max<uint64_t>(in_bytes_, 256), cudaHostAllocDefault),
          "pinned input staging");
    check(cudaHostAlloc(reinterpret_cast<void**>(&slot.out), std::max<uint64_t>(out_bytes_, 256), cudaHostAllocDefault),
          "pinned output staging");
    check(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming), "event creation");
  }

  choose_mode(o);
  thunk_kernel_nodes_.assign(thunks_.size(), 0);
  segment_of_.assign(thunks_.size(), -1);
  if (mode_ != ExecMode::PerOp) measure_thunk_nodes();
  if (mode_ == ExecMode::Graph) record_forward_graphs();
  if (mode_ == ExecMode::Segmented) record_segments();
  schedule_string_.clear();
  for (size_t i = 0; i < thunks_.size(); ++i)
    schedule_string_ += mode_ == ExecMode::Graph || segment_of_[i] >= 0 ? '+' : '-';
  check(cudaStreamSynchronize(stream_), "prepare");

  const char* trace = std::getenv("RLX_TRACE");
  trace_runs_ = trace && std::strcmp(trace, "1") == 0;
  trace_json_ = o.trace_json;
  if (trace && std::strcmp(trace, "schedule") == 0) {
    std::map<std::string, int> hist;
    for (const Thunk& t : s.thunks) ++hist[thunk_name(t.kind)];
    std::fprintf(stderr, "rlx cuda: mode %s, %zu thunks, arena %llu bytes\n", mode_name(mode_), thunks_.size(),
                 (unsigned long long)s.arena_bytes);
    for (const auto& [name, n] : hist) std::fprintf(stderr, "  %-14s %d\n", name.c_str(), n);
    std::fprintf(stderr, "  schedule %s\n", schedule_string_.c_str());
    for (const std::string& r : per_op_reasons_) std::fprintf(stderr, "  per op: %s\n", r.c_str());
  }
}

CudaExecutable::~CudaExecutable() {
  if (stream_) cudaStreamSynchronize(stream_);
  for (Slot& slot : slots_) {
    if (slot.forward) cudaGraphExecDestroy(slot.forward);
    if (slot.done) cudaEventDestroy(slot.done);
    if (slot.in) cudaFreeHost(slot.in);
    if (slot.out) cudaFreeHost(slot.out);
  }
  for (Segment& seg : segments_)
    if (seg.exec) cudaGraphExecDestroy(seg.exec);
  thunks_.clear();
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaExecutable::choose_mode(const CompileOptions& o) {
  mode_ = o.mode;
  if (const char* env = std::getenv("RLX_EXEC")) {
    std::string e = env;
    if (e == "perop") mode_ = ExecMode::PerOp;
    else if (e == "graph") mode_ = ExecMode::Graph;
    else if (e == "segmented") mode_ = ExecMode::Segmented;
    else if (e == "auto") mode_ = ExecMode::Auto;
    else throw Error("RLX_EXEC='" + e + "': expected perop, graph, segmented or auto");
  }
  const Thunk* unsafe = nullptr;
  for (const Thunk& t : schedule_.thunks)
    if (!t.capture_safe && !unsafe) unsafe = &t;
  if (mode_ == ExecMode::Auto) mode_ = unsafe ? ExecMode::Segmented : ExecMode::Graph;
  RLX_CHECK(!(mode_ == ExecMode::Graph && unsafe),
            "graph mode: thunk " + unsafe->label + " cannot be recorded (not capture-safe); use segmented");
}

// Records what `enqueue` puts on the stream (nothing runs); on an error the
// capture is ended so the stream stays usable.
cudaGraph_t CudaExecutable::capture(const std::function<void()>& enqueue, const std::string& what) {
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "capture begin");
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cudaGraph_t g = nullptr;
  check(cudaStreamEndCapture(stream_, &g), what);
  return g;
}

void CudaExecutable::measure_thunk_nodes() {
  for (size_t i = 0; i < thunks_.size(); ++i) {
    if (!schedule_.thunks[i].capture_safe) continue;
    cudaGraph_t g = capture([&] { execute_thunk(i, false); }, "recording " + schedule_.thunks[i].label);
    int memcpys = 0;
    count_nodes(g, thunk_kernel_nodes_[i], memcpys);
    cudaGraphDestroy(g);
  }
}

void CudaExecutable::record_forward_graphs() {
  for (size_t si = 0; si < slots_.size(); ++si) {
    Slot& slot = slots_[si];
    cudaGraph_t g = capture([&] { encode_forward(slot, false); }, "recording the forward graph");
    if (si == 0) count_nodes(g, graph_kernel_nodes_, graph_memcpy_nodes_);
    check(cudaGraphInstantiate(&slot.forward, g, 0), "instantiating the forward graph");
    cudaGraphDestroy(g);
    check(cudaGraphUpload(slot.forward, stream_), "uploading the forward graph");
  }
}

void CudaExecutable::record_segments() {
  const auto& ts = schedule_.thunks;
  size_t i = 0;
  while (i < ts.size()) {
    if (!ts[i].capture_safe) {
      per_op_reasons_.push_back("thunk " + std::to_string(i) + " " + ts[i].label + ": not capture-safe");
      ++i;
      continue;
    }
    size_t j = i;
    while (j < ts.size() && ts[j].capture_safe) ++j;
    if (j - i < kMinSegment) {
      per_op_reasons_.push_back("thunk " + std::to_string(i) + " " + ts[i].label +
                                ": capture-safe run of 1 is too short to record");
      i = j;
      continue;
    }
    Segment seg{i, j, nullptr};
    cudaGraph_t g = capture([&] { for (size_t k = i; k < j; ++k) execute_thunk(k, false); }, "recording a segment");
    int kernels = 0, memcpys = 0;
    count_nodes(g, kernels, memcpys);
    graph_kernel_nodes_ += kernels;
    graph_memcpy_nodes_ += memcpys;
    check(cudaGraphInstantiate(&seg.exec, g, 0), "instantiating a segment");
    cudaGraphDestroy(g);
    for (size_t k = i; k < j; ++k) segment_of_[k] = int(segments_.size());
    segments_.push_back(seg);
    i = j;
  }
}

void CudaExecutable::execute_thunk(size_t i, bool count) {
  LaunchContext ctx{arena_, stream_, schedule_.thunks[i].label.c_str()};
  thunks_[i]->execute(ctx);
  if (count) ++counters_.perop_launches;
}

void CudaExecutable::encode_forward(Slot& slot, bool count) {
  const auto& ins = schedule_.input_bindings;
  for (size_t i = 0; i < ins.size(); ++i) copy_binding(arena_, ins[i], slot.in + in_offsets_[i], true, stream_);
  for (size_t i = 0; i < thunks_.size();) {
    if (mode_ == ExecMode::Segmented && segment_of_[i] >= 0) {
      const Segment& seg = segments_[size_t(segment_of_[i])];
      check(cudaGraphLaunch(seg.exec, stream_), "launching a segment");
      ++counters_.graph_launches;
      i = seg.last;
      continue;
    }
    execute_thunk(i, count);
    ++i;
  }
  const auto& outs = schedule_.output_bindings;
  for (size_t i = 0; i < outs.size(); ++i) copy_binding(arena_, outs[i], slot.out + out_offsets_[i], false, stream_);
}

void CudaExecutable::write_binding(const Binding& b, const void* src) {
  RLX_CHECK(b.offset + (b.outer > 1 ? uint64_t(b.outer - 1) * b.outer_stride_bytes + b.inner_bytes : b.bytes()) <=
                schedule_.arena_bytes,
            "binding '" + b.name + "' lies outside the arena");
  // Runs in flight read the arena; the graph reads it too, so replays see this.
  check(cudaStreamSynchronize(stream_), "write of '" + b.name + "'");
  if (b.bytes() == 0) return;
  if (b.outer <= 1)
    check(cudaMemcpy(arena_ + b.offset, src, b.bytes(), cudaMemcpyHostToDevice), "write of '" + b.name + "'");
  else
    check(cudaMemcpy2D(arena_ + b.offset, b.outer_stride_bytes, src, b.inner_bytes, b.inner_bytes, b.outer,
                       cudaMemcpyHostToDevice),
          "write of '" + b.name + "'");
}

// Executables sharing an arena each have their own constants at the same
// offsets; whoever runs puts its own back first. (Shared runs never overlap.)
void CudaExecutable::upload_constants_if_needed() {
  if (!share_->claim_constants(this)) return;
  check(cudaDeviceSynchronize(), "before uploading constants");
  for (const auto& [offset, bytes] : schedule_.constants)
    check(cudaMemcpy(arena_ + offset, bytes->data(), bytes->size(), cudaMemcpyHostToDevice), "constant upload");
}

uint64_t CudaExecutable::submit(const std::vector<const void*>& inputs) {
  const auto t0 = std::chrono::steady_clock::now();
  upload_constants_if_needed();
  const auto& ins = schedule_.input_bindings;
  RLX_CHECK(inputs.size() == ins.size(),
            "run: expected " + std::to_string(ins.size()) + " inputs, got " + std::to_string(inputs.size()));
  const uint64_t ticket = next_ticket_++;
  Slot& slot = slots_[ticket % slots_.size()];
  if (slot.pending) {  // the slot's last run was never waited for: keep its outputs
    check(cudaEventSynchronize(slot.done), "run " + std::to_string(slot.pending));
    std::vector<uint8_t> saved(slot.out, slot.out + out_bytes_);
    finished_[slot.pending] = std::move(saved);
    slot.pending = 0;
  }
  const auto t_encode = std::chrono::steady_clock::now();
  for (size_t i = 0; i < ins.size(); ++i) std::memcpy(slot.in + in_offsets_[i], inputs[i], ins[i].bytes());
  if (mode_ == ExecMode::Graph) {
    check(cudaGraphLaunch(slot.forward, stream_), "launching the forward graph");
    ++counters_.graph_launches;
  } else {
    encode_forward(slot, true);
  }
  check(cudaEventRecord(slot.done, stream_), "event record");
  last_encode_us_ = micros_since(t_encode);
  slot.pending = ticket;
  ++counters_.forwards;
  last_submit_us_ = micros_since(t0);
  return ticket;
}

void CudaExecutable::copy_outputs(const Slot& slot, const std::vector<void*>& outputs) const {
  const auto& outs = schedule_.output_bindings;
  for (size_t i = 0; i < outs.size(); ++i) std::memcpy(outputs[i], slot.out + out_offsets_[i], outs[i].bytes());
}

void CudaExecutable::wait(uint64_t ticket, const std::vector<void*>& outputs) {
  const auto& outs = schedule_.output_bindings;
  RLX_CHECK(outputs.size() == outs.size(),
            "wait: expected " + std::to_string(outs.size()) + " outputs, got " + std::to_string(outputs.size()));
  auto it = finished_.find(ticket);
  if (it != finished_.end()) {
    for (size_t i = 0; i < outs.size(); ++i) std::memcpy(outputs[i], it->second.data() + out_offsets_[i], outs[i].bytes());
    finished_.erase(it);
    return;
  }
  Slot& slot = slots_[ticket % slots_.size()];
  RLX_CHECK(ticket != 0 && slot.pending == ticket, "wait: run " + std::to_string(ticket) + " is not in flight");
  check(cudaEventSynchronize(slot.done), "run " + std::to_string(ticket));
  copy_outputs(slot, outputs);
  slot.pending = 0;
  if (!trace_json_.empty()) write_trace_json();
}

void CudaExecutable::run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t ticket = submit(inputs);
  const auto t1 = std::chrono::steady_clock::now();
  wait(ticket, outputs);
  if (trace_runs_)
    std::fprintf(stderr, "rlx trace: %s encode %.1f us submit %.1f us wait %.1f us\n", mode_name(mode_),
                 last_encode_us_, std::chrono::duration<double, std::micro>(t1 - t0).count(), micros_since(t1));
}

// Per-thunk GPU times of one extra per-op pass over the current arena,
// measured with events, as a Chrome trace. Written once, after the first run.
void CudaExecutable::write_trace_json() {
  const std::string path = trace_json_;
  trace_json_.clear();
  std::vector<cudaEvent_t> ev(thunks_.size() + 1);
  for (auto& e : ev) check(cudaEventCreate(&e), "trace event");
  // Give the host time to queue every thunk before the device starts on them
  // (20 us each is far more than a launch takes).
  enqueue_gpu_delay(stream_, 20000ull * thunks_.size() + 100000);
  check(cudaEventRecord(ev[0], stream_), "trace event");
  for (size_t i = 0; i < thunks_.size(); ++i) {
    execute_thunk(i, false);
    check(cudaEventRecord(ev[i + 1], stream_), "trace event");
  }
  check(cudaStreamSynchronize(stream_), "trace pass");
  nlohmann::json events = nlohmann::json::array();
  float start_ms = 0.f;
  for (size_t i = 0; i < thunks_.size(); ++i) {
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]), "trace timing");
    const Thunk& t = schedule_.thunks[i];
    events.push_back({{"name", t.label.empty() ? thunk_name(t.kind) : t.label},
                      {"cat", thunk_name(t.kind)},
                      {"ph", "X"},
                      {"ts", double(start_ms) * 1000.0},
                      {"dur", double(ms) * 1000.0},
                      {"pid", 0},
                      {"tid", 0}});
    start_ms += ms;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::ofstream f(path);
  RLX_CHECK(f.good(), "cannot write trace file " + path);
  f << nlohmann::json{{"traceEvents", events}}.dump(1) << "\n";
}

}  // namespace rlx::cuda
