// What the embedding and generation bindings share: option strings to rlx's
// enums, text that is safe to hand to Python, and Ctrl-C while rlx runs
// without the GIL.
#pragma once
#include <nanobind/nanobind.h>

#include <chrono>
#include <string>

#include "rlx/dtype.h"
#include "rlx/options.h"

namespace rlx_py {

namespace nb = nanobind;

// "auto", "cpu", "cuda" or "cuda:0"; anything else is a ValueError.
rlx::Device parse_device(const std::string& s);
// "f32", "f16" or "bf16" (also "float32", "float16", "bfloat16").
rlx::DType parse_dtype(const std::string& s);
// Where "auto" lands on this machine.
rlx::Device resolve_device(rlx::Device d);
const char* device_name(rlx::Device d);

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
