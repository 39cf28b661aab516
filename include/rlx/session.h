// Compile a graph into an executable; set params; run with named inputs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/options.h"

namespace rlx {

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  static HostTensor from_f32(Shape shape, const std::vector<float>& v, DType dt = DType::F32);
  static HostTensor from_i32(Shape shape, const std::vector<int32_t>& v);
  std::vector<float> to_f32() const;
  std::vector<int32_t> to_i32() const;
  int64_t numel() const { return rlx::numel(shape); }
};

struct CompileReport {
  size_t nodes_before = 0, nodes_after = 0;
  std::map<std::string, int> thunk_histogram;
  size_t thunk_count = 0;
  std::string schedule;
  std::string backend;
  uint64_t arena_bytes = 0, peak_live_bytes = 0, intermediate_bytes = 0, param_bytes = 0;
  uint64_t scratch_bytes = 0;  // the reused region for intermediates
};

class BackendExecutable;
struct Schedule;

// Thread safety: the methods of one Executable may be called from several
// threads; runs, submits, waits and set_param are serialised (one at a time,
// over all executables that share an arena), so each run returns what it
// would alone. report(), schedule() and the name lists are read-only and safe.
// backend() gives the backend's object, which is not locked: use it from one
// thread. Executables that share no arena run in parallel.
class Executable {
 public:
  Executable(std::unique_ptr<Schedule> s, std::unique_ptr<BackendExecutable> be, CompileReport r,
             CompileOptions opts = {});
  ~Executable();

  // Shape must match; host data of another float dtype is converted.
  void set_param(const std::string& name, const HostTensor& t);
  void set_param_f32(const std::string& name, const float* data, size_t count);
  // `bytes` of `dt` values (f32, f16 or bf16, e.g. a mapped file's tensor):
  // written as they are when dt is the param's dtype, else converted in one
  // pass.
  void set_param_bytes(const std::string& name, DType dt, const void* data, size_t bytes);
  // Takes the params `other` has set: both share one arena (same layout).
  void share_params_with(const Executable& other);
  // Zeroes every state tensor (the KV cache). State starts zeroed and keeps
  // its contents across runs; executables sharing an arena share it.
  void reset_state();
  std::vector<std::string> state_names() const;
  // Runs so far (run and submit), for callers that assert which executable ran.
  uint64_t run_count() const { return runs_; }
  // Device time of the last run in microseconds where the backend measures
  // it (CUDA under RLX_TRACE=decode), else < 0.
  double last_device_us() const;
  // For benchmarks: the device time of `runs` forwards of the kernels alone,
  // in microseconds each. The inputs of the last run are reused and nothing
  // is copied in or out; each forward is timed by CUDA events around its
  // one launch, as PyTorch's CUDA-graph replays are. Needs a run first (the
  // inputs in the arena) and a schedule without state (it would advance
  // it). Empty where the backend does not measure it (CPU).
  std::vector<double> time_device_forwards(int runs);
  std::map<std::string, HostTensor> run(const std::map<std::string, HostTensor>& inputs);

  // Pipelined runs: submit returns at once; wait returns that run's outputs.
  uint64_t submit(const std::map<std::string, HostTensor>& inputs);
  std::map<std::string, HostTensor> wait(uint64_t ticket);
  std::vector<std::map<std::string, HostTensor>> run_pipelined(
      const std::vector<std::map<std::string, HostTensor>>& batches);

  const CompileReport& report() const { return report_; }
  std::vector<std::string> param_names() const;
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  const Schedule& schedule() const { return *schedule_; }
  // How the backend ran so far ("mode graph, 3 graph launches, ..." on CUDA).
  std::string backend_summary() const;
  BackendExecutable& backend() { return *backend_; }

 private:
  std::vector<const void*> check_inputs(const std::map<std::string, HostTensor>& inputs) const;
  std::mutex& run_mutex() const;  // the arena share's, else own_mutex_
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<BackendExecutable> backend_;
  CompileReport report_;
  std::vector<bool> param_set_;
  CompileOptions opts_;
  uint64_t runs_ = 0;
  mutable std::mutex own_mutex_;
};

std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opts = {});

// The arena size compile(g, opts) would plan, without preparing a backend.
uint64_t planned_arena_bytes(const Graph& g, const CompileOptions& opts = {});

bool cuda_available();  // a CUDA device is present and the backend was built

}  // namespace rlx
