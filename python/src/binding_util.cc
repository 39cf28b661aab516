#include "binding_util.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <filesystem>

#include "rlx/embedder.h"
#include "rlx/error.h"
#include "rlx/session.h"

namespace rlx_py {

int parse_device_index(const std::string& s) {
  if (s.rfind("cuda:", 0) != 0) return 0;
  const std::string n = s.substr(5);
  if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos)
    throw nb::value_error(("device '" + s + "': the GPU index must be a number ('cuda:0', 'cuda:1', ...)").c_str());
  return std::stoi(n);
}

rlx::Device parse_device(const std::string& s) {
  if (s == "auto") return rlx::Device::Auto;
  if (s == "cpu") return rlx::Device::Cpu;
  if (s == "cuda" || s.rfind("cuda:", 0) == 0) {
    parse_device_index(s);  // a well-formed index
    return rlx::Device::Cuda;
  }
  throw nb::value_error(("device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not '" + s + "'").c_str());
}

rlx::DType parse_dtype(const std::string& s) {
  if (s == "f32" || s == "float32") return rlx::DType::F32;
  if (s == "f16" || s == "float16") return rlx::DType::F16;
  if (s == "bf16" || s == "bfloat16") return rlx::DType::BF16;
  throw nb::value_error(("dtype must be 'f32', 'f16' or 'bf16', not '" + s + "'").c_str());
}

rlx::Device resolve_device(rlx::Device d) {
  if (d != rlx::Device::Auto) return d;
  return rlx::cuda_available() ? rlx::Device::Cuda : rlx::Device::Cpu;
}

void set_device_and_quantize(rlx::EmbedderOptions& o, const std::string& device,
                             const std::optional<std::string>& quantize) {
  if (quantize && *quantize != "int8")
    throw nb::value_error(("quantize must be None or 'int8', not '" + *quantize + "'").c_str());
  o.int8_products = quantize.has_value();
  const rlx::Device asked = parse_device(device);
  if (o.int8_products && asked == rlx::Device::Cuda)
    throw nb::value_error("quantize='int8' runs on the CPU only; use device='cpu' (or f16/bf16 on the GPU)");
  o.device = o.int8_products ? rlx::Device::Cpu : resolve_device(asked);
  o.device_index = parse_device_index(device);
}

const char* device_name(rlx::Device d) {
  switch (d) {
    case rlx::Device::Cpu: return "cpu";
    case rlx::Device::Cuda: return "cuda";
    case rlx::Device::Auto: return "auto";
  }
  return "?";
}

namespace {
[[noreturn]] void file_not_found(const std::string& message, const std::string& path) {
  PyErr_SetObject(PyExc_FileNotFoundError, nb::make_tuple(2, message, path).ptr());
  throw nb::python_error();
}
}  // namespace

std::string model_path(const std::string& path_or_hub_id) {
  std::string path;
  try {
    path = rlx::resolve_model_dir(path_or_hub_id);
  } catch (const rlx::Error& e) {  // a Hub id that is not in the cache
    file_not_found(e.what(), path_or_hub_id);
  }
  if (!std::filesystem::exists(path)) file_not_found("no model directory at '" + path + "'", path);
  return path;
}

int batch_bucket(int batch_size) {
  if (batch_size < 1) throw nb::value_error(("batch_size must be >= 1, not " + std::to_string(batch_size)).c_str());
  int b = 1;
  while (b * 2 <= std::min(batch_size, rlx::EmbedderOptions::kMaxBatch)) b *= 2;
  return b;
}

float* new_floats(size_t n) { return new float[std::max<size_t>(n, 1)]; }

nb::capsule owner_of(float* p) {
  return nb::capsule(p, [](void* q) noexcept { delete[] static_cast<float*>(q); });
}

nb::str utf8_text(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
}

InterruptCheck::~InterruptCheck() {
  Py_XDECREF(type_);
  Py_XDECREF(value_);
  Py_XDECREF(trace_);
}

bool InterruptCheck::poll() {
  if (caught_) return true;
  // Often enough that Ctrl-C feels immediate, rarely enough that taking the
  // GIL (which another Python thread may hold) costs nothing per token.
  constexpr auto kPeriod = std::chrono::milliseconds(20);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < kPeriod) return false;
  last_ = now;
  nb::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    PyErr_Fetch(&type_, &value_, &trace_);
    caught_ = true;
  }
  return caught_;
}

void InterruptCheck::rethrow() {
  if (!caught_) return;
  caught_ = false;
  PyErr_Restore(type_, value_, trace_);
  type_ = value_ = trace_ = nullptr;
  throw nb::python_error();
}

}  // namespace rlx_py
