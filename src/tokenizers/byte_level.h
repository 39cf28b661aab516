// The pieces of byte-level BPE that are not the merges: GPT-2's byte <->
// printable-character map and the pre-tokenizer splits (the GPT-2 and Llama 3 regexes and
// Hugging Face's Digits splitter), done by hand over code points so no regex
// engine is needed. Pieces are byte ranges of the input; bytes that are not
// valid UTF-8 are kept, one "other" character each.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlx {

using ByteRange = std::pair<size_t, size_t>;  // [begin, end) into the text

// GPT-2's regex  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// applied to text[r.first, r.second); the matches are appended to out.
void split_gpt2(std::string_view text, ByteRange r, std::vector<ByteRange>& out);

// Llama 3's regex (tokenizer.json Split, GGUF pre "llama-bpe"):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// With max_digits 1 it is Qwen2's (GGUF pre "qwen2"), whose only difference
// is \p{N} for \p{N}{1,3}.
// With marks_are_letters too it is Qwen3.5's (GGUF pre "qwen35"):
// [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}] for [^\s\p{L}\p{N}].
void split_llama3(std::string_view text, ByteRange r, std::vector<ByteRange>& out, size_t max_digits = 3,
                  bool marks_are_letters = false);
extern const char* const kLlama3Pattern;
extern const char* const kQwen2Pattern;
extern const char* const kQwen35Pattern;

// Hugging Face's Digits(individual_digits=true): every \p{N} character is a
// piece of its own; the runs between them are pieces too.
void split_digits(std::string_view text, ByteRange r, std::vector<ByteRange>& out);

// The UTF-8 of the printable character GPT-2 maps byte b to.
const std::string& byte_to_unicode(uint8_t b);
// Appends the bytes that a byte-level token's characters stand for; false if
// a character is not one of the 256 (then nothing is appended for it).
bool unicode_to_bytes(std::string_view token, std::string& out);

}  // namespace rlx
