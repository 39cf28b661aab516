// Pre-tokenizers that are a sequence of regex splits, each with
// tokenizers' behavior "Isolated" (a match is a piece, and so is the text
// between matches) applied to every piece the previous step left: the
// DeepSeek and Falcon vocabularies (GGUF tokenizer.ggml.pre "deepseek-llm",
// "deepseek-coder", "falcon"; their tokenizer.json pre_tokenizer Sequence).
// Every step is one of three shapes, done over code points by hand.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizers/byte_level.h"

namespace rlx {

// The regex (or sequence of regexes) a byte-level BPE pre-tokenizer splits with.
enum class BpeSplit { None, Gpt2, Llama3, Qwen2, Qwen35, DeepseekLlm, DeepseekCoder, Falcon, Tekken };

// The pieces of text: with split_digits every \p{N} apart first (Digits with
// individual_digits), then the split's regexes.
std::vector<ByteRange> pre_tokenize(std::string_view text, BpeSplit split, bool split_digits);

using CodePointSet = bool (*)(int32_t cp);

// The regex \s?[set]+ (space_prefix) or [set]{min,max} over each piece of in.
struct RunRule {
  CodePointSet set;
  bool space_prefix = false;
  size_t min_chars = 1, max_chars = SIZE_MAX;
};
void split_isolated(std::string_view text, const std::vector<ByteRange>& in, const RunRule& rule,
                    std::vector<ByteRange>& out);
// The regex \s+$: a piece's trailing whitespace becomes a piece.
void split_trailing_space(std::string_view text, const std::vector<ByteRange>& in, std::vector<ByteRange>& out);

// DeepSeek LLM: [\r\n], \s?[Latin, Greek, Cyrillic ... letters]+, \s?[ASCII and
// full-width punctuation]+, \s+$, [CJK]+, \p{N}+ (llama.cpp's list, taken
// from the model's tokenizer.json).
void split_deepseek_llm(std::string_view text, ByteRange r, std::vector<ByteRange>& out);
// DeepSeek Coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}.
void split_deepseek_coder(std::string_view text, ByteRange r, std::vector<ByteRange>& out);
// Falcon's tokenizer.json: Punctuation(Contiguous), ByteLevel's GPT-2 regex,
// Digits(individual_digits=false) and Split [0-9][0-9][0-9] over the byte-mapped
// characters (so bytes that map to numeric characters such as '²' count as digits).
void split_falcon(std::string_view text, ByteRange r, std::vector<ByteRange>& out);
// Mistral's Tekken regex: words cut where lower case turns to upper case
// (split_tekken.cc has the pattern).
void split_tekken(std::string_view text, ByteRange r, std::vector<ByteRange>& out);
extern const char* const kTekkenPattern;

}  // namespace rlx
