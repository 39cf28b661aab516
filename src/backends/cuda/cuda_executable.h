// A schedule prepared on the GPU: one arena, thunks initialized once, and the
// chosen execution mode (per op, or the whole forward recorded once per ring
// slot). It composes its parts: a staging ring (backends/staging_ring.h) for
// pipelined runs, recorded forwards (graph_recorder.h) and a tracer
// (tracer.h). The counters and strings below let tests assert which path ran.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/device_thunk.h"
#include "backends/cuda/graph_recorder.h"
#include "backends/cuda/matvec_chain.h"
#include "backends/cuda/tracer.h"
#include "backends/staging_ring.h"

namespace rlx::cuda {

struct ExecCounters {
  uint64_t forwards = 0;        // runs submitted
  uint64_t graph_launches = 0;  // cudaGraphLaunch calls of a recorded forward
  uint64_t perop_launches = 0;  // thunks executed outside a recorded graph
};

class CudaExecutable final : public BackendExecutable {
 public:
  CudaExecutable(const Schedule& s, const CompileOptions& o);
  ~CudaExecutable() override;

  void write_binding(const Binding& b, const void* src) override;
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) override;
  uint64_t submit(const std::vector<const void*>& inputs) override;
  void wait(uint64_t ticket, const std::vector<void*>& outputs) override;
  std::string summary() const override;
  double last_device_us() const override { return last_device_us_; }
  std::vector<double> time_device_forwards(int runs) override;
  std::shared_ptr<float> device_floats(size_t count) override;
  void export_output_rows(size_t output, const std::vector<int32_t>& dst_rows, int dim, bool normalize,
                          float* dst) override;
  int device_index() const override;

  ExecMode mode() const { return mode_; }
  const ExecCounters& counters() const { return counters_; }
  // Kernel nodes each thunk adds to a graph, measured at initialize by
  // recording the thunk alone (0 in per-op mode).
  const std::vector<int>& thunk_kernel_nodes() const { return thunk_kernel_nodes_; }
  // Kernel and memcpy nodes of the recorded whole-forward graph (graph mode).
  int graph_kernel_nodes() const { return forward_nodes_.kernels; }
  int graph_memcpy_nodes() const { return forward_nodes_.memcpys; }
  // Nodes of the kernels-only graph time_device_forwards replays (graph
  // mode, once timed; zero before).
  GraphNodes device_timing_nodes() const { return kernels_ ? kernels_->nodes() : GraphNodes{}; }
  // One character per thunk: '+' recorded, '-' launched per op.
  const std::string& schedule_string() const { return schedule_string_; }
  uint8_t* arena() const { return arena_; }
  // Runs of one-row products launched as one chain (matvec_chain.h), and
  // the products they hold.
  int matvec_chains() const { return matvec_chains_; }
  int chained_products() const { return chained_products_; }

 private:
  // Enqueues one forward through `slot`'s staging; under capture this is what
  // gets recorded, so recording and per-op execution share the code.
  void encode_forward(size_t slot, bool count);
  void execute_thunk(size_t i, bool count);
  // Every thunk in order, a chain in place of the products it holds.
  void enqueue_thunks(bool count);
  void plan_matvec_chains();
  void finish(size_t slot);
  void measure_thunk_nodes();
  void upload_constants_if_needed();

  Schedule schedule_;
  ExecMode mode_ = ExecMode::PerOp;
  int device_ = 0;  // every call runs with it current (DeviceScope)
  bool grouped_ = false;  // a rank of a tensor-parallel group (NCCL)
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<ArenaShare> share_;  // owns the arena
  uint8_t* arena_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::vector<std::unique_ptr<DeviceThunk>> thunks_;
  std::vector<int> thunk_kernel_nodes_;
  std::vector<bool> omitted_;  // RLX_OMIT (measuring only): thunks left out of every forward
  std::vector<std::unique_ptr<MatVecChain>> chain_at_;  // per thunk: the chain starting there, if any
  std::vector<std::string> chain_labels_;               // per thunk, where a chain starts
  int matvec_chains_ = 0, chained_products_ = 0;
  std::unique_ptr<StagingRing> ring_;                   // pinned input/output slots and tickets
  std::vector<cudaEvent_t> done_;                       // per slot: its last run finished
  // RLX_TRACE=decode: timing events around each run, per slot.
  std::vector<cudaEvent_t> timed_start_, timed_end_;
  double last_device_us_ = -1;
  size_t last_timed_slot_ = 0;
  std::vector<std::unique_ptr<RecordedThunk>> forward_;  // graph mode: the whole forward per slot
  std::unique_ptr<RecordedThunk> kernels_;  // graph mode: the forward without its copies, made when timed
  cudaEvent_t kernels_start_ = nullptr, kernels_end_ = nullptr;
  GraphNodes forward_nodes_;
  ExecCounters counters_;
  std::string schedule_string_;
  Tracer tracer_;
  double last_encode_us_ = 0;
};

}  // namespace rlx::cuda
