// The CUDA backend: claims come from the kernel registry; prepare builds a
// CudaExecutable. librlx_cuda.so's entry point, found by backends/cuda_loader.cc;
// it answers nullptr when no device is present.
#include <cuda_runtime.h>

#include <mutex>
#include <set>

#include "backends/backend.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nccl_collective.h"

namespace rlx {
namespace {

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  bool supports(ThunkKind k, DType dt) const override { return cuda::cuda_registry().has(k, dt); }
  std::unique_ptr<BackendExecutable> prepare(const Schedule& s, const CompileOptions& o) override {
    return std::make_unique<cuda::CudaExecutable>(s, o);
  }
  std::shared_ptr<Collective> make_collective(const std::vector<int>& devices) override {
    return std::make_shared<cuda::NcclCollective>(devices);
  }
};

}  // namespace

void cuda::prepare_device_kernels() {
  static std::mutex mu;
  static std::set<int> prepared;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return;
  std::lock_guard<std::mutex> lock(mu);
  if (prepared.insert(device).second) prepare_attention_kernels();
}

}  // namespace rlx

// The entry point librlx.so looks up when something first asks for CUDA.
extern "C" __attribute__((visibility("default"))) rlx::Backend* rlx_cuda_backend() {
  static const bool present = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return false;
    rlx::cuda::prepare_attention_kernels();
    return true;
  }();
  static rlx::CudaBackend backend;
  return present ? &backend : nullptr;
}
