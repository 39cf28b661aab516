// f32 GEMM through OpenBLAS: the current, every-processor build that
// scripts/setup unpacks (scipy-openblas32, symbols prefixed scipy_) or, when
// that is absent, the system's (Debian 12's 0.3.21 runs SSE3 kernels on
// processors newer than it).
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_gemm_nt.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_vec_math.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#ifdef RLX_SCIPY_OPENBLAS
#include <scipy_openblas/cblas.h>
#define RLX_BLAS(name) scipy_##name
#define RLX_BLAS_SOURCE "scipy-openblas32"
#else
#include <cblas.h>
#define RLX_BLAS(name) name
#define RLX_BLAS_SOURCE "system"
#endif

namespace rlx::cpu {
namespace {

// Products against weights (B transposed) with at most this many rows run
// unpacked (cpu_gemm_nt.cc); above it, packing pays for itself. Measured on
// MiniLM, one thread: m = 32 unpacked 34-39 ms vs OpenBLAS 45-51; m = 64
// 51-54 vs 55-56; m = 128 146-156 vs 110-122.
constexpr int64_t kUnpackedMaxRows = 64;

void trace_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("RLX_TRACE"))
      std::fprintf(stderr, "rlx cpu: matmul through %s, single-threaded slices on a pool of %d; own kernels for %s\n",
                   gemm_library().c_str(), run_threads(), cpu_vector_isa());
  });
}

}  // namespace

std::string gemm_library() {
  std::string config = RLX_BLAS(openblas_get_config)();  // "OpenBLAS 0.3.34 DYNAMIC_ARCH ..."
  size_t v = config.find(' '), end = v == std::string::npos ? v : config.find(' ', v + 1);
  std::string version = config.substr(0, end);
  return version + " (" RLX_BLAS_SOURCE "), kernel " + RLX_BLAS(openblas_get_corename)();
}

GemmPath gemm_path(bool trans_a, bool trans_b, int64_t m) {
  static const bool library_only = std::getenv("RLX_GEMM_LIBRARY_ONLY") != nullptr;  // for measurement
  return !trans_a && trans_b && m <= kUnpackedMaxRows && !library_only ? GemmPath::Unpacked : GemmPath::Library;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc, int threads) {
  // The thread count is the library's global: set it only when it changes.
  static std::atomic<int> current{-1};
  if (threads > 0 && current.exchange(threads) != threads) RLX_BLAS(openblas_set_num_threads)(threads);
  trace_once();
  if (gemm_path(trans_a, trans_b, m) == GemmPath::Unpacked) {
    gemm_nt_unpacked(m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
  RLX_BLAS(cblas_sgemm)(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                        int(m), int(n), int(k), 1.f, a, int(lda), b, int(ldb), 0.f, c, int(ldc));
}

}  // namespace rlx::cpu
