#include "backends/cuda/matmul.h"

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

// The activation cuBLASLt has no epilogue for, in place over the row-major
// output (rows of n valid elements, ldc apart).
template <class T>
__global__ void matmul_activation_kernel(const MatMulParams p, uint8_t* arena) {
  T* out = at<T>(arena, p.out);
  const int64_t total = p.batch * p.m * p.n;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    int64_t j = t % p.n, rest = t / p.n, i = rest % p.m, bt = rest / p.m;
    T& y = out[bt * p.stride_out + i * p.ldc + j];
    y = from_f32<T>(apply_activation(p.act, to_f32(y)));
  }
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

}  // namespace

MatMulPlan::MatMulPlan(cublasLtHandle_t lt, const MatMulParams& p, uint8_t* arena, void* workspace,
                       size_t workspace_bytes, const std::string& label, bool allow_tf32)
    : lt_(lt), p_(p), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  const std::string what = "initialize of " + label;
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
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check(st, what + " (algorithm heuristic)");
  RLX_CHECK(found > 0, "cuBLASLt found no algorithm for " + label + " (m=" + std::to_string(p.m) +
                           " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + ")");
  algo_ = result.algo;
}

MatMulPlan::~MatMulPlan() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
}

void MatMulPlan::execute(const LaunchContext& ctx) const {
  const float alpha = 1.f, beta = 0.f;
  uint8_t* arena = ctx.arena;
  check(cublasLtMatmul(lt_, desc_, &alpha, arena + p_.b, a_, arena + p_.a, b_, &beta, arena + p_.out, c_,
                       arena + p_.out, c_, &algo_, workspace_, workspace_bytes_, ctx.stream),
        std::string("execute of ") + ctx.label);
  if (separate_activation_) {
    dispatch_float(p_.dtype, ctx.label, [&]<class T>() {
      launch(matmul_activation_kernel<T>, grid_for(p_.batch * p_.m * p_.n, 256), 256, 0, ctx, p_);
    });
  }
}

}  // namespace rlx::cuda
