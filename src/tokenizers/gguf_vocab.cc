#include "tokenizers/gguf_vocab.h"

#include "models/gguf.h"
#include "rlx/error.h"

namespace rlx {

std::vector<int32_t> read_token_types(const GgufFile& f, size_t n, const std::string& where) {
  std::vector<int32_t> types(n, kTokenNormal);
  if (!f.has("tokenizer.ggml.token_type")) return types;
  auto ty = f.get_int_array("tokenizer.ggml.token_type");
  RLX_CHECK(ty.size() == n, where << ": tokenizer.ggml.token_type has " << ty.size() << " entries for " << n
                                  << " tokens");
  for (size_t i = 0; i < n; ++i) {
    RLX_CHECK(ty[i] >= kTokenUndefined && ty[i] <= kTokenByte,
              where << ": tokenizer.ggml.token_type[" << i << "] is " << ty[i] << ", not a token type (0 to 6)");
    types[i] = int32_t(ty[i]);
  }
  return types;
}

int32_t read_token_id(const GgufFile& f, const char* key, size_t n, const std::string& where) {
  if (!f.has(key)) return -1;
  const int64_t v = f.get_int(key);
  RLX_CHECK(v >= 0 && uint64_t(v) < n,
            where << ": " << key << " is " << v << ", outside the vocabulary of " << n << " tokens");
  return int32_t(v);
}

void check_special_token_ids(const GgufFile& f, size_t n, const std::string& where) {
  const std::string prefix = "tokenizer.ggml.", suffix = "_token_id";
  for (const auto& [key, value] : f.metadata()) {
    if (key.size() > prefix.size() + suffix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      read_token_id(f, key.c_str(), n, where);
  }
}

bool parse_byte_token(const std::string& t, uint8_t& byte) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return false;
  byte = uint8_t(hi * 16 + lo);
  return true;
}

}  // namespace rlx
