// Compile a graph into an executable; set params; run with named inputs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/graph.h"

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

enum class Device { Auto, Cpu, Cuda };

// Executables compiled with one ArenaShare use one arena on one device. The
// first one compiled sizes it, so compile the largest shape first; the others
// must fit and lay out their params identically (the same graph builder at
// other batch or sequence sizes), so params set through any of them are set
// for all. Runs of executables sharing an arena must not overlap in time.
// reserve_bytes: the least the arena will be (see planned_arena_bytes).
class ArenaShare;
std::shared_ptr<ArenaShare> make_arena_share(uint64_t reserve_bytes = 0);
enum class ExecMode { Auto, PerOp, Graph, Segmented };

struct CompileOptions {
  Device device = Device::Cpu;
  bool fuse = true;              // run the fusion passes
  ExecMode mode = ExecMode::Auto;  // CUDA only; RLX_EXEC overrides
  int threads = 0;               // CPU threads, 0 = all cores
  int ring = 4;                  // CUDA: in-flight slots for submit/wait
  std::string trace_json;        // CUDA: write a Chrome trace of per-thunk GPU times here
  std::shared_ptr<ArenaShare> arena_share;  // see make_arena_share()
  bool allow_tf32 = false;       // CUDA: f32 matmuls may round inputs to TF32 (faster, ~1e-3 error)
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
  // Takes the params `other` has set: both share one arena (same layout).
  void share_params_with(const Executable& other);
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
  BackendExecutable& backend() { return *backend_; }

 private:
  std::vector<const void*> check_inputs(const std::map<std::string, HostTensor>& inputs) const;
  std::mutex& run_mutex() const;  // the arena share's, else own_mutex_
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<BackendExecutable> backend_;
  CompileReport report_;
  std::vector<bool> param_set_;
  CompileOptions opts_;
  mutable std::mutex own_mutex_;
};

std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opts = {});

// The arena size compile(g, opts) would plan, without preparing a backend.
uint64_t planned_arena_bytes(const Graph& g, const CompileOptions& opts = {});

bool cuda_available();  // a CUDA device is present and the backend was built

}  // namespace rlx
