// libFuzzer: any bytes as tokenizer.json (first byte even) or as vocab.txt
// (odd). Loading either fails with rlx::Error or gives a tokenizer whose
// encodings hold only ids it knows.
#include <cstdlib>

#include "fuzz_files.h"
#include "rlx/error.h"
#include "tokenizers/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool json = data[0] % 2 == 0;
  const auto path = rlx::fuzz::scratch_dir() / (json ? "tokenizer.json" : "vocab.txt");
  rlx::fuzz::write_file(path, data + 1, size - 1);
  try {
    rlx::WordPiece wp = json ? rlx::WordPiece::from_tokenizer_json(path.string())
                             : rlx::WordPiece::from_vocab_txt(path.string());
    rlx::Encoding e = wp.encode("Hello, [CLS] wörld! 東京 [MASK]x ##ab", 16);
    if (e.size() > 16 || e.size() < 2) std::abort();
    for (int32_t id : e.ids)
      if (id < 0 || id > wp.max_id()) std::abort();
  } catch (const rlx::Error&) {
  }
  return 0;
}
