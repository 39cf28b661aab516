// libFuzzer: any bytes as a tokenizer file, the first byte picking which:
// 0 WordPiece's tokenizer.json, 1 vocab.txt, 2 a decoder embedder's
// tokenizer.json (byte-level BPE with its normalizer and post_processor
// template). Loading fails with rlx::Error or gives a tokenizer whose
// encodings fit the length asked for and hold only ids it knows.
#include <cstdlib>
#include <filesystem>

#include "fuzz_files.h"
#include "models/embedding_tokenizer.h"
#include "rlx/error.h"
#include "tokenizers/wordpiece.h"

namespace {

const char kText[] = "Hello, [CLS] wörld! 東京 [MASK]x ##ab <|endoftext|> e\xcc\x81";

void check_wordpiece(const std::filesystem::path& path, bool json) {
  rlx::WordPiece wp = json ? rlx::WordPiece::from_tokenizer_json(path.string())
                           : rlx::WordPiece::from_vocab_txt(path.string());
  rlx::Encoding e = wp.encode(kText, 16);
  if (e.size() > 16 || e.size() < 2) std::abort();
  for (int32_t id : e.ids)
    if (id < 0 || id > wp.max_id()) std::abort();
}

void check_decoder_bpe(const std::filesystem::path& dir) {
  const auto tok = rlx::load_decoder_embedding_tokenizer(dir.string());
  const rlx::TokenizedText e = tok->encode(kText, 16);
  if (e.ids.size() > 16 || e.type_ids.size() != e.ids.size()) std::abort();
  for (int32_t id : e.ids)
    if (id < 0 || size_t(id) >= tok->vocab_size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int which = data[0] % 3;
  const auto path = rlx::fuzz::scratch_dir() / (which == 1 ? "vocab.txt" : "tokenizer.json");
  rlx::fuzz::write_file(path, data + 1, size - 1);
  try {
    if (which == 2) check_decoder_bpe(rlx::fuzz::scratch_dir());
    else check_wordpiece(path, which == 0);
  } catch (const rlx::Error&) {
  }
  return 0;
}
