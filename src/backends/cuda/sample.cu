// Token sampling over the last dim (temperature, top-k, top-p) as
// src/thunks/sample_math.h defines it, so the token equals the CPU kernel's
// and the host Sampler's. One block per row, no sort: the top-k and top-p
// thresholds are radix selects over the order-preserving keys (4 passes of 8
// bits; per-warp shared histograms of counts, or of probability mass), and
// the choice is a block-wide prefix scan over contiguous slices of the row,
// in token order. Sums are in double, as on the host.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "thunks/sample_math.h"

namespace rlx::cuda {
namespace {

constexpr int kBlock = 512, kWarps = kBlock / 32, kBins = 256;
constexpr unsigned kFull = 0xffffffffu;

struct Shared {
  double hist[kWarps][kBins];  // per warp: fewer threads contend for one bin
  double bins[kBins];
  double warp_sum[kWarps];
  uint32_t warp_key[kWarps];
  int warp_at[kWarps];
  uint32_t prefix;
  double need;
  int failed, pick_thread, pick;
};

// The sum of v over the block, in a fixed order; every thread gets it.
__device__ double block_sum(double v, Shared& s) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  if ((threadIdx.x & 31) == 0) s.warp_sum[threadIdx.x >> 5] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < kWarps; ++w) t += s.warp_sum[w];
  __syncthreads();
  return t;
}

// The largest key t >= floor such that the weight (a count, or the mass when
// kMass) of the row's keys in [t, inf) reaches need. failed: no t reaches it
// (a rounding of the mass), then 0.
template <bool kMass, class T>
__device__ uint32_t radix_select(const T* row, int n, uint32_t floor, double need, float mx, float temp,
                                 Shared& s) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < kWarps * kBins; i += kBlock) (&s.hist[0][0])[i] = 0;
    if (threadIdx.x == 0) s.failed = 0;
    __syncthreads();
    for (int c = threadIdx.x; c < n; c += kBlock) {
      const float v = sample_clean(to_f32(row[c]));
      const uint32_t k = sample_key(v);
      if (k >= floor && (k & mask) == prefix)
        atomicAdd(&s.hist[warp][(k >> shift) & 255u], kMass ? double(sample_weight(v, mx, temp)) : 1.0);
    }
    __syncthreads();
    if (threadIdx.x < kBins) {
      double t = 0;
      for (int w = 0; w < kWarps; ++w) t += s.hist[w][threadIdx.x];
      s.bins[threadIdx.x] = t;
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l holds bins 255 - 8l down to 248 - 8l: lanes in descending order.
      double b[8], sum = 0;
      for (int j = 0; j < 8; ++j) sum += b[j] = s.bins[255 - 8 * lane - j];
      double incl = sum;
      for (int off = 1; off < 32; off <<= 1) {
        const double o = __shfl_up_sync(kFull, incl, off);
        if (lane >= off) incl += o;
      }
      double excl = __shfl_up_sync(kFull, incl, 1);
      if (lane == 0) excl = 0;
      const unsigned hit = __ballot_sync(kFull, incl >= need);
      if (hit == 0) {
        if (lane == 0) s.failed = 1;
      } else if (lane == __ffs(hit) - 1) {
        double acc = excl, before = excl;
        int chosen = -1, lowest = 7;
        for (int j = 0; j < 8 && chosen < 0; ++j) {
          if (b[j] > 0) lowest = j;
          if (acc + b[j] >= need) {
            chosen = j;
            before = acc;
          }
          acc += b[j];
        }
        if (chosen < 0) chosen = lowest;  // the lane's sum reached need, its walk did not: rounding
        s.prefix = prefix | (uint32_t(255 - 8 * lane - chosen) << shift);
        s.need = need - before;
      }
    }
    __syncthreads();
    if (s.failed) return 0;
    prefix = s.prefix;
    need = s.need;
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

template <class T>
__global__ void sample_kernel(const SampleParams p, uint8_t* arena) {
  __shared__ Shared s;
  pdl_entry();  // the logits come from the kernel before, which may still be running
  const T* row = at<const T>(arena, p.x) + blockIdx.x * p.cols;
  int32_t* out = at<int32_t>(arena, p.out) + blockIdx.x;
  const int n = int(p.cols);  // < 2^31: shape inference checks
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  // The largest key, the lowest index holding it.
  uint32_t best_key = 0;
  int best = n;
  for (int c = threadIdx.x; c < n; c += kBlock) {
    const uint32_t k = sample_key(to_f32(row[c]));
    if (best == n || k > best_key) {
      best_key = k;
      best = c;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const uint32_t k = __shfl_down_sync(kFull, best_key, off);
    const int i = __shfl_down_sync(kFull, best, off);
    if (i < n && (best == n || k > best_key || (k == best_key && i < best))) {
      best_key = k;
      best = i;
    }
  }
  if (lane == 0) {
    s.warp_key[warp] = best_key;
    s.warp_at[warp] = best;
  }
  __syncthreads();
  best_key = s.warp_key[0];
  best = s.warp_at[0];
  for (int w = 1; w < kWarps; ++w)
    if (s.warp_at[w] < n && (best == n || s.warp_key[w] > best_key || (s.warp_key[w] == best_key && s.warp_at[w] < best))) {
      best_key = s.warp_key[w];
      best = s.warp_at[w];
    }
  const float mx = sample_clean(to_f32(row[best]));
  if (!isfinite(mx)) {
    if (threadIdx.x == 0) *out = best;
    return;
  }
  const float temp = p.temperature;

  uint32_t t_k = 0;
  if (p.top_k > 0 && p.top_k < n) t_k = radix_select<false>(row, n, 0u, double(p.top_k), mx, temp, s);
  uint32_t t_p = 0;
  if (p.top_p < 1.f) {
    double z = 0;
    for (int c = threadIdx.x; c < n; c += kBlock) {
      const float v = sample_clean(to_f32(row[c]));
      if (sample_key(v) >= t_k) z += double(sample_weight(v, mx, temp));
    }
    z = block_sum(z, s);
    t_p = radix_select<true>(row, n, t_k, double(p.top_p) * z, mx, temp, s);
  }
  const uint32_t t = min(max(t_k, t_p), best_key);  // the largest value always stays

  // The choice: per-thread slices in token order, an inclusive scan over threads.
  const int chunk = (n + kBlock - 1) / kBlock;
  const int lo = min(n, int(threadIdx.x) * chunk), hi = min(n, lo + chunk);
  double local = 0;
  for (int c = lo; c < hi; ++c) {
    const float v = sample_clean(to_f32(row[c]));
    if (sample_key(v) >= t) local += double(sample_weight(v, mx, temp));
  }
  double incl = local;
  for (int off = 1; off < 32; off <<= 1) {
    const double o = __shfl_up_sync(kFull, incl, off);
    if (lane >= off) incl += o;
  }
  double excl = __shfl_up_sync(kFull, incl, 1);
  if (lane == 0) excl = 0;
  if (lane == 31) s.warp_sum[warp] = incl;
  if (threadIdx.x == 0) {
    s.pick_thread = kBlock;
    s.pick = best;
  }
  __syncthreads();
  double offset = 0, z = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) offset += s.warp_sum[w];
    z += s.warp_sum[w];
  }
  const double target = double(sample_uniform(p.seed, at<const int32_t>(arena, p.positions)[blockIdx.x])) * z;
  if (offset + incl > target) atomicMin(&s.pick_thread, int(threadIdx.x));
  __syncthreads();
  if (int(threadIdx.x) == s.pick_thread) {
    double acc = offset + excl;
    int pick = -1, last = -1;
    for (int c = lo; c < hi && pick < 0; ++c) {
      const float v = sample_clean(to_f32(row[c]));
      if (sample_key(v) < t) continue;
      const double w = double(sample_weight(v, mx, temp));
      if (w > 0) last = c;
      if ((acc += w) > target) pick = c;
    }
    if (pick < 0) pick = last >= 0 ? last : best;  // rounding: the scan and the walk disagree
    *out = pick;
  } else if (threadIdx.x == 0 && s.pick_thread == kBlock) {
    *out = best;  // not reached: u < 1
  }
}

void run_sample(const SampleParams& p, const LaunchContext& ctx) {
  if (p.rows == 0) return;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(sample_kernel<T>, unsigned(p.rows), kBlock, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_sample(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<SampleParams>(dt, run_sample);
}

}  // namespace rlx::cuda
