#include "backends/cuda/matmul.h"

#include <atomic>
#include <map>
#include <mutex>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

// The activation cuBLASLt has no epilogue for, in place over the row-major
// output (rows of n valid elements, ldc apart).
template <class T>
__global__ void matmul_activation_kernel(const MatMulParams p, uint8_t* arena) {
  pdl_entry();
  T* out = at<T>(arena, p.out);
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    int64_t j = t % p.n, rest = t / p.n, i = rest % p.m, bt = rest / p.m;
    T& y = out[bt * p.stride_out + i * p.ldc + j];
    y = from_f32<T>(apply_activation(p.act, to_f32(y)));
  }
}

// The same over a contiguous, 16-byte aligned output: each thread takes
// kActChunks 16-byte chunks a block apart, all loads in flight before any
// math, then a scalar tail. The activation is a template argument so the
// element loop has no switch.
constexpr int kActChunks = 2, kActThreads = 256;

template <class T, Activation A>
__global__ void __launch_bounds__(kActThreads) matmul_activation_flat_kernel(const MatMulParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int ve = kChunkElems<T>;
  const int64_t total = p.batch * p.m * p.n, chunks = total / ve;
  uint4* out = at<uint4>(arena, p.out);
  const int64_t step = int64_t(gridDim.x) * kActThreads * kActChunks;
  for (int64_t base = blockIdx.x * int64_t(kActThreads) * kActChunks + threadIdx.x; base < chunks; base += step) {
    uint4 v[kActChunks];
#pragma unroll
    for (int r = 0; r < kActChunks; ++r) {
      const int64_t c = base + r * kActThreads;
      if (c < chunks) v[r] = out[c];
    }
#pragma unroll
    for (int r = 0; r < kActChunks; ++r) {
      const int64_t c = base + r * kActThreads;
      if (c >= chunks) continue;
      float f[ve];
      unpack_chunk<T>(v[r], f);
#pragma unroll
      for (int e = 0; e < ve; ++e) f[e] = activate<A>(f[e]);
      out[c] = pack_chunk<T>(f);
    }
  }
  T* tail = at<T>(arena, p.out);
  for (int64_t t = chunks * ve + blockIdx.x * int64_t(kActThreads) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * kActThreads)
    tail[t] = from_f32<T>(activate<A>(to_f32(tail[t])));
}

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw Error("matmul: unsupported dtype " + std::string(dtype_name(dt)));
  }
}

// Largest power of two (up to 256) dividing the byte address of an operand.
uint32_t alignment_of(const void* ptr, int64_t batch_stride_bytes) {
  uint64_t a = reinterpret_cast<uint64_t>(ptr) | uint64_t(batch_stride_bytes) | 256u;
  return uint32_t(a & (~a + 1));
}

template <class V>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, V v, const std::string& what) {
  check(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v)), what);
}

constexpr int kCandidates = 8;

std::atomic<int> g_cublas_plans{0}, g_gemv_plans{0}, g_cutlass_plans{0}, g_few_row_plans{0};

// RLX_MATMUL=gemv takes rlx's matrix-vector kernel wherever it applies,
// =cutlass the CUTLASS GEMM, =fewrows the few-row GEMM, each wherever it
// applies, =cublas none of them; unset, the fastest at initialize.
enum class MatMulChoice { Auto, Gemv, Cutlass, FewRows, Cublas };
MatMulChoice matmul_choice() {
  const char* e = std::getenv("RLX_MATMUL");
  if (!e || !*e || std::strcmp(e, "auto") == 0) return MatMulChoice::Auto;
  if (std::strcmp(e, "gemv") == 0) return MatMulChoice::Gemv;
  if (std::strcmp(e, "cutlass") == 0) return MatMulChoice::Cutlass;
  if (std::strcmp(e, "fewrows") == 0) return MatMulChoice::FewRows;
  if (std::strcmp(e, "cublas") == 0) return MatMulChoice::Cublas;
  throw Error(std::string("RLX_MATMUL must be auto, gemv, cutlass, fewrows or cublas, not '") + e + "'");
}

// What timing chose for a product, kept per process: a product of the same
// shape, layout, alignment and epilogue in another executable (the prefill
// and decode graphs of one model, a second session) takes the same kernel
// without timing again, so the two compute the same bits.
struct TimedChoice {
  cublasLtMatmulAlgo_t algo;
  bool gemv_faster, cutlass_faster, few_rows_faster;
  int cutlass_config, few_rows_config;
};
std::mutex g_choices_mutex;
std::map<std::string, TimedChoice> g_choices;

// Whether the output is one contiguous, 16-byte aligned run (the flat kernel).
bool flat_output(const MatMulParams& p, const uint8_t* arena) {
  return p.ldc == p.n && (p.batch == 1 || p.stride_out == p.m * p.n) &&
         (reinterpret_cast<uintptr_t>(arena) + p.out) % 16 == 0;
}

}  // namespace

const char* activation_pass_variant(const MatMulParams& p, const uint8_t* arena) {
  return flat_output(p, arena) ? "flat" : "strided";
}

void run_activation_pass(const MatMulParams& p, const LaunchContext& ctx) {
  const bool flat = flat_output(p, ctx.arena);
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    const int64_t total = p.batch * p.m * p.n;
    if (flat) {
      const int64_t per_thread = int64_t(kChunkElems<T>) * kActChunks;
      dispatch_activation(p.act, [&]<Activation A>() {
        launch(matmul_activation_flat_kernel<T, A>, grid_for((total + per_thread - 1) / per_thread, kActThreads),
               kActThreads, 0, ctx, p);
      });
    } else
      launch(matmul_activation_kernel<T>, grid_for(total, 256), 256, 0, ctx, p);
  });
}

MatMulPathCounts matmul_path_counts() {
  return {g_cublas_plans.load(), g_gemv_plans.load(), g_cutlass_plans.load(), g_few_row_plans.load()};
}

MatMulPlan::MatMulPlan(cublasLtHandle_t lt, const MatMulParams& p, uint8_t* arena, void* workspace,
                       size_t workspace_bytes, const std::string& label, bool allow_tf32)
    : lt_(lt), p_(p), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  const std::string what = "initialize of " + label;
  if (p.fused.any()) {  // a fused norm or residual (fuse_matvec): only the matrix-vector kernel has them
    RLX_CHECK(gemv_eligible(p, arena),
              what << ": a product with a fused norm or residual needs the matrix-vector kernel (at most "
                   << kGemvMaxRows << " rows, 16-byte aligned rows of x, W and gamma), got m=" << p.m
                   << " n=" << p.n << " k=" << p.k);
    use_gemv_ = true;
    g_gemv_plans.fetch_add(1);
    return;
  }
  const cudaDataType_t type = cuda_type(p.dtype);
  // f32 stays full f32 unless TF32 was asked for: TF32's 10-bit mantissa
  // costs about 1e-3 relative error, far outside f32 parity.
  const cublasComputeType_t compute =
      p.dtype == DType::F32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), what);

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's
  // first operand is our B, its second our A, and C is n x m with ld ldc.
  cublasOperation_t op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)), what);
  check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)), what);

  const bool has_bias = p.bias != kNoBuffer;
  cublasLtEpilogue_t epi = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (p.act == Activation::Relu)
    epi = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (p.act == Activation::GeluTanh)  // cuBLASLt's GELU is the tanh form
    epi = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else if (p.act != Activation::None)
    separate_activation_ = true;
  check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), what);
  if (has_bias) {
    const void* bias = arena + p.bias;
    check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), what);
  }

  const uint64_t first_rows = p.trans_b ? p.k : p.n, first_cols = p.trans_b ? p.n : p.k;
  const uint64_t second_rows = p.trans_a ? p.m : p.k, second_cols = p.trans_a ? p.k : p.m;
  check(cublasLtMatrixLayoutCreate(&a_, type, first_rows, first_cols, p.ldb), what);
  check(cublasLtMatrixLayoutCreate(&b_, type, second_rows, second_cols, p.lda), what);
  check(cublasLtMatrixLayoutCreate(&c_, type, p.n, p.m, p.ldc), what);
  if (p.batch > 1) {
    int32_t count = int32_t(p.batch);
    set_layout(a_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, what);
    set_layout(b_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, what);
    set_layout(c_, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, what);
    set_layout(a_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t(p.stride_b), what);
    set_layout(b_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t(p.stride_a), what);
    set_layout(c_, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, int64_t(p.stride_out), what);
  }

  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), what);
  const int64_t es = int64_t(dtype_size(p.dtype));
  uint32_t align_first = alignment_of(arena + p.b, p.stride_b * es);
  uint32_t align_second = alignment_of(arena + p.a, p.stride_a * es);
  uint32_t align_c = alignment_of(arena + p.out, p.stride_out * es);
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace_bytes_, sizeof(workspace_bytes_)), what);
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &align_first, sizeof(uint32_t)), what);
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                             &align_second, sizeof(uint32_t)), what);
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                             &align_c, sizeof(uint32_t)), what);
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                             &align_c, sizeof(uint32_t)), what);
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check(st, what + " (algorithm heuristic)");
  RLX_CHECK(found > 0, "cuBLASLt found no algorithm for " + label + " (m=" + std::to_string(p.m) +
                           " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + ")");
  algo_ = results[0].algo;
  const MatMulChoice choice = matmul_choice();
  const bool gemv_ok = (choice == MatMulChoice::Auto || choice == MatMulChoice::Gemv) && gemv_eligible(p, arena);
  // Up to kGemvAlwaysRows rows the matrix-vector kernel is taken without
  // timing (it measured faster at every decode shape): a choice by timing
  // could differ between two executables of one model (prefill-fed and
  // state-fed decode graphs) and with it the last bits of their logits.
  const bool gemv_always = gemv_ok && p.m <= kGemvAlwaysRows;
  // CUTLASS's 128-row tiles only pay from a few dozen rows on.
  const bool cutlass_ok = (choice == MatMulChoice::Cutlass || (choice == MatMulChoice::Auto && p.m >= 64)) &&
                          cutlass_gemm_eligible(p, arena);
  // The few-row GEMM: f16/bf16, at most kFewRowMaxRows rows, sm_90.
  const bool few_rows_ok =
      (choice == MatMulChoice::Auto || choice == MatMulChoice::FewRows) && few_row_gemm_eligible(p, arena);
  // Forced, CUTLASS and the few-row GEMM are still timed: that picks their
  // configuration.
  if (!gemv_always && (found > 1 || (gemv_ok && choice == MatMulChoice::Auto) || cutlass_ok || few_rows_ok)) {
    int device = 0;
    check(cudaGetDevice(&device), what);
    const uint32_t align_bias = has_bias ? alignment_of(arena + p.bias, 0) : 0;
    char key[512];
    std::snprintf(key, sizeof(key), "%d|%d|%lld,%lld,%lld,%lld|%lld,%lld,%lld|%lld,%lld,%lld|%d,%d,%d,%d,%d|%u,%u,%u,%u|%d|%zu",
                  device, int(p.dtype), (long long)p.batch, (long long)p.m, (long long)p.n, (long long)p.k,
                  (long long)p.lda, (long long)p.ldb, (long long)p.ldc, (long long)p.stride_a,
                  (long long)p.stride_b, (long long)p.stride_out, int(p.act), int(p.trans_a), int(p.trans_b),
                  int(has_bias), int(compute), align_first, align_second, align_c, align_bias, int(choice),
                  workspace_bytes_);
    std::lock_guard<std::mutex> lock(g_choices_mutex);
    auto hit = g_choices.find(key);
    if (hit != g_choices.end()) {
      algo_ = hit->second.algo;
      gemv_faster_ = hit->second.gemv_faster;
      cutlass_faster_ = hit->second.cutlass_faster;
      cutlass_config_ = hit->second.cutlass_config;
      few_rows_faster_ = hit->second.few_rows_faster;
      few_rows_config_ = hit->second.few_rows_config;
      if (cutlass_ok && cutlass_config_ >= 0 && (cutlass_faster_ || choice == MatMulChoice::Cutlass))
        cutlass_ = std::make_unique<CutlassGemm>(p, arena, cutlass_config_);
      if (few_rows_ok && few_rows_config_ >= 0 && (few_rows_faster_ || choice == MatMulChoice::FewRows))
        few_rows_ = std::make_unique<FewRowGemm>(p, few_rows_config_, label);
    } else {
      choose_fastest(arena, results, found, what, gemv_ok, cutlass_ok, few_rows_ok);
      g_choices[key] =
          TimedChoice{algo_, gemv_faster_, cutlass_faster_, few_rows_faster_, cutlass_config_, few_rows_config_};
    }
  }
  use_gemv_ = gemv_ok && (gemv_always || choice == MatMulChoice::Gemv || gemv_faster_);
  if (use_gemv_ || !(choice == MatMulChoice::Cutlass || cutlass_faster_)) cutlass_.reset();
  if (use_gemv_ || cutlass_ || !(choice == MatMulChoice::FewRows || few_rows_faster_)) few_rows_.reset();
  (use_gemv_   ? g_gemv_plans
   : cutlass_  ? g_cutlass_plans
   : few_rows_ ? g_few_row_plans
               : g_cublas_plans)
      .fetch_add(1);
}

// The heuristic's first choice is often not the fastest for small M: time
// each candidate on the real arena buffers (initialize runs before any run)
// and keep the fastest; where rlx's matrix-vector kernel, the CUTLASS GEMM
// or the few-row GEMM (each of their configurations) applies, it is timed
// against the best of them, the separate activation kernel included. The output region is
// poisoned again afterwards, so a product that later fails to write still
// shows as NaN.
void MatMulPlan::choose_fastest(uint8_t* arena, const cublasLtMatmulHeuristicResult_t* results, int found,
                                const std::string& what, bool try_gemv, bool try_cutlass, bool try_few_rows) {
  constexpr int kRuns = 8;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaDeviceSynchronize(), what + " (before timing algorithms)");
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), what);
  check(cudaEventCreate(&start), what);
  check(cudaEventCreate(&stop), what);
  // Milliseconds for kRuns runs after a warm-up, or NaN where one fails.
  auto time_runs = [&](auto&& run_once) {
    if (!run_once()) return NAN;
    // The device waits until the host has queued every timed run, so the
    // events measure the kernels, not the host's launch rate.
    enqueue_gpu_delay(stream, 20000ull + 10000ull * kRuns);
    check(cudaEventRecord(start, stream), what);
    bool ok = true;
    for (int r = 0; r < kRuns && ok; ++r) ok = run_once();
    check(cudaEventRecord(stop, stream), what);
    check(cudaEventSynchronize(stop), what + " (timing algorithms)");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, start, stop), what);
    return ok ? ms : NAN;
  };
  const float alpha = 1.f, beta = 0.f;
  float best = INFINITY, first = NAN;
  int chosen = 0;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > workspace_bytes_) continue;
    const float ms = time_runs([&] {
      return cublasLtMatmul(lt_, desc_, &alpha, arena + p_.b, a_, arena + p_.a, b_, &beta, arena + p_.out, c_,
                            arena + p_.out, c_, &results[i].algo, workspace_, workspace_bytes_,
                            stream) == CUBLAS_STATUS_SUCCESS;
    });
    if (i == 0) first = ms;
    if (ms < best) {  // false for NaN: a failing candidate is skipped
      best = ms;
      chosen = i;
      algo_ = results[i].algo;
    }
  }
  float with_activation = best, gemv = NAN, cutlass = NAN, few_rows = NAN;
  const LaunchContext ctx{arena, stream, what.c_str()};
  if (try_gemv || try_cutlass || try_few_rows) with_activation = time_runs([&] { execute_cublas(ctx); return true; });
  if (try_gemv) gemv = time_runs([&] { run_gemv(p_, ctx); return true; });
  for (int config = 0; try_cutlass && config < CutlassGemm::kConfigs; ++config) {
    auto g = std::make_unique<CutlassGemm>(p_, arena, config);
    const float ms = time_runs([&] { g->run(ctx); return true; });
    if (!cutlass_ || ms < cutlass) {
      cutlass = ms;
      cutlass_ = std::move(g);
      cutlass_config_ = config;
    }
  }
  for (int config = 0; try_few_rows && config < FewRowGemm::kConfigs; ++config) {
    auto g = std::make_unique<FewRowGemm>(p_, config, what);
    if (few_rows_ && g->splits() == few_rows_->splits() && g->rows_per_block() == few_rows_->rows_per_block())
      continue;  // the same launch as one timed already
    const float ms = time_runs([&] { g->run(ctx); return true; });
    if (!few_rows_ || ms < few_rows) {
      few_rows = ms;
      few_rows_ = std::move(g);
      few_rows_config_ = config;
    }
  }
  // The fastest wins, cuBLASLt on a tie; NaN, where not timed, never does.
  float fastest = with_activation;
  gemv_faster_ = cutlass_faster_ = few_rows_faster_ = false;
  if (gemv < fastest) fastest = gemv, gemv_faster_ = true;
  if (cutlass < fastest) fastest = cutlass, gemv_faster_ = false, cutlass_faster_ = true;
  if (few_rows < fastest) fastest = few_rows, gemv_faster_ = cutlass_faster_ = false, few_rows_faster_ = true;
  const char* trace = std::getenv("RLX_TRACE");
  if (trace && std::strcmp(trace, "matmul") == 0)
    std::fprintf(stderr,
                 "rlx cuda: %s m=%lld n=%lld k=%lld: %d candidates, first %.2f us, chosen #%d %.2f us; "
                 "with activation %.2f us, gemv %.2f us, cutlass %.2f us, few-row %.2f us (%d rows x %d splits)\n",
                 what.c_str(), (long long)p_.m, (long long)p_.n, (long long)p_.k, found, 1000.0 * first / kRuns,
                 chosen, 1000.0 * best / kRuns, 1000.0 * with_activation / kRuns, 1000.0 * gemv / kRuns,
                 1000.0 * cutlass / kRuns, 1000.0 * few_rows / kRuns, few_rows_ ? few_rows_->rows_per_block() : 0,
                 few_rows_ ? few_rows_->splits() : 0);
  // The whole extent, gaps between rows included: at initialize nothing but
  // constants holds data, and no product writes over a constant.
  const int64_t es = int64_t(dtype_size(p_.dtype));
  const int64_t extent = ((p_.batch - 1) * p_.stride_out + (p_.m - 1) * p_.ldc + p_.n) * es;
  if (p_.m > 0 && p_.n > 0) check(cudaMemsetAsync(arena + p_.out, 0xff, size_t(extent), stream), what);
  check(cudaStreamSynchronize(stream), what);
  cudaEventDestroy(stop);
  cudaEventDestroy(start);
  cudaStreamDestroy(stream);
}

MatMulPlan::~MatMulPlan() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

void MatMulPlan::execute(const LaunchContext& ctx) const {
  if (use_gemv_) run_gemv(p_, ctx);
  else if (cutlass_) cutlass_->run(ctx);
  else if (few_rows_) few_rows_->run(ctx);
  else execute_cublas(ctx);
}

void MatMulPlan::execute_cublas(const LaunchContext& ctx) const {
  const float alpha = 1.f, beta = 0.f;
  uint8_t* arena = ctx.arena;
  check(cublasLtMatmul(lt_, desc_, &alpha, arena + p_.b, a_, arena + p_.a, b_, &beta, arena + p_.out, c_,
                       arena + p_.out, c_, &algo_, workspace_, workspace_bytes_, ctx.stream),
        std::string("execute of ") + ctx.label);
  if (separate_activation_) run_activation_pass(p_, ctx);
}

// cuBLASLt plans are per thunk: made at initialize by make_device_thunk.
void register_cuda_matmul(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add_stateful<MatMulParams>(dt);
}

}  // namespace rlx::cuda
