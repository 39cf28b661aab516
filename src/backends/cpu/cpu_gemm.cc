// f32 GEMM through OpenBLAS: the current, every-processor build that
// scripts/setup unpacks (scipy-openblas32, symbols prefixed scipy_) or, when
// that is absent, the system's (Debian 12's 0.3.21 runs SSE3 kernels on
// processors newer than it).
#include "backends/cpu/cpu_gemm.h"
#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_vec_math.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <strings.h>

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

bool gemm_library_avx512() {
  static const bool avx512 = [] {
    const std::string core = RLX_BLAS(openblas_get_corename)();
    for (const char* c : {"skylakex", "cooperlake", "sapphirerapids"})
      if (strcasecmp(core.c_str(), c) == 0) return true;
    return false;
  }();
  return avx512;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc, int threads) {
  // The thread count is the library's global: set it only when it changes.
  static std::atomic<int> current{-1};
  if (threads > 0 && current.exchange(threads) != threads) RLX_BLAS(openblas_set_num_threads)(threads);
  trace_once();
  RLX_BLAS(cblas_sgemm)(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                        int(m), int(n), int(k), 1.f, a, int(lda), b, int(ldb), 0.f, c, int(ldc));
}

// Columns are split when B is the larger operand (weights: n >= m), so each
// thread packs only its part of B; splitting rows would have every thread
// pack all of B (that packing was 40% of matmul time at M = 64 per thread).
// Slices are a few per thread, handed out dynamically.
void gemm_f32_sliced(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc, const float* bias, Activation act,
                     int threads) {
  const bool epilogue = bias || act != Activation::None;
  auto finish = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    if (k == 0)  // empty inner product: the library would leave c untouched
      for (int64_t i = r0; i < r0 + rows; ++i)
        for (int64_t j = c0; j < c0 + cols; ++j) c[i * ldc + j] = 0.f;
    if (epilogue)
      for (int64_t i = r0; i < r0 + rows; ++i)
        activation_row(act, c + i * ldc + c0, bias ? bias + c0 : nullptr, c + i * ldc + c0, cols);
  };
  const bool split_cols = n >= m;
  // Two slices per thread (one when alone): every slice re-packs the other
  // operand. Column slices are whole 64-byte lines of C (16 floats) so threads
  // never share one.
  const int64_t extent = split_cols ? n : m, align = split_cols ? 16 : 1;
  const int64_t slices = threads > 1 ? 2 * threads : 1;
  const int64_t grain = std::max(align, (extent + slices - 1) / slices + align - 1) / align * align;
  const int64_t units = (extent + grain - 1) / grain;
  parallel_ranges(units, threads, [&](int64_t u0, int64_t u1, int) {
    const int64_t lo = std::min(extent, u0 * grain), len = std::min(extent, u1 * grain) - lo;
    if (len <= 0) return;
    if (split_cols) {  // columns lo.. of op(B) and C
      const float* bs = trans_b ? b + lo * ldb : b + lo;
      if (k > 0) gemm_f32(trans_a, trans_b, m, len, k, a, lda, bs, ldb, c + lo, ldc, 1);
      finish(0, m, lo, len);
    } else {  // rows lo.. of op(A) and C
      const float* as = trans_a ? a + lo : a + lo * lda;
      if (k > 0) gemm_f32(trans_a, trans_b, len, n, k, as, lda, b, ldb, c + lo * ldc, ldc, 1);
      finish(lo, len, 0, n);
    }
  });
}

}  // namespace rlx::cpu
