#include "tools/cli_options.h"

rlx::DType dtype_option(const std::string& s) {
  if (s == "f32") return rlx::DType::F32;
  if (s == "f16") return rlx::DType::F16;
  if (s == "bf16") return rlx::DType::BF16;
  RLX_FAIL("--dtype must be f32, f16 or bf16, not '" << s << "'");
}

rlx::Device device_option(const std::string& s) {
  if (s == "cpu") return rlx::Device::Cpu;
  if (s == "cuda") {
    RLX_CHECK(rlx::cuda_available(), "--device cuda: no CUDA device, or rlx was built without CUDA");
    return rlx::Device::Cuda;
  }
  RLX_CHECK(s == "auto", "--device must be auto, cpu or cuda, not '" << s << "'");
  return rlx::cuda_available() ? rlx::Device::Cuda : rlx::Device::Cpu;
}

rlx::ExecMode mode_option(const std::string& s) {
  if (s == "perop") return rlx::ExecMode::PerOp;
  if (s == "graph") return rlx::ExecMode::Graph;
  RLX_CHECK(s == "auto", "--mode must be auto, perop or graph, not '" << s << "'");
  return rlx::ExecMode::Auto;
}

void check_count(const char* option, int64_t value, int64_t lo, int64_t hi) {
  RLX_CHECK(value >= lo && value <= hi, option << " " << value << " is outside [" << lo << ", " << hi << "]");
}

void check_batch_seq(int64_t batch, int64_t seq) {
  check_count("--batch", batch, 1, 1024);
  check_count("--seq", seq, 1, 65536);
  RLX_CHECK(batch * seq <= (int64_t(1) << 20),
            "--batch " << batch << " x --seq " << seq << " is more than 2^20 tokens in one run");
}
