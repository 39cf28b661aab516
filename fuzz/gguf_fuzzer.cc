// libFuzzer: any bytes as a .gguf file. Opening either fails with rlx::Error
// or gives metadata and tensors whose bytes all lie inside the file, and
// every dequantizable tensor dequantizes to its element count.
#include <cstdlib>

#include "fuzz_files.h"
#include "models/gguf.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = rlx::fuzz::scratch_dir() / "model.gguf";
  rlx::fuzz::write_file(path, data, size);
  try {
    rlx::GgufFile f(path.string());
    for (const auto& [key, value] : f.metadata()) {
      if (!f.has(key)) std::abort();  // listed but not found
      try {
        if (value.type == rlx::GgufValueType::String) (void)f.get_string(key);
        if (value.is_integer()) (void)f.get_int(key);
        if (value.is_number()) (void)f.get_float(key);
        if (value.type == rlx::GgufValueType::Array) {
          if (value.elem == rlx::GgufValueType::String) (void)f.get_string_array(key);
          else (void)f.get_int_array(key);
        }
      } catch (const rlx::Error&) {
      }
    }
    for (const rlx::GgufTensorInfo& t : f.tensors()) {
      try {
        std::span<const uint8_t> b = f.bytes(t.name);
        if (b.size() != t.bytes || t.bytes > size) std::abort();  // outside the file
        if (rlx::ggml_type_dequantizable(t.type)) {
          std::vector<float> v = f.to_f32(t.name);
          if (v.size() != t.numel) std::abort();
        }
      } catch (const rlx::Error&) {
      }
    }
  } catch (const rlx::Error&) {
  }
  return 0;
}
