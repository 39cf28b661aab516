#include "models/gguf_held_quant.h"

#include <cstring>

#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr size_t kQ5_0Bytes = 22, kQ8_0Bytes = 34, kQ4_KBytes = 144, kQ4_1Bytes = 20;

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}
void put_f16(uint8_t* p, float v) {
  const uint16_t h = float_to_half(v);
  std::memcpy(p, &h, 2);
}

// Q5_0 (d, 32 fifth bits, 16 bytes of low nibbles) -> Q8_0 (d, 32 bytes).
void q5_0_to_q8_0(const uint8_t* b, uint8_t* out) {
  std::memcpy(out, b, 2);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = int((qh >> j) << 4) & 0x10, h1 = int(qh >> (j + 12)) & 0x10;
    out[2 + j] = uint8_t(int8_t(((qs[j] & 0xF) | h0) - 16));
    out[2 + j + 16] = uint8_t(int8_t(((qs[j] >> 4) | h1) - 16));
  }
}

// Q4_K (d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles)
// -> 8 Q4_1 blocks (d, m, 16 bytes: byte i holds values i and i + 16).
void q4_k_to_q4_1(const uint8_t* b, uint8_t* out) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int s = 0; s < 8; ++s, out += kQ4_1Bytes) {
    uint8_t sc, m;
    ggml_scale_min_k4(s, scales, sc, m);
    put_f16(out, d * float(sc));
    put_f16(out + 2, -(dmin * float(m)));
    // Sub-block s: the low nibbles of bytes [32 (s / 2), +32) for even s, the high ones for odd.
    const uint8_t* src = q + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int i = 0; i < 16; ++i)
      out[4 + i] = uint8_t(((src[i] >> shift) & 0xF) | (((src[i + 16] >> shift) & 0xF) << 4));
  }
}

}  // namespace

std::optional<QuantType> held_quant_type(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return QuantType::Q8_0;
    case GgmlType::Q4_0: return QuantType::Q4_0;
    case GgmlType::Q4_1: return QuantType::Q4_1;
    case GgmlType::Q4_K: return QuantType::Q4_1;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return QuantType::Q8_0;
    default: return std::nullopt;
  }
}

bool held_as_stored(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1; }

bool held_from_blocks(GgmlType t) { return t == GgmlType::Q5_0 || t == GgmlType::Q4_K; }

std::vector<uint8_t> held_blocks(GgmlType t, std::span<const uint8_t> blocks) {
  RLX_CHECK(held_from_blocks(t), "gguf: no block conversion for " << ggml_type_name(t));
  const size_t in = t == GgmlType::Q5_0 ? kQ5_0Bytes : kQ4_KBytes;
  const size_t out = t == GgmlType::Q5_0 ? kQ8_0Bytes : 8 * kQ4_1Bytes;
  RLX_CHECK(blocks.size() % in == 0, "gguf: " << blocks.size() << " bytes are no whole " << ggml_type_name(t)
                                              << " blocks");
  const size_t n = blocks.size() / in;
  std::vector<uint8_t> held(n * out);
  for (size_t i = 0; i < n; ++i) {
    if (t == GgmlType::Q5_0) q5_0_to_q8_0(blocks.data() + i * in, held.data() + i * out);
    else q4_k_to_q4_1(blocks.data() + i * in, held.data() + i * out);
  }
  return held;
}

void load_held_quant(const ParamSink& sink, const LlamaParamSource& s, const GgufFile& f, const std::string& tensor) {
  const GgmlType type = f.tensor(tensor).type;
  RLX_CHECK(s.quant && held_quant_type(type) == s.quant,
            "gguf: '" << f.path() << "', tensor '" << tensor << "' (" << ggml_type_name(type) << ") is not held as "
                      << (s.quant ? quant_type_name(*s.quant) : "floats"));
  const std::span<const uint8_t> b = f.bytes(tensor);
  if (held_from_blocks(type)) set_quantized_weight_blocks(sink, s, held_blocks(type, b));
  else if (held_as_stored(type)) set_quantized_weight_blocks(sink, s, b);
  else set_quantized_weight(sink, s, f.to_f32(tensor));
}

}  // namespace rlx
