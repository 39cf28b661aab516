// What every GGUF tokenizer loader reads and checks the same way: the token
// types, the special-token ids and byte tokens. Errors name the file and the
// key or the token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rlx {

class GgufFile;

// llama.cpp's llama_token_type: the values tokenizer.ggml.token_type may hold.
enum GgufTokenType : int32_t {
  kTokenUndefined = 0,
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

// tokenizer.ggml.token_type, one per token (all normal when absent); a
// count that is not n or a value outside the enum is refused.
std::vector<int32_t> read_token_types(const GgufFile& f, size_t n, const std::string& where);

// The id under key, or -1 when the key is absent; an id outside [0, n) is
// refused. (llama.cpp warns and falls back to its default id; a file naming a
// token it does not hold is malformed, so here it is an error.)
int32_t read_token_id(const GgufFile& f, const char* key, size_t n, const std::string& where);

// Every tokenizer.ggml.*_token_id key the file holds, checked as read_token_id does.
void check_special_token_ids(const GgufFile& f, size_t n, const std::string& where);

// The byte of a "<0xNN>" token (two hex digits, either case); false for
// anything else, so "<0x4G>" is not byte 4.
bool parse_byte_token(const std::string& token, uint8_t& byte);

}  // namespace rlx
