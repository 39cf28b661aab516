// The CPU backend: the reference implementation of every thunk kind.
#pragma once
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/cpu_registry.h"

namespace rlx::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  std::string name() const override { return "cpu"; }
  bool supports(ThunkKind k, DType dt) const override { return registry_.has(k, dt); }
  std::unique_ptr<BackendExecutable> prepare(const Schedule& s, const CompileOptions& o) override;
  const CpuRegistry& registry() const { return registry_; }

 private:
  CpuRegistry registry_;
};

// Matmul batch entries run by each GEMM path and packings made, for tests.
struct CpuMatmulRuns {
  uint64_t packed = 0, library = 0, packs_made = 0;
  uint64_t packed_bf16 = 0;  // products on the bf16 kernel (not counted in packed)
  uint64_t packed_int8 = 0;  // products on the int8 kernel (not counted in packed)
};
CpuMatmulRuns matmul_runs(const BackendExecutable& exe);

}  // namespace rlx::cpu
