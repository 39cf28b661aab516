// How fast can one-row products stream their weights on this GPU, and by
// which load path? Sweeps a 1 GiB buffer in windows of a decode product's
// size (so nothing is served from L2) with:
//   ldg    - register loads (ld.global.nc, U 16-byte loads in flight a thread)
//   bulk   - cp.async.bulk copies into shared-memory stages; thread 0 waits
//            and refills (the copy engine's own rate, nothing read)
//   bsync  - bulk, every thread sums the stage, __syncthreads per tile,
//            thread 0 refills (gemv_stream.cu's shape)
//   bwarp  - bulk, a producer warp refills a stage once the 8 consumer
//            warps arrive on its "empty" barrier (no block-wide barrier)
// Prints GB/s and microseconds a launch per window size. Then a decode
// step of TinyLlama-1.1B f16's products (22 layers of QKV 10.5 MB, output
// 8.4, gate/up 46.1, down 23.1, and a 131 MB head: 2.2 GB) as register-
// load kernels recorded in a CUDA graph, without and with programmatic
// dependent launch (the next kernel's blocks start early and request their
// first weights before waiting), at several blocks an SM, and with two
// small dependent kernels a layer (like the K/V write and attention):
// microseconds a step and tokens/s.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 bench/gpu_stream_probe.cu -o probe
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kConsumers = 256, kMaxStages = 32;

__device__ __forceinline__ uint32_t saddr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(saddr(b)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          saddr(dst)),
      "l"(src), "r"(bytes), "r"(saddr(bar)), "l"(pol)
      : "memory");
}
__device__ __forceinline__ uint64_t evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint4 ldg(const uint4* p, uint64_t pol) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ float sum4(uint4 v) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __half22float2(h[i]);
    s += f.x + f.y;
  }
  return s;
}

template <int U>
__global__ void ldg_kernel(const uint4* w, int64_t n16, float* out) {
  const uint64_t pol = evict_first();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = 0.f;
  for (int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; base < n16; base += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = base + u * stride < n16 ? ldg(w + base + u * stride, pol) : uint4{};
#pragma unroll
    for (int u = 0; u < U; ++u) acc += sum4(v[u]);
  }
  if (acc == 1234.5f) out[0] = acc;
}

// A product of a decode step: with Pdl, trigger the next kernel at entry,
// request this thread's first U loads, then wait for the kernel before.
template <int U, bool Pdl>
__global__ void step_product_kernel(const uint4* w, int64_t n16, float* out) {
  if (Pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const uint64_t pol = evict_first();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = 0.f;
  int64_t base = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  uint4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = base + u * stride < n16 ? ldg(w + base + u * stride, pol) : uint4{};
  if (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  acc += out[0] * 0.f;  // x, as the kernel before wrote it
  for (;;) {
#pragma unroll
    for (int u = 0; u < U; ++u) acc += sum4(v[u]);
    base += stride * U;
    if (base >= n16) break;
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = base + u * stride < n16 ? ldg(w + base + u * stride, pol) : uint4{};
  }
  if (acc == 1234.5f) out[1] = acc;
}

// A small dependent kernel (like the K/V write or decode attention): one
// L2 round trip on data the kernel before wrote.
// Late: wait first, then let the next kernel launch.
template <bool Pdl, bool Late = false>
__global__ void step_small_kernel(float* out) {
  if (Pdl && !Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (Pdl && Late) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const float v = __ldcg(out + 2 + threadIdx.x);
  if (v == 1234.5f) out[1] = v;
}

// Mode 0: copy only; 1: all read, __syncthreads a tile; 2: producer warp + empty barriers.
template <int Mode>
__global__ void bulk_kernel(const uint8_t* w, int64_t bytes, int stage_bytes, int stages, float* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  const int tid = threadIdx.x;
  const int64_t tiles = bytes / stage_bytes;
  const uint64_t pol = evict_first();
  auto issue = [&](int64_t i) {
    const int64_t t = blockIdx.x + i * gridDim.x;
    if (t >= tiles) return;
    const int s = int(i % stages);
    mbar_expect(&full[s], uint32_t(stage_bytes));
    bulk(smem + int64_t(s) * stage_bytes, w + t * stage_bytes, uint32_t(stage_bytes), &full[s], pol);
  };
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumers / 32);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    if (Mode != 2)
      for (int s = 0; s < stages; ++s) issue(s);
  }
  __syncthreads();
  float acc = 0.f;
  if (Mode == 0) {
    if (tid != 0) return;
    for (int64_t i = 0; blockIdx.x + i * gridDim.x < tiles; ++i) {
      mbar_wait(&full[i % stages], uint32_t((i / stages) & 1));
      issue(i + stages);
    }
    acc = float(smem[0]);
  } else if (Mode == 1) {
    const int chunks = stage_bytes / 16;
    for (int64_t i = 0; blockIdx.x + i * gridDim.x < tiles; ++i) {
      const int s = int(i % stages);
      mbar_wait(&full[s], uint32_t((i / stages) & 1));
      const uint4* st = reinterpret_cast<const uint4*>(smem + int64_t(s) * stage_bytes);
      for (int c = tid; c < chunks; c += blockDim.x) acc += sum4(st[c]);
      __syncthreads();
      if (tid == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue(i + stages);
      }
    }
  } else {
    const int chunks = stage_bytes / 16, warp = tid / 32, lane = tid % 32;
    if (warp == kConsumers / 32) {  // the producer warp
      if (lane != 0) return;
      for (int64_t i = 0; blockIdx.x + i * gridDim.x < tiles; ++i) {
        if (i >= stages) mbar_wait(&empty[i % stages], uint32_t(((i / stages) - 1) & 1));
        issue(i);
      }
      return;
    }
    for (int64_t i = 0; blockIdx.x + i * gridDim.x < tiles; ++i) {
      const int s = int(i % stages);
      mbar_wait(&full[s], uint32_t((i / stages) & 1));
      const uint4* st = reinterpret_cast<const uint4*>(smem + int64_t(s) * stage_bytes);
      for (int c = tid; c < chunks; c += kConsumers) acc += sum4(st[c]);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  }
  if (acc == 1234.5f) out[0] = acc;
}

struct Result {
  double gbps, us;
};

template <class Launch>
Result time_sweep(const uint8_t* buf, int64_t total, int64_t window, Launch launch) {
  const int64_t n = total / window;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int64_t i = 0; i < n; ++i) launch(buf + i * window, window);  // warm
  CK(cudaGetLastError());
  const int reps = 3;
  CK(cudaEventRecord(a));
  for (int r = 0; r < reps; ++r)
    for (int64_t i = 0; i < n; ++i) launch(buf + i * window, window);
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  const double launches = double(n) * reps;
  return {double(n * window) * reps / (ms * 1e-3) / 1e9, ms * 1e3 / launches};
}

template <int U, bool Pdl>
void launch_product(cudaStream_t st, const uint8_t* w, int64_t bytes, unsigned grid, float* out) {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(256);
  cfg.stream = st;
  cfg.attrs = Pdl ? &attr : nullptr;
  cfg.numAttrs = Pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, step_product_kernel<U, Pdl>, reinterpret_cast<const uint4*>(w), bytes / 16, out));
}

// Pdl: the kernel triggers and waits; attr: launched with the attribute.
template <bool Pdl, bool Late = false>
void launch_small(cudaStream_t st, float* out, bool attr_on = Pdl) {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(32);
  cfg.blockDim = dim3(128);
  cfg.stream = st;
  cfg.attrs = attr_on ? &attr : nullptr;
  cfg.numAttrs = attr_on ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, step_small_kernel<Pdl, Late>, out));
}

// TinyLlama-1.1B f16's decode step as products over distinct weights,
// recorded once and replayed.
void step(int sms, float* out) {
  const int64_t mb = 1 << 20;
  std::vector<int64_t> sizes;
  for (int l = 0; l < 22; ++l)
    for (int64_t b : {2560 * 2048 * 2, 2048 * 2048 * 2, 11264 * 2048 * 2, 2048 * 5632 * 2}) sizes.push_back(b);
  sizes.push_back(int64_t(32000) * 2048 * 2);
  int64_t total = 0;
  for (int64_t b : sizes) total += (b + mb - 1) / mb * mb;
  uint8_t* w = nullptr;
  CK(cudaMalloc(&w, total));
  CK(cudaMemset(w, 0, total));
  CK(cudaMemset(out, 0, 4096));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::printf("\ndecode step: %zu products, %.2f GB (TinyLlama-1.1B f16), in a CUDA graph\n", sizes.size(),
              double(total) / 1e9);
  auto run = [&](const char* name, int bps, bool pdl, bool small, int u, int small_pdl = -1, bool late = false) {
    if (small_pdl < 0) small_pdl = pdl;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    int64_t off = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const unsigned grid = unsigned(sms * bps);
      if (pdl) {
        if (u == 4) launch_product<4, true>(st, w + off, sizes[i], grid, out);
        else launch_product<8, true>(st, w + off, sizes[i], grid, out);
      } else {
        if (u == 4) launch_product<4, false>(st, w + off, sizes[i], grid, out);
        else launch_product<8, false>(st, w + off, sizes[i], grid, out);
      }
      if (small && i % 4 == 0 && i + 1 < sizes.size()) {  // after QKV: K/V write, attention
        if (pdl && late) launch_small<true, true>(st, out), launch_small<true, true>(st, out);
        else if (pdl) launch_small<true>(st, out, small_pdl), launch_small<true>(st, out, small_pdl);
        else launch_small<false>(st, out), launch_small<false>(st, out);
      }
      off += (sizes[i] + mb - 1) / mb * mb;
    }
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, st));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int reps = 50;
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    const double us = ms * 1e3 / reps;
    std::printf("%-52s %7.1f us a step  %6.0f tok/s  %5.0f GB/s\n", name, us, 1e6 / us, double(total) / us / 1e3);
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  };
  char name[128];
  for (int small : {0, 1})
    for (int bps : {2, 4, 8})
      for (int pdl : {0, 1}) {
        std::snprintf(name, sizeof name, "%s, %d blocks/SM x256, U=4%s", pdl ? "PDL + early loads" : "plain",
                      bps, small ? ", +2 small kernels a layer" : "");
        run(name, bps, pdl, small, 4);
      }
  for (int bps : {2, 4, 8}) {
    std::snprintf(name, sizeof name, "PDL products, plain small kernels, %d blocks/SM x256", bps);
    run(name, bps, true, true, 4, 0);
    std::snprintf(name, sizeof name, "PDL, small kernels trigger after their wait, %d blocks/SM x256", bps);
    run(name, bps, true, true, 4, 1, true);
  }
  run("PDL + early loads, 4 blocks/SM x256, U=8", 4, true, false, 8);
  run("PDL + early loads, 2 blocks/SM x256, U=8", 2, true, false, 8);
  CK(cudaFree(w));
}

}  // namespace

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, sms);
  const bool step_only = argc > 1 && std::strcmp(argv[1], "step") == 0;  // `probe step`: the step alone
  const int64_t total = int64_t(1) << 30;
  uint8_t* buf = nullptr;
  float* out = nullptr;
  CK(cudaMalloc(&buf, total));
  CK(cudaMalloc(&out, 4096));
  CK(cudaMemset(buf, 0, total));
  // Decode products at TinyLlama-1.1B f16: QKV 10.5 MB, O 8.4 MB, down 23 MB, gate+up 46 MB; and a long one.
  const std::vector<int64_t> windows = {8 << 20, 10 << 20, 23 << 20, 46 << 20, 256 << 20};
  if (step_only) {
    step(sms, out);
    return 0;
  }
  std::printf("%-34s", "variant \\ window MiB");
  for (int64_t w : windows) std::printf(" %12lld", (long long)(w >> 20));
  std::printf("   (GB/s, us a launch)\n");
  auto row = [&](const char* name, auto launch) {
    std::printf("%-34s", name);
    for (int64_t w : windows) {
      Result r = time_sweep(buf, total, w, launch);
      std::printf(" %6.0f/%5.1f", r.gbps, r.us);
    }
    std::printf("\n");
    std::fflush(stdout);
  };
  char name[128];
  for (int bps : {2, 4, 8})
    for (int u : {4, 8}) {
      std::snprintf(name, sizeof name, "ldg U=%d %d blocks/SM x256", u, bps);
      row(name, [&](const uint8_t* p, int64_t bytes) {
        const unsigned grid = unsigned(sms * bps);
        if (u == 4) ldg_kernel<4><<<grid, 256>>>(reinterpret_cast<const uint4*>(p), bytes / 16, out);
        else ldg_kernel<8><<<grid, 256>>>(reinterpret_cast<const uint4*>(p), bytes / 16, out);
      });
    }
  auto set_smem = [](auto kernel) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  };
  set_smem(bulk_kernel<0>);
  set_smem(bulk_kernel<1>);
  set_smem(bulk_kernel<2>);
  struct Cfg {
    int mode, stage_kb, stages, bps;
  };
  const Cfg cfgs[] = {
      {0, 16, 6, 1}, {0, 8, 12, 1}, {0, 32, 3, 1}, {0, 4, 24, 1}, {0, 16, 12, 1}, {0, 8, 6, 2}, {0, 16, 3, 2},
      {0, 32, 6, 1}, {1, 16, 6, 1}, {1, 8, 12, 1}, {1, 8, 6, 2}, {1, 16, 12, 1}, {2, 16, 6, 1}, {2, 8, 12, 1},
      {2, 16, 12, 1}, {2, 8, 6, 2}, {2, 4, 24, 1},
  };
  const char* modes[] = {"bulk", "bsync", "bwarp"};
  for (const Cfg& c : cfgs) {
    std::snprintf(name, sizeof name, "%s %dKBx%d %d blocks/SM", modes[c.mode], c.stage_kb, c.stages, c.bps);
    row(name, [&](const uint8_t* p, int64_t bytes) {
      const unsigned grid = unsigned(sms * c.bps);
      const size_t smem = size_t(c.stage_kb) * 1024 * c.stages;
      const int threads = c.mode == 2 ? kConsumers + 32 : kConsumers;
      if (c.mode == 0) bulk_kernel<0><<<grid, threads, smem>>>(p, bytes, c.stage_kb * 1024, c.stages, out);
      else if (c.mode == 1) bulk_kernel<1><<<grid, threads, smem>>>(p, bytes, c.stage_kb * 1024, c.stages, out);
      else bulk_kernel<2><<<grid, threads, smem>>>(p, bytes, c.stage_kb * 1024, c.stages, out);
    });
  }
  CK(cudaDeviceSynchronize());
  CK(cudaFree(buf));
  step(sms, out);
  return 0;
}
