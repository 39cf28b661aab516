// Tracing a CUDA executable: RLX_TRACE (the schedule at prepare, one line
// per run) and, on request, a Chrome trace of per-thunk GPU times measured
// with events over one extra per-op pass. Formatting is backends/trace.h.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <string>

#include "backends/trace.h"

namespace rlx::cuda {

class Tracer {
 public:
  // Reads RLX_TRACE; chrome_json is CompileOptions::trace_json ("" = none).
  explicit Tracer(std::string chrome_json);

  void prepared(const Schedule& s, const char* mode, const std::string& schedule_string) const;
  void ran(const char* mode, double encode_us, double submit_us, double wait_us) const;
  bool wants_runs() const { return request_.runs; }

  // Writes the Chrome trace once, after the first finished run: times each
  // thunk (execute_thunk(i) enqueues thunk i on `stream`) between events.
  void after_run(const Schedule& s, cudaStream_t stream, const std::function<void(size_t)>& execute_thunk);

 private:
  TraceRequest request_;
  std::string chrome_json_;
};

inline double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace rlx::cuda
