#include "server/base64.h"

#include <cstdint>
#include <cstring>

namespace rlx::server {

std::string base64_floats(const std::vector<float>& v) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());  // x86: little-endian already
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t x = uint32_t(uint8_t(bytes[i])) << 16;
    if (n > 1) x |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (n > 2) x |= uint32_t(uint8_t(bytes[i + 2]));
    out += abc[(x >> 18) & 63];
    out += abc[(x >> 12) & 63];
    out += n > 1 ? abc[(x >> 6) & 63] : '=';
    out += n > 2 ? abc[x & 63] : '=';
  }
  return out;
}

}  // namespace rlx::server
