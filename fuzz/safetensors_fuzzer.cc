// libFuzzer: any bytes as a .safetensors file. Opening either fails with
// rlx::Error or gives tensors whose bytes all lie inside the file.
#include <cstdlib>

#include "fuzz_files.h"
#include "models/safetensors.h"
#include "rlx/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = rlx::fuzz::scratch_dir() / "model.safetensors";
  rlx::fuzz::write_file(path, data, size);
  try {
    rlx::SafetensorsFile f(path.string());
    for (const std::string& name : f.names()) {
      try {
        const rlx::SafetensorInfo& t = f.info(name);
        std::span<const uint8_t> b = f.bytes(name);
        if (b.size() != t.end - t.begin || t.end > size) std::abort();  // outside the file
        std::vector<float> v = f.to_f32(name);
        if (v.size() * rlx::dtype_size(t.dtype) != b.size()) std::abort();
      } catch (const rlx::Error&) {
      }
    }
  } catch (const rlx::Error&) {
  }
  return 0;
}
