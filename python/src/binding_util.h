// What the embedding, reranking and generation bindings share: option
// strings to rlx's enums, where a model is, float arrays handed to numpy,
// text that is safe to hand to Python, and Ctrl-C while rlx runs without the
// GIL.
#pragma once
#include <nanobind/nanobind.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "rlx/dtype.h"
#include "rlx/embedder.h"
#include "rlx/options.h"

namespace rlx_py {

namespace nb = nanobind;

// "auto", "cpu", "cuda" or "cuda:0"; anything else is a ValueError.
rlx::Device parse_device(const std::string& s);  // auto | cpu | cuda | cuda:N
int parse_device_index(const std::string& s);    // N of 'cuda:N', else 0
// "f32", "f16" or "bf16" (also "float32", "float16", "bfloat16").
rlx::DType parse_dtype(const std::string& s);
// Where "auto" lands on this machine.
rlx::Device resolve_device(rlx::Device d);
const char* device_name(rlx::Device d);
// An encoder's device and quantize arguments: quantize None or 'int8' (the
// products over weights in int8 on the CPU, so 'auto' means the CPU then and
// 'cuda' is a ValueError); anything else is a ValueError.
void set_device_and_quantize(rlx::EmbedderOptions& o, const std::string& device,
                             const std::optional<std::string>& quantize);

// A model directory or file, or a Hub id ("org/name") resolved in the local
// Hugging Face cache as `rlx embed --model` resolves it; FileNotFoundError
// (with rlx's list of the places looked in) when it is neither.
std::string model_path(const std::string& path_or_hub_id);

// The Embedder runs buckets of a power-of-two batch; a batch_size between
// two powers runs as the smaller one (sentence-transformers takes any).
int batch_bucket(int batch_size);

// n floats (at least one, so an empty array has a buffer) and the capsule
// that frees them with the numpy array made over them.
float* new_floats(size_t n);
nb::capsule owner_of(float* p);

// UTF-8 bytes as a str; a byte sequence that is not UTF-8 (the end of a
// reply cut inside a character) becomes U+FFFD instead of an exception.
nb::str utf8_text(const std::string& s);

// Ctrl-C while rlx works without the GIL. poll() (called without the GIL,
// between steps) takes the GIL at most every few milliseconds to let Python
// run its signal handlers; an exception they raise (KeyboardInterrupt) is
// kept until rethrow(), called with the GIL once rlx has stopped.
class InterruptCheck {
 public:
  InterruptCheck() = default;
  InterruptCheck(const InterruptCheck&) = delete;
  InterruptCheck& operator=(const InterruptCheck&) = delete;
  ~InterruptCheck();  // with the GIL
  bool poll();        // without the GIL; true once an exception is pending
  void rethrow();     // with the GIL; throws nb::python_error when poll() caught one

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  PyObject *type_ = nullptr, *value_ = nullptr, *trace_ = nullptr;
  bool caught_ = false;
};

}  // namespace rlx_py
