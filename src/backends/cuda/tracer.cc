#include "backends/cuda/tracer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {

Tracer::Tracer(std::string chrome_json)
    : request_(parse_trace_env(std::getenv("RLX_TRACE"))), chrome_json_(std::move(chrome_json)) {}

void Tracer::prepared(const Schedule& s, const char* mode, const std::string& schedule_string) const {
  if (request_.schedule) std::fputs(schedule_summary(s, "cuda", mode, schedule_string).c_str(), stderr);
}

void Tracer::ran(const char* mode, double encode_us, double submit_us, double wait_us) const {
  if (request_.runs) std::fputs(run_line(mode, encode_us, submit_us, wait_us).c_str(), stderr);
}

void Tracer::after_run(const Schedule& s, cudaStream_t stream, const std::function<void(size_t)>& execute_thunk) {
  if (chrome_json_.empty()) return;
  const std::string path = chrome_json_;
  chrome_json_.clear();
  const size_t n = s.thunks.size();
  std::vector<cudaEvent_t> ev(n + 1);
  for (auto& e : ev) check(cudaEventCreate(&e), "trace event");
  // Give the host time to queue every thunk before the device starts on them
  // (20 us each is far more than a launch takes).
  enqueue_gpu_delay(stream, 20000ull * n + 100000);
  check(cudaEventRecord(ev[0], stream), "trace event");
  for (size_t i = 0; i < n; ++i) {
    execute_thunk(i);
    check(cudaEventRecord(ev[i + 1], stream), "trace event");
  }
  check(cudaStreamSynchronize(stream), "trace pass");
  std::vector<float> ms(n, 0.f);
  for (size_t i = 0; i < n; ++i) check(cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]), "trace timing");
  for (auto& e : ev) cudaEventDestroy(e);
  std::ofstream f(path);
  RLX_CHECK(f.good(), "cannot write trace file " + path);
  f << chrome_trace_json(thunk_times(s, ms));
}

}  // namespace rlx::cuda
