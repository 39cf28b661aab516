// A schedule prepared on the GPU: one arena, thunks initialized once, and the
// chosen execution mode (per op, one recorded graph, or recorded segments).
// The counters and strings below let tests assert which path actually ran.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/device_thunk.h"

namespace rlx::cuda {

struct ExecCounters {
  uint64_t forwards = 0;         // runs submitted
  uint64_t graph_launches = 0;   // cudaGraphLaunch calls (whole forward or segment)
  uint64_t perop_launches = 0;   // thunks executed outside a recorded graph
};

class CudaExecutable final : public BackendExecutable {
 public:
  CudaExecutable(const Schedule& s, const CompileOptions& o);
  ~CudaExecutable() override;

  void write_binding(const Binding& b, const void* src) override;
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) override;
  uint64_t submit(const std::vector<const void*>& inputs) override;
  void wait(uint64_t ticket, const std::vector<void*>& outputs) override;

  ExecMode mode() const { return mode_; }
  const ExecCounters& counters() const { return counters_; }
  // Kernel nodes each thunk adds to a graph, measured at initialize by
  // recording the thunk alone (0 for thunks that are never recorded).
  const std::vector<int>& thunk_kernel_nodes() const { return thunk_kernel_nodes_; }
  // Kernel and memcpy nodes of the recorded whole-forward graph (graph mode),
  // or summed over the recorded segments (segmented mode).
  int graph_kernel_nodes() const { return graph_kernel_nodes_; }
  int graph_memcpy_nodes() const { return graph_memcpy_nodes_; }
  int segment_count() const { return int(segments_.size()); }
  // One character per thunk: '+' recorded, '-' launched per op.
  const std::string& schedule_string() const { return schedule_string_; }
  // Why thunks run per op in segmented mode, one line each.
  const std::vector<std::string>& per_op_reasons() const { return per_op_reasons_; }
  uint8_t* arena() const { return arena_; }

 private:
  struct Slot {
    uint8_t* in = nullptr;   // pinned input staging
    uint8_t* out = nullptr;  // pinned output staging
    cudaEvent_t done = nullptr;
    cudaGraphExec_t forward = nullptr;  // graph mode: the whole forward for this slot
    uint64_t pending = 0;               // ticket in flight and not yet waited for
  };
  struct Segment {
    size_t first = 0, last = 0;  // thunk range [first, last)
    cudaGraphExec_t exec = nullptr;
  };

  void choose_mode(const CompileOptions& o);
  void measure_thunk_nodes();
  void record_forward_graphs();
  void record_segments();
  // Enqueues one forward through `slot`'s staging; under capture this is what
  // gets recorded, so recording and per-op execution share the code.
  void encode_forward(Slot& slot, bool count);
  void execute_thunk(size_t i, bool count);
  void copy_outputs(const Slot& slot, const std::vector<void*>& outputs) const;
  void write_trace_json();
  void upload_constants_if_needed();
  cudaGraph_t capture(const std::function<void()>& enqueue, const std::string& what);

  Schedule schedule_;
  ExecMode mode_ = ExecMode::PerOp;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<ArenaShare> share_;  // owns the arena
  uint8_t* arena_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::vector<std::unique_ptr<DeviceThunk>> thunks_;
  std::vector<int> thunk_kernel_nodes_;
  std::vector<uint64_t> in_offsets_, out_offsets_;  // binding -> staging offset
  uint64_t in_bytes_ = 0, out_bytes_ = 0;
  std::vector<Slot> slots_;
  std::vector<Segment> segments_;
  std::vector<int> segment_of_;  // thunk -> segment index or -1
  std::map<uint64_t, std::vector<uint8_t>> finished_;  // outputs of slots reused before wait
  uint64_t next_ticket_ = 1;
  ExecCounters counters_;
  int graph_kernel_nodes_ = 0, graph_memcpy_nodes_ = 0;
  std::string schedule_string_;
  std::vector<std::string> per_op_reasons_;
  bool trace_runs_ = false;
  std::string trace_json_;
  double last_encode_us_ = 0, last_submit_us_ = 0;
};

}  // namespace rlx::cuda
