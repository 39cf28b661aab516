// CUTLASS 3.x GEMM on Hopper: out = act(A . B^T + bias), A [m, k] and B [n, k]
// row-major (both K-major, CUTLASS's "TN"), out [m, n] row-major. The bias is
// a per-column vector of out, broadcast down the rows in the epilogue. One
// kernel per dtype and tile configuration serves Gelu and None: the choice is
// a runtime argument, uniform across the grid, so no branch diverges.
// Compiled for sm_90a only (wgmma); built as a stub without CUTLASS.
#include "backends/cuda/matmul_cutlass.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"

#if RLX_CUTLASS
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/kernel_hardware_info.h>
#endif

#include <string>

namespace rlx::cuda {

#if RLX_CUTLASS
namespace {

// erf-GELU or the identity, picked by an epilogue argument. CUTLASS's GELU is
// the erf form (GELU_taylor is the tanh one). The epilogue takes the
// Arguments type from the scalar functor and calls the Array one with it.
template <class T>
struct GeluOrIdentity {
  struct Arguments {
    bool gelu = true;
  };
  CUTLASS_HOST_DEVICE T operator()(T const& v, Arguments const& args) const {
    return args.gelu ? cutlass::epilogue::thread::GELU<T>{}(v) : v;
  }
};

template <class T, int N>
struct GeluOrIdentity<cutlass::Array<T, N>> {
  using Arguments = typename GeluOrIdentity<T>::Arguments;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v, Arguments const& args) const {
    if (!args.gelu) return v;
    return cutlass::epilogue::thread::GELU<cutlass::Array<T, N>>{}(v);
  }
};

// 16-byte TMA accesses: 8 elements of 2 bytes.
constexpr int kAlign = 8;

template <class T, class Tile, class Cluster, class MainSchedule, class EpiSchedule>
struct GemmFor {
  using Fusion = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<GeluOrIdentity, T, float, T>;
  // void C: no source operand is read (beta is always 0).
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, kAlign, T,
      cutlass::layout::RowMajor, kAlign, EpiSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, cutlass::layout::RowMajor, kAlign, T,
      cutlass::layout::ColumnMajor, kAlign, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Config 0: 128x128 tiles, ping-pong (one warp group's epilogue, heavy with
// erf, overlaps the other's main loop). Config 1: 128x256 tiles, both warp
// groups on one tile (fewer, larger tiles for wide N).
template <class T>
using GemmPingpong =
    typename GemmFor<T, cute::Shape<cute::_128, cute::_128, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                     cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                     cutlass::epilogue::TmaWarpSpecialized>::Gemm;
template <class T>
using GemmCooperative =
    typename GemmFor<T, cute::Shape<cute::_128, cute::_256, cute::_64>, cute::Shape<cute::_1, cute::_1, cute::_1>,
                     cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                     cutlass::epilogue::TmaWarpSpecializedCooperative>::Gemm;

template <class Gemm>
typename Gemm::Arguments arguments_for(const MatMulParams& p, const uint8_t* arena, int sm_count) {
  using Kernel = typename Gemm::GemmKernel;
  using Element = typename Gemm::ElementA;
  const auto* a = reinterpret_cast<const Element*>(arena + p.a);
  const auto* b = reinterpret_cast<const Element*>(arena + p.b);
  auto* out = reinterpret_cast<Element*>(const_cast<uint8_t*>(arena) + p.out);
  // Row-major A [m, k] and out [m, n]; B [n, k] row-major is CUTLASS's
  // column-major K x N. Batch (L) 1, so its strides are unused.
  typename Kernel::StrideA stride_a = cute::make_stride(int64_t(p.lda), cute::Int<1>{}, int64_t(0));
  typename Kernel::StrideB stride_b = cute::make_stride(int64_t(p.ldb), cute::Int<1>{}, int64_t(0));
  typename Kernel::StrideC stride_c = cute::make_stride(int64_t(p.ldc), cute::Int<1>{}, int64_t(0));
  typename Kernel::StrideD stride_d = cute::make_stride(int64_t(p.ldc), cute::Int<1>{}, int64_t(0));
  cutlass::KernelHardwareInfo hw;
  cudaGetDevice(&hw.device_id);
  hw.sm_count = sm_count;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {int(p.m), int(p.n), int(p.k), 1},
                                {a, stride_a, b, stride_b},
                                {{}, nullptr, stride_c, out, stride_d},
                                hw};
  auto& fusion = args.epilogue.thread;
  fusion.alpha = 1.f;
  fusion.beta = 0.f;
  fusion.bias_ptr = p.bias != kNoBuffer ? reinterpret_cast<const Element*>(arena + p.bias) : nullptr;
  fusion.activation.gelu = p.act == Activation::Gelu;
  return args;
}

// Calls f.operator()<Gemm>() for the dtype's kernel of that configuration.
template <class F>
auto with_gemm(DType dt, int config, F&& f) {
  if (dt == DType::F16)
    return config == 0 ? f.template operator()<GemmPingpong<cutlass::half_t>>()
                       : f.template operator()<GemmCooperative<cutlass::half_t>>();
  return config == 0 ? f.template operator()<GemmPingpong<cutlass::bfloat16_t>>()
                     : f.template operator()<GemmCooperative<cutlass::bfloat16_t>>();
}

bool aligned16(uint64_t v) { return v % 16 == 0; }

int sm_count() {
  int device = 0;
  cudaGetDevice(&device);
  return cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
}

}  // namespace

struct CutlassGemm::Impl {
  virtual ~Impl() = default;
  virtual void run(const LaunchContext& ctx) = 0;
};

namespace {

template <class Gemm>
struct GemmImpl final : CutlassGemm::Impl {
  Gemm gemm;
  void* workspace = nullptr;

  GemmImpl(const MatMulParams& p, uint8_t* arena) {
    const auto args = arguments_for<Gemm>(p, arena, sm_count());
    const size_t bytes = Gemm::get_workspace_size(args);
    if (bytes > 0) check(cudaMalloc(&workspace, bytes), "CUTLASS GEMM workspace");
    if (gemm.initialize(args, workspace) != cutlass::Status::kSuccess) {
      cudaFree(workspace);
      throw Error("CUTLASS GEMM: initialize failed (m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                  " k=" + std::to_string(p.k) + ")");
    }
  }
  ~GemmImpl() override {
    if (workspace) cudaFree(workspace);
  }
  void run(const LaunchContext& ctx) override {
    // Programmatic launch as every rlx kernel (launch.cuh): the GEMM's
    // blocks start as the kernel before it drains and wait inside.
    const cutlass::Status s = gemm.run(ctx.stream, nullptr, pdl_enabled());
    const cudaError_t e = cudaGetLastError();
    if (s != cutlass::Status::kSuccess || e != cudaSuccess)
      throw Error(std::string("CUTLASS GEMM launch failed for ") + ctx.label + ": " +
                  cutlassGetStatusString(s) + ", " + cudaGetErrorString(e));
  }
};

}  // namespace

bool cutlass_gemm_available() {
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;  // sm_90a code runs on 9.0 only
}

bool cutlass_gemm_eligible(const MatMulParams& p, const uint8_t* arena) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return false;
  if (p.act != Activation::Gelu && p.act != Activation::None) return false;
  const uint64_t es = dtype_size(p.dtype), base = reinterpret_cast<uint64_t>(arena);
  const bool shape_ok = p.batch == 1 && !p.trans_a && p.trans_b && p.m >= 1 && p.n >= 1 && p.k >= 1 &&
                        p.m < (int64_t(1) << 31) && p.n < (int64_t(1) << 31) && p.k < (int64_t(1) << 31) &&
                        p.k % kAlign == 0 && p.n % kAlign == 0 && p.lda >= p.k && p.ldb >= p.k && p.ldc >= p.n;
  // TMA needs 16-byte aligned bases and row strides.
  const bool aligned = aligned16(base + p.a) && aligned16(base + p.b) && aligned16(base + p.out) &&
                       (p.bias == kNoBuffer || aligned16(base + p.bias)) && aligned16(uint64_t(p.lda) * es) &&
                       aligned16(uint64_t(p.ldb) * es) && aligned16(uint64_t(p.ldc) * es);
  if (!shape_ok || !aligned || !cutlass_gemm_available()) return false;
  bool ok = true;
  for (int config = 0; config < CutlassGemm::kConfigs; ++config)
    ok = ok && with_gemm(p.dtype, config, [&]<class Gemm>() {
           return Gemm::can_implement(arguments_for<Gemm>(p, arena, 1)) == cutlass::Status::kSuccess;
         });
  return ok;
}

CutlassGemm::CutlassGemm(const MatMulParams& p, uint8_t* arena, int config) {
  RLX_CHECK(config >= 0 && config < kConfigs, "CUTLASS GEMM: no configuration " + std::to_string(config));
  with_gemm(p.dtype, config, [&]<class Gemm>() { impl_ = std::make_unique<GemmImpl<Gemm>>(p, arena); });
}

void CutlassGemm::run(const LaunchContext& ctx) const { impl_->run(ctx); }

#else  // built without CUTLASS or without sm_90

struct CutlassGemm::Impl {};

bool cutlass_gemm_available() { return false; }

bool cutlass_gemm_eligible(const MatMulParams&, const uint8_t*) { return false; }

CutlassGemm::CutlassGemm(const MatMulParams&, uint8_t*, int) {
  throw Error("rlx was built without CUTLASS");
}

void CutlassGemm::run(const LaunchContext&) const {}

#endif

CutlassGemm::~CutlassGemm() = default;

}  // namespace rlx::cuda
