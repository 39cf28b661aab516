// libFuzzer: any bytes as text for the default model's tokenizer
// (models/all-MiniLM-L6-v2, or $RLX_FUZZ_MODEL). The first byte picks the
// maximum length. Encodings keep to it, hold only known ids, and agree with
// the untruncated tokenization.
#include <cstdlib>
#include <string>

#include "tokenizers/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rlx::WordPiece wp = [] {
    const char* env = std::getenv("RLX_FUZZ_MODEL");
    return rlx::WordPiece::from_dir(env && *env ? env : RLX_SOURCE_DIR "/models/all-MiniLM-L6-v2");
  }();
  if (size < 1) return 0;
  const int max_len = 2 + data[0] % 64;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  rlx::Encoding e = wp.encode(text, max_len);
  if (e.size() < 2 || e.size() > size_t(max_len)) std::abort();
  for (int32_t id : e.ids)
    if (id < 0 || id > wp.max_id()) std::abort();
  std::vector<int32_t> all = wp.tokenize(text);
  // Stopping early must not change the tokens kept, and `truncated` must be right.
  const size_t kept = e.size() - 2;
  if (e.truncated != (all.size() > kept)) std::abort();
  for (size_t i = 0; i < kept; ++i)
    if (e.ids[i + 1] != all[i]) std::abort();
  return 0;
}
