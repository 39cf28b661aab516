// libFuzzer: any bytes as a SentencePiece precompiled_charsmap (the first
// half) and as text to normalize with it (the rest). Reading fails with
// rlx::Error or gives a map whose normalize() reads nothing outside it (the
// sanitizers watch).
#include <string>

#include "rlx/error.h"
#include "tokenizers/precompiled_charsmap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const std::string blob = all.substr(0, size / 2), text = all.substr(size / 2);
  try {
    rlx::PrecompiledCharsmap map(blob, "fuzz: ");
    map.normalize(text);
    map.normalize("a\xcc\x88\xcc\x81 \xef\xac\x81 x\x01" + text);
  } catch (const rlx::Error&) {
  }
  return 0;
}
