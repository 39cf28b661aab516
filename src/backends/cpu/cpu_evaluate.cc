#include "backends/cpu/cpu_evaluate.h"

#include "backends/backend.h"

namespace rlx {

std::vector<std::vector<uint8_t>> evaluate_on_cpu(const Schedule& s, const std::vector<const void*>& inputs) {
  RLX_CHECK(s.param_bindings.empty(), "evaluate_on_cpu: the schedule has params nobody can set");
  CompileOptions opts;
  opts.device = Device::Cpu;
  opts.threads = 1;
  std::unique_ptr<BackendExecutable> exe = cpu_backend().prepare(s, opts);
  std::vector<std::vector<uint8_t>> outs(s.output_bindings.size());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].resize(s.output_bindings[i].bytes());
    ptrs.push_back(outs[i].data());
  }
  exe->run(inputs, ptrs);
  return outs;
}

}  // namespace rlx
