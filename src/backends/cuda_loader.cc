// The CUDA backend lives in its own shared library, librlx_cuda.so, beside
// librlx.so (or at $RLX_CUDA_LIBRARY). It is loaded the first time anything
// asks for CUDA, so a process that never does (rlx --help, a CPU embedder)
// never maps the CUDA runtime or cuBLASLt.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "backends/backend.h"

namespace rlx {
namespace {

[[maybe_unused]] std::string module_path() {
  if (const char* env = std::getenv("RLX_CUDA_LIBRARY")) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_backend), &info) && info.dli_fname)
    return (std::filesystem::path(info.dli_fname).parent_path() / "librlx_cuda.so").string();
  return "librlx_cuda.so";
}

std::string& why_not() {
  static std::string reason;
  return reason;
}

Backend* load() {
#ifndef RLX_HAVE_CUDA
  why_not() = "rlx was built without the CUDA backend";
  return nullptr;
#else
  const std::string path = module_path();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why_not() = "cannot load " + path + ": " + (e ? e : "unknown error");
    return nullptr;
  }
  auto entry = reinterpret_cast<Backend* (*)()>(dlsym(lib, "rlx_cuda_backend"));
  if (!entry) {
    why_not() = path + " has no rlx_cuda_backend";
    return nullptr;
  }
  Backend* be = entry();
  if (!be) why_not() = "no CUDA device is present";
  return be;  // the library stays loaded for the life of the process
#endif
}

}  // namespace

Backend* cuda_backend() {
  static Backend* const be = load();
  return be;
}

std::string cuda_unavailable_reason() {
  cuda_backend();
  return why_not();
}

}  // namespace rlx
