#include "backends/cuda/row_export.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_types.cuh"
#include "rlx/error.h"

namespace rlx::cuda {
namespace {

constexpr int kBlock = 256;

template <class T>
__global__ void export_rows_kernel(const T* src, int64_t src_cols, const int32_t* dst_rows, int dim, bool normalize,
                                   float* dst) {
  const T* row = src + int64_t(blockIdx.x) * src_cols;
  float* out = dst + int64_t(dst_rows[blockIdx.x]) * dim;
  float scale = 1.f;
  if (normalize) {
    float ss = 0.f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
      const float v = to_f32(row[c]);
      ss += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, off);
    __shared__ float warp_sums[kBlock / 32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.f;
    for (int w = 0; w < int(blockDim.x) / 32; ++w) total += warp_sums[w];
    scale = 1.f / fmaxf(sqrtf(total), 1e-12f);
  }
  for (int c = threadIdx.x; c < dim; c += blockDim.x) out[c] = to_f32(row[c]) * scale;
}

template <class T>
void launch(const void* src, int64_t src_cols, const int32_t* dst_rows, int rows, int dim, bool normalize, float* dst,
            cudaStream_t stream) {
  export_rows_kernel<T><<<rows, kBlock, 0, stream>>>(static_cast<const T*>(src), src_cols, dst_rows, dim, normalize,
                                                     dst);
  check(cudaGetLastError(), "export of output rows");
}

}  // namespace

void export_rows_f32(const void* src, DType dt, int64_t src_cols, const int32_t* dst_rows, int rows, int dim,
                     bool normalize, float* dst, cudaStream_t stream) {
  RLX_CHECK(dim >= 1 && dim <= src_cols, "export of output rows: dim " << dim << " outside [1, " << src_cols << "]");
  if (rows == 0) return;
  switch (dt) {
    case DType::F32: return launch<float>(src, src_cols, dst_rows, rows, dim, normalize, dst, stream);
    case DType::F16: return launch<__half>(src, src_cols, dst_rows, rows, dim, normalize, dst, stream);
    case DType::BF16: return launch<__nv_bfloat16>(src, src_cols, dst_rows, rows, dim, normalize, dst, stream);
    default: RLX_FAIL("export of output rows: dtype " << dtype_name(dt) << " is not a float type");
  }
}

}  // namespace rlx::cuda
