#include "backends/cuda/cuda_executable.h"

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_scope.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nccl_collective.h"
#include "backends/cuda/row_export.h"
#include "backends/exec_mode.h"

namespace rlx::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

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

std::vector<uint64_t> binding_bytes(const std::vector<Binding>& bs) {
  std::vector<uint64_t> v;
  for (const Binding& b : bs) v.push_back(b.bytes());
  return v;
}

}  // namespace

CudaExecutable::CudaExecutable(const Schedule& s, const CompileOptions& o)
    : schedule_(s), device_(o.device_index), tracer_(o.trace_json) {
  RLX_CHECK(!o.int8_products, "cuda: int8 products (CompileOptions::int8_products, --quantize int8) run on the CPU "
                              "only; compile for the CPU, or use f16/bf16 on the GPU");
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  RLX_CHECK(device_ >= 0 && device_ < count,
            "cuda: device " << device_ << " does not exist (" << count << " GPU" << (count == 1 ? "" : "s") << ")");
  const NcclCollective* group = nullptr;
  if (o.collective) {
    group = dynamic_cast<const NcclCollective*>(o.collective.get());
    RLX_CHECK(group, "cuda: a tensor-parallel group of host ranks cannot sum the GPU's tensors");
    RLX_CHECK(o.rank >= 0 && o.rank < group->ranks() && group->devices()[size_t(o.rank)] == device_,
              "cuda: rank " << o.rank << " of the group is not on device " << device_);
  }
  grouped_ = group != nullptr;
  DeviceScope scope(device_);
  prepare_device_kernels();
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream creation");
  // A new arena starts as NaN bytes, so anything a kernel fails to write shows.
  share_ = o.arena_share ? o.arena_share : make_arena_share();
  bool fresh = false;
  auto alloc = [](uint64_t bytes) -> uint8_t* {
    // Sizes come from model files and flags: say what was asked and what is free.
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "memory query");
    RLX_CHECK(bytes <= free_bytes, "cuda: the graph asks for an arena of " << bytes << " bytes (" << (bytes >> 20)
                                       << " MiB); the device has " << free_bytes << " bytes (" << (free_bytes >> 20)
                                       << " MiB) free of " << total_bytes << " (a smaller context or batch needs less)");
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

  bool any_matmul = std::any_of(s.thunks.begin(), s.thunks.end(), [](const Thunk& t) {
    return t.kind() == ThunkKind::MatMul || t.kind() == ThunkKind::MatMulQ;
  });
  DeviceResources res{arena_, nullptr, nullptr, 0, o.allow_tf32, make_mask_bias_share(), group, o.rank};
  if (any_matmul) {
    check(cublasLtCreate(&lt_), "cuBLASLt handle");
    check(cudaMalloc(&workspace_, kWorkspaceBytes), "matmul workspace");
    res.lt = lt_;
    res.workspace = workspace_;
    res.workspace_bytes = kWorkspaceBytes;
  }
  for (const Thunk& t : s.thunks) thunks_.push_back(make_device_thunk(t, res));
  omitted_ = omitted_thunks(s, std::getenv("RLX_OMIT"));
  if (matvec_chains_enabled() && std::none_of(omitted_.begin(), omitted_.end(), [](bool b) { return b; }))
    plan_matvec_chains();

  ring_ = std::make_unique<StagingRing>(
      binding_bytes(s.input_bindings), binding_bytes(s.output_bindings), o.ring,
      [](size_t n) {
        uint8_t* p = nullptr;
        check(cudaHostAlloc(reinterpret_cast<void**>(&p), n, cudaHostAllocDefault), "pinned staging");
        return p;
      },
      [](uint8_t* p) { cudaFreeHost(p); });
  done_.resize(ring_->slots());
  for (cudaEvent_t& e : done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event creation");
  if (parse_trace_env(std::getenv("RLX_TRACE")).decode) {
    timed_start_.resize(ring_->slots());
    timed_end_.resize(ring_->slots());
    for (cudaEvent_t& e : timed_start_) check(cudaEventCreate(&e), "event creation");
    for (cudaEvent_t& e : timed_end_) check(cudaEventCreate(&e), "event creation");
  }

  mode_ = resolve_exec_mode(o.mode, std::getenv("RLX_EXEC"), s);
  thunk_kernel_nodes_.assign(thunks_.size(), 0);
  if (mode_ == ExecMode::Graph) {
    measure_thunk_nodes();
    for (size_t slot = 0; slot < ring_->slots(); ++slot)
      forward_.push_back(std::make_unique<RecordedThunk>(
          stream_, [&] { encode_forward(slot, false); }, "the forward graph"));
    forward_nodes_ = forward_.front()->nodes();
  }
  schedule_string_.assign(thunks_.size(), mode_ == ExecMode::Graph ? '+' : '-');
  check(cudaStreamSynchronize(stream_), "prepare");
  tracer_.prepared(s, exec_mode_name(mode_), schedule_string_);
}

CudaExecutable::~CudaExecutable() {
  DeviceScope scope(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  forward_.clear();
  kernels_.reset();
  for (cudaEvent_t e : {kernels_start_, kernels_end_})
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : timed_start_) cudaEventDestroy(e);
  for (cudaEvent_t e : timed_end_) cudaEventDestroy(e);
  for (cudaEvent_t e : done_)
    if (e) cudaEventDestroy(e);
  ring_.reset();
  chain_at_.clear();
  thunks_.clear();
  if (workspace_) cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaExecutable::measure_thunk_nodes() {
  for (size_t i = 0; i < thunks_.size(); ++i) {
    // A collective recorded alone and never launched would put its
    // communicator out of step with the other ranks': counted as NCCL's one
    // kernel. Without a group it is a copy, recorded like any thunk.
    const ThunkKind kind = schedule_.thunks[i].kind();
    if (grouped_ && (kind == ThunkKind::AllReduce || kind == ThunkKind::AllGather)) {
      thunk_kernel_nodes_[i] = 1;
      continue;
    }
    cudaGraph_t g = capture(stream_, [&] { execute_thunk(i, false); }, "recording " + schedule_.thunks[i].label);
    thunk_kernel_nodes_[i] = count_nodes(g).kernels;
    cudaGraphDestroy(g);
  }
}

void CudaExecutable::execute_thunk(size_t i, bool count) {
  if (!omitted_.empty() && omitted_[i]) return;
  thunks_[i]->execute(LaunchContext{arena_, stream_, schedule_.thunks[i].label.c_str()});
  if (count) ++counters_.perop_launches;
}

void CudaExecutable::plan_matvec_chains() {
  chain_at_.resize(thunks_.size());
  chain_labels_.resize(thunks_.size());
  for (size_t i = 0; i < thunks_.size();) {
    // The longest run from i of one kind (dense, or quantized of one format) and dtype.
    std::vector<MatMulParams> dense;
    std::vector<MatMulQParams> quantized;
    size_t j = i;
    for (; j < thunks_.size() && j - i < size_t(kMaxChainOps); ++j) {
      const ChainableProduct c = thunks_[j]->chainable_product();
      if (c.dense && quantized.empty() && (dense.empty() || c.dense->dtype == dense.front().dtype))
        dense.push_back(*c.dense);
      else if (c.quantized && dense.empty() &&
               (quantized.empty() ||
                (c.quantized->dtype == quantized.front().dtype && c.quantized->quant == quantized.front().quant)))
        quantized.push_back(*c.quantized);
      else
        break;
    }
    if (j - i < 2) {
      i = std::max(j, i + 1);
      continue;
    }
    chain_at_[i] = dense.empty() ? make_matvec_chain(quantized) : make_matvec_chain(dense);
    chain_labels_[i] = std::string(dense.empty() ? "quantized " : "") + "matvec chain of " + std::to_string(j - i) +
                       " from " + schedule_.thunks[i].label;
    ++matvec_chains_;
    chained_products_ += int(j - i);
    i = j;
  }
}

void CudaExecutable::enqueue_thunks(bool count) {
  for (size_t i = 0; i < thunks_.size();) {
    if (!chain_at_.empty() && chain_at_[i]) {
      chain_at_[i]->execute(LaunchContext{arena_, stream_, chain_labels_[i].c_str()});
      if (count) counters_.perop_launches += chain_at_[i]->size();
      i += chain_at_[i]->size();
    } else {
      execute_thunk(i++, count);
    }
  }
}

void CudaExecutable::encode_forward(size_t slot, bool count) {
  const auto& ins = schedule_.input_bindings;
  for (size_t i = 0; i < ins.size(); ++i) copy_binding(arena_, ins[i], ring_->input(slot, i), true, stream_);
  enqueue_thunks(count);
  const auto& outs = schedule_.output_bindings;
  for (size_t i = 0; i < outs.size(); ++i) copy_binding(arena_, outs[i], ring_->output(slot, i), false, stream_);
}

void CudaExecutable::finish(size_t slot) {
  check(cudaEventSynchronize(done_[slot]), "run in slot " + std::to_string(slot));
}

void CudaExecutable::write_binding(const Binding& b, const void* src) {
  DeviceScope scope(device_);
  RLX_CHECK(b.offset + (b.outer > 1 ? uint64_t(b.outer - 1) * b.outer_stride_bytes + b.inner_bytes : b.bytes()) <=
                schedule_.arena_bytes,
            "binding '" + b.name + "' lies outside the arena");
  // Runs in flight read the arena; the graph reads it too, so replays see this.
  check(cudaStreamSynchronize(stream_), "write of '" + b.name + "'");
  if (b.bytes() == 0) return;
  // On the run stream, then waited for: a plain cudaMemcpy from pageable
  // memory may return before its DMA lands, and the run stream (non-blocking)
  // is not ordered after it, so the next run could read half-written bytes.
  if (b.outer <= 1)
    check(cudaMemcpyAsync(arena_ + b.offset, src, b.bytes(), cudaMemcpyHostToDevice, stream_),
          "write of '" + b.name + "'");
  else
    check(cudaMemcpy2DAsync(arena_ + b.offset, b.outer_stride_bytes, src, b.inner_bytes, b.inner_bytes, b.outer,
                            cudaMemcpyHostToDevice, stream_),
          "write of '" + b.name + "'");
  check(cudaStreamSynchronize(stream_), "write of '" + b.name + "'");
}

// Executables sharing an arena each have their own constants at the same
// offsets; whoever runs puts its own back first. (Shared runs never overlap.)
void CudaExecutable::upload_constants_if_needed() {
  if (!share_->claim_constants(this)) return;
  check(cudaDeviceSynchronize(), "before uploading constants");
  for (const auto& [offset, bytes] : schedule_.constants)  // on the run stream, as write_binding
    check(cudaMemcpyAsync(arena_ + offset, bytes->data(), bytes->size(), cudaMemcpyHostToDevice, stream_),
          "constant upload");
  check(cudaStreamSynchronize(stream_), "constant upload");
}

uint64_t CudaExecutable::submit(const std::vector<const void*>& inputs) {
  DeviceScope scope(device_);
  upload_constants_if_needed();
  RLX_CHECK(inputs.size() == schedule_.input_bindings.size(),
            "run: expected " << schedule_.input_bindings.size() << " inputs, got " << inputs.size());
  size_t slot = 0;
  const uint64_t ticket = ring_->begin([this](size_t s) { finish(s); }, &slot);
  const auto t_encode = std::chrono::steady_clock::now();
  ring_->stage_inputs(slot, inputs);
  if (!timed_start_.empty()) check(cudaEventRecord(timed_start_[slot], stream_), "event record");
  if (mode_ == ExecMode::Graph) {
    forward_[slot]->execute(LaunchContext{arena_, stream_, "forward"});
    ++counters_.graph_launches;
  } else {
    encode_forward(slot, true);
  }
  if (!timed_end_.empty()) check(cudaEventRecord(timed_end_[slot], stream_), "event record");
  check(cudaEventRecord(done_[slot], stream_), "event record");
  last_timed_slot_ = slot;
  last_encode_us_ = micros_since(t_encode);
  ++counters_.forwards;
  return ticket;
}

void CudaExecutable::wait(uint64_t ticket, const std::vector<void*>& outputs) {
  DeviceScope scope(device_);
  ring_->collect(ticket, [this](size_t s) { finish(s); }, outputs);
  if (!timed_end_.empty()) {  // the run just collected: its slot's events are done
    float ms = 0;
    check(cudaEventElapsedTime(&ms, timed_start_[last_timed_slot_], timed_end_[last_timed_slot_]), "event timing");
    last_device_us_ = double(ms) * 1e3;
  }
  tracer_.after_run(schedule_, stream_, [this](size_t i) { execute_thunk(i, false); });
}

void CudaExecutable::run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t ticket = submit(inputs);
  const auto t1 = std::chrono::steady_clock::now();
  wait(ticket, outputs);
  tracer_.ran(exec_mode_name(mode_), last_encode_us_, std::chrono::duration<double, std::micro>(t1 - t0).count(),
              micros_since(t1));
}

std::vector<double> CudaExecutable::time_device_forwards(int runs) {
  DeviceScope scope(device_);
  upload_constants_if_needed();
  check(cudaStreamSynchronize(stream_), "before timing the forward's kernels");
  if (!kernels_start_) {
    check(cudaEventCreate(&kernels_start_), "event creation");
    check(cudaEventCreate(&kernels_end_), "event creation");
  }
  auto enqueue = [&] { enqueue_thunks(false); };
  if (mode_ == ExecMode::Graph && !kernels_)
    kernels_ = std::make_unique<RecordedThunk>(stream_, enqueue, "the forward's kernels");
  std::vector<double> us;
  for (int r = 0; r < runs; ++r) {
    check(cudaEventRecord(kernels_start_, stream_), "event record");
    if (kernels_) kernels_->execute(LaunchContext{arena_, stream_, "the forward's kernels"});
    else enqueue();
    check(cudaEventRecord(kernels_end_, stream_), "event record");
    check(cudaEventSynchronize(kernels_end_), "timing the forward's kernels");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, kernels_start_, kernels_end_), "event timing");
    us.push_back(double(ms) * 1e3);
  }
  return us;
}

std::shared_ptr<float> CudaExecutable::device_floats(size_t count) {
  DeviceScope scope(device_);
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  float* p = nullptr;
  check(cudaMalloc(&p, bytes), "a device buffer of " + std::to_string(count) + " floats");
  check(cudaMemset(p, 0xff, bytes), "device buffer poison");  // NaN until written, as the arena starts
  return std::shared_ptr<float>(p, [](float* q) { cudaFree(q); });
}

void CudaExecutable::export_output_rows(size_t output, const std::vector<int32_t>& dst_rows, int dim, bool normalize,
                                        float* dst) {
  DeviceScope scope(device_);
  RLX_CHECK(output < schedule_.output_bindings.size(), "export of output rows: no output " << output);
  const Binding& b = schedule_.output_bindings[output];
  RLX_CHECK(b.outer <= 1 && b.shape.size() == 2,
            "export of output rows: '" << b.name << "' is not a contiguous [rows, cols] output");
  RLX_CHECK(int64_t(dst_rows.size()) <= b.shape[0],
            "export of output rows: " << dst_rows.size() << " rows asked of '" << b.name << "', which has "
                                      << b.shape[0]);
  if (dst_rows.empty()) return;
  const size_t bytes = dst_rows.size() * sizeof(int32_t);
  void* rows = nullptr;
  check(cudaMallocAsync(&rows, bytes, stream_), "export of output rows");
  check(cudaMemcpyAsync(rows, dst_rows.data(), bytes, cudaMemcpyHostToDevice, stream_), "export of output rows");
  export_rows_f32(arena_ + b.offset, b.dtype, b.shape[1], static_cast<const int32_t*>(rows), int(dst_rows.size()),
                  dim, normalize, dst, stream_);
  check(cudaFreeAsync(rows, stream_), "export of output rows");
  check(cudaStreamSynchronize(stream_), "export of output rows");
}

int CudaExecutable::device_index() const { return device_; }

std::string CudaExecutable::summary() const {
  return std::string("mode ") + exec_mode_name(mode_) + ", " + std::to_string(counters_.graph_launches) +
         " graph launches, " + std::to_string(counters_.perop_launches) + " per-op thunk launches over " +
         std::to_string(counters_.forwards) + " runs" +
         (matvec_chains_ ? ", " + std::to_string(chained_products_) + " products in " + std::to_string(matvec_chains_) +
                               " matvec chains"
                         : std::string());
}

}  // namespace rlx::cuda
