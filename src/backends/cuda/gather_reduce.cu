// Embedding gather (out-of-range ids give zero rows), the same from a
// block-quantized table (gather_q), and axis reductions.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"
#include "rlx/fp8.h"
#include "rlx/quant.h"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void gather_kernel(const GatherParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t i = blockIdx.x;
  const int32_t id = at<const int32_t>(arena, p.ids)[i];
  const bool valid = id >= 0 && id < p.vocab;
  const T* src = at<const T>(arena, p.table) + (valid ? int64_t(id) * p.row : 0);
  T* dst = at<T>(arena, p.out) + i * p.row;
  for (int64_t c = threadIdx.x; c < p.row; c += blockDim.x)
    dst[c] = valid ? src[c] : from_f32<T>(0.f);
}

// Rows of whole 16-byte chunks: a warp per row (four rows a block when there
// are many), a chunk a lane per step.
template <class T>
__global__ void gather_vec_kernel(const GatherParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t i = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (i >= p.n_ids) return;
  const int32_t id = at<const int32_t>(arena, p.ids)[i];
  const bool valid = id >= 0 && id < p.vocab;
  const int64_t chunks = p.row / kChunkElems<T>;
  const uint4* src = at<const uint4>(arena, p.table) + (valid ? int64_t(id) * chunks : 0);
  uint4* dst = at<uint4>(arena, p.out) + i * chunks;
  for (int64_t c = threadIdx.x % 32; c < chunks; c += 32) dst[c] = valid ? src[c] : make_uint4(0, 0, 0, 0);
}

// gather_q: a block per row, a thread per element, each dequantized as the
// host does (thunks/quant_math.cc: d * q, Q4_1 d * q + m, FP8 d * e4m3(q),
// unfused).
template <class T>
__global__ void gather_q_kernel(const GatherQParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t i = blockIdx.x;
  const int32_t id = at<const int32_t>(arena, p.ids)[i];
  const bool valid = id >= 0 && id < p.vocab;
  const int64_t block_bytes = quant_block_bytes(p.quant), per = quant_scales_per_block(p.quant);
  const int64_t blocks = p.row / kQuantBlock;
  const uint8_t* q = arena + p.quants + (valid ? int64_t(id) : 0) * blocks * block_bytes;
  const __half* sc = at<const __half>(arena, p.scales) + (valid ? int64_t(id) : 0) * blocks * per;
  T* dst = at<T>(arena, p.out) + i * p.row;
  for (int64_t j = threadIdx.x; j < p.row; j += blockDim.x) {
    if (!valid) {
      dst[j] = from_f32<T>(0.f);
      continue;
    }
    const int64_t c = j / kQuantBlock, t = j % kQuantBlock;
    const float d = __half2float(sc[c * per]);
    float v;
    if (p.quant == QuantType::Q8_0) {
      v = __fmul_rn(d, float(int8_t(q[c * block_bytes + t])));
    } else if (p.quant == QuantType::FP8) {
      v = __fmul_rn(d, e4m3_to_float(q[c * block_bytes + t]));
    } else {
      const uint8_t b = q[c * block_bytes + t % 16];
      const int nib = t < 16 ? b & 0x0f : b >> 4;
      v = p.quant == QuantType::Q4_1 ? __fadd_rn(__fmul_rn(d, float(nib)), __half2float(sc[c * per + 1]))
                                     : __fmul_rn(d, float(nib - 8));
    }
    dst[j] = from_f32<T>(v);
  }
}

bool gather_vec_eligible(const GatherParams& p, const uint8_t* arena) {
  if (p.row % (16 / int64_t(dtype_size(p.dtype))) != 0) return false;
  for (uint64_t off : {p.table, p.out})
    if ((reinterpret_cast<uintptr_t>(arena) + off) % 16 != 0) return false;
  return true;
}

// inner > 1: one thread per output, reading along len (coalesced over inner).
template <class T>
__global__ void reduce_columns_kernel(const ReduceParams p, uint8_t* arena) {
  pdl_entry();
  const T* x = at<const T>(arena, p.x);
  T* out = at<T>(arena, p.out);
  const int64_t total = p.outer * p.inner;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t a = o / p.inner, c = o % p.inner;
    const T* base = x + a * p.len * p.inner + c;
    float acc = p.kind == ReduceKind::Max ? -INFINITY : 0.f;
    for (int64_t l = 0; l < p.len; ++l) {
      float v = to_f32(base[l * p.inner]);
      acc = p.kind == ReduceKind::Max ? fmaxf(acc, v) : acc + v;
    }
    if (p.kind == ReduceKind::Mean) acc /= float(p.len);
    out[o] = from_f32<T>(acc);
  }
}

// inner == 1: one block per output row.
template <class T>
__global__ void reduce_rows_kernel(const ReduceParams p, uint8_t* arena) {
  pdl_entry();
  __shared__ float scratch[32];
  const T* x = at<const T>(arena, p.x) + blockIdx.x * p.len;
  const bool is_max = p.kind == ReduceKind::Max;
  float acc = is_max ? -INFINITY : 0.f;
  for (int64_t l = threadIdx.x; l < p.len; l += blockDim.x) {
    float v = to_f32(x[l]);
    acc = is_max ? fmaxf(acc, v) : acc + v;
  }
  acc = is_max ? block_max(acc, scratch) : block_sum(acc, scratch);
  if (p.kind == ReduceKind::Mean) acc /= float(p.len);
  if (threadIdx.x == 0) at<T>(arena, p.out)[blockIdx.x] = from_f32<T>(acc);
}

}  // namespace

const char* gather_variant(const GatherParams& p, const uint8_t* arena) {
  return gather_vec_eligible(p, arena) ? "vec" : "general";
}

void run_gather(const GatherParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (gather_vec_eligible(p, ctx.arena)) {
      const int warps = p.n_ids >= 1024 ? 4 : 1;
      launch(gather_vec_kernel<T>, dim3(unsigned((p.n_ids + warps - 1) / warps)), 32 * warps, 0, ctx, p);
    } else {
      launch(gather_kernel<T>, dim3(unsigned(p.n_ids)), row_block(p.row), 0, ctx, p);
    }
  });
}

void run_gather_q(const GatherQParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(gather_q_kernel<T>, dim3(unsigned(p.n_ids)), row_block(p.row), 0, ctx, p);
  });
}

void run_reduce(const ReduceParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (p.inner == 1)
      launch(reduce_rows_kernel<T>, dim3(unsigned(p.outer)), row_block(p.len), 0, ctx, p);
    else
      launch(reduce_columns_kernel<T>, grid_for(p.outer * p.inner, 256), 256, 0, ctx, p);
  });
}

void register_cuda_gather(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<GatherParams>(dt, run_gather);
}

void register_cuda_gather_q(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<GatherQParams>(dt, run_gather_q);
}

void register_cuda_reduce(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<ReduceParams>(dt, run_reduce);
}

}  // namespace rlx::cuda
