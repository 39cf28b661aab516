#include "backends/cuda/nccl_collective.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "backends/cuda/device_scope.h"
#include "rlx/error.h"

#ifdef RLX_HAVE_NCCL
#include <nccl.h>
#endif

namespace rlx::cuda {

#ifdef RLX_HAVE_NCCL
namespace {

// The few NCCL entry points rlx calls, resolved from the library at first use.
struct Nccl {
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static const Nccl api = [] {
    const char* env = std::getenv("RLX_NCCL_LIBRARY");
    std::string path = env ? env : "libnccl.so.2";
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef RLX_NCCL_FOUND_LIBRARY
    if (!lib && !env) {  // where the build found it (a wheel's lib/, off the loader's path)
      path = RLX_NCCL_FOUND_LIBRARY;
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
#endif
    if (!lib) {
      const char* e = dlerror();
      throw Error("tensor parallelism: cannot load NCCL (" + path + "): " + (e ? e : "unknown error") +
                  "; install nvidia-nccl-cu13 or set RLX_NCCL_LIBRARY");
    }
    Nccl a;
    auto sym = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (!f) throw Error(std::string("tensor parallelism: ") + path + " has no " + name);
      return f;
    };
    a.comm_init_all = reinterpret_cast<decltype(a.comm_init_all)>(sym("ncclCommInitAll"));
    a.comm_destroy = reinterpret_cast<decltype(a.comm_destroy)>(sym("ncclCommDestroy"));
    a.comm_abort = reinterpret_cast<decltype(a.comm_abort)>(sym("ncclCommAbort"));
    a.all_reduce = reinterpret_cast<decltype(a.all_reduce)>(sym("ncclAllReduce"));
    a.all_gather = reinterpret_cast<decltype(a.all_gather)>(sym("ncclAllGather"));
    a.group_start = reinterpret_cast<decltype(a.group_start)>(sym("ncclGroupStart"));
    a.group_end = reinterpret_cast<decltype(a.group_end)>(sym("ncclGroupEnd"));
    a.error_string = reinterpret_cast<decltype(a.error_string)>(sym("ncclGetErrorString"));
    return a;
  }();
  return api;
}

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw Error("NCCL error in " + what + ": " + nccl().error_string(r));
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default: throw Error(std::string("all_reduce: no NCCL sum of ") + std::string(dtype_name(dt)));
  }
}

}  // namespace

NcclCollective::NcclCollective(std::vector<int> devices)
    : Collective(int(devices.size())), devices_(std::move(devices)) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int d : devices_)
    RLX_CHECK(d >= 0 && d < count, "tensor parallelism: GPU " << d << " does not exist (" << count << " present)");
  // NVLink multicast stays off unless asked for: it can take shared GPUs
  // out of service. Connections are made at init rather than at the first
  // collective, which may be inside a graph being recorded.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  comms_.assign(devices_.size(), nullptr);
  std::vector<ncclComm_t> comms(devices_.size());
  check_nccl(nccl().comm_init_all(comms.data(), int(devices_.size()), devices_.data()),
             "ncclCommInitAll over " + std::to_string(devices_.size()) + " GPUs");
  for (size_t i = 0; i < comms.size(); ++i) comms_[i] = comms[i];
  warm_up();
}

// One sum over every rank, run now (one thread issues all ranks' calls, so
// as a group): whatever NCCL sets up at its first collective is done before
// any graph records one.
void NcclCollective::warm_up() {
  const size_t n = devices_.size();
  std::vector<float*> buf(n, nullptr);
  std::vector<cudaStream_t> streams(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    DeviceScope scope(devices_[i]);
    check(cudaMalloc(&buf[i], 256 * sizeof(float)), "NCCL warm-up buffer");
    check(cudaMemset(buf[i], 0, 256 * sizeof(float)), "NCCL warm-up buffer");
    check(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "NCCL warm-up stream");
  }
  check_nccl(nccl().group_start(), "ncclGroupStart");
  for (size_t i = 0; i < n; ++i) {
    DeviceScope scope(devices_[i]);
    check_nccl(nccl().all_reduce(buf[i], buf[i], 256, ncclFloat32, ncclSum, static_cast<ncclComm_t>(comms_[i]),
                                 streams[i]),
               "the warm-up ncclAllReduce");
  }
  check_nccl(nccl().group_end(), "ncclGroupEnd");
  for (size_t i = 0; i < n; ++i) {
    DeviceScope scope(devices_[i]);
    check(cudaStreamSynchronize(streams[i]), "the warm-up ncclAllReduce");
    cudaStreamDestroy(streams[i]);
    cudaFree(buf[i]);
  }
}

NcclCollective::~NcclCollective() {
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (!comms_[i]) continue;
    DeviceScope scope(devices_[i]);
    if (aborted_.empty()) nccl().comm_destroy(static_cast<ncclComm_t>(comms_[i]));
    else nccl().comm_abort(static_cast<ncclComm_t>(comms_[i]));
  }
}

void NcclCollective::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(abort_mu_);
  if (aborted_.empty()) aborted_ = why.empty() ? "a rank failed" : why;
}

void NcclCollective::check_running(const char* what) const {
  std::lock_guard<std::mutex> lock(abort_mu_);
  RLX_CHECK(aborted_.empty(), what << ": the tensor-parallel group stopped: " << aborted_);
}

void* NcclCollective::comm(int rank) const {
  RLX_CHECK(rank >= 0 && rank < ranks(), "tensor parallelism: rank " << rank << " of " << ranks());
  return comms_[size_t(rank)];
}

void NcclCollective::all_reduce(int rank, const void* in, void* out, int64_t n, DType dt, cudaStream_t stream) const {
  check_running("all_reduce");
  check_nccl(nccl().all_reduce(in, out, size_t(n), nccl_type(dt), ncclSum, static_cast<ncclComm_t>(comm(rank)), stream),
             "ncclAllReduce of " + std::to_string(n) + " elements on rank " + std::to_string(rank));
}

void NcclCollective::all_gather(int rank, const void* in, void* out, int64_t n, DType dt, cudaStream_t stream) const {
  check_running("all_gather");
  check_nccl(nccl().all_gather(in, out, size_t(n), nccl_type(dt), static_cast<ncclComm_t>(comm(rank)), stream),
             "ncclAllGather of " + std::to_string(n) + " elements on rank " + std::to_string(rank));
}

#else  // built without nccl.h

NcclCollective::NcclCollective(std::vector<int> devices) : Collective(int(devices.size())) {
  RLX_FAIL("tensor parallelism on CUDA: rlx was built without NCCL (nccl.h was not found at build time)");
}
void NcclCollective::warm_up() {}
NcclCollective::~NcclCollective() = default;
void NcclCollective::abort(const std::string&) {}
void* NcclCollective::comm(int) const { return nullptr; }
void NcclCollective::all_reduce(int, const void*, void*, int64_t, DType, cudaStream_t) const {}
void NcclCollective::all_gather(int, const void*, void*, int64_t, DType, cudaStream_t) const {}

#endif

}  // namespace rlx::cuda
