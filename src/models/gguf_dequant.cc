// ggml tensor types: block sizes and dequantization to f32. Block layouts
// follow ggml's (block_q4_0, block_q4_K, ...): all little-endian, scales f16.
#include <cstring>

#include "models/gguf.h"
#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx {
namespace {

constexpr uint64_t kQK = 32;    // elements in a Q4_0/Q4_1/Q8_0 block
constexpr uint64_t kQKK = 256;  // elements in a K-quant super-block

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

// Q4_0: d (f16), 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31.
void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(int(qs[j] & 0xF) - 8) * d;
    y[j + 16] = float(int(qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: d, m (f16), 16 bytes of nibbles: x = q * d + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0xF) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

// Q5_0: d (f16), 32 high bits (u32), 16 bytes of low nibbles: x = (q - 16) * d.
void dequant_q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = int((qh >> j) << 4) & 0x10, h1 = int(qh >> (j + 12)) & 0x10;
    y[j] = float(((qs[j] & 0xF) | h0) - 16) * d;
    y[j + 16] = float(((qs[j] >> 4) | h1) - 16) * d;
  }
}

// Q5_1: d, m (f16), 32 high bits, 16 bytes of low nibbles: x = q * d + m.
void dequant_q5_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = int((qh >> j) << 4) & 0x10, h1 = int(qh >> (j + 12)) & 0x10;
    y[j] = float((qs[j] & 0xF) | h0) * d + m;
    y[j + 16] = float((qs[j] >> 4) | h1) * d + m;
  }
}

// Q8_0: d (f16), 32 signed bytes.
void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

// Q2_K: 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit quants, d and
// dmin (f16). Two halves of 128; each quant byte serves four runs of 16.
void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* q = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int j = 0, shift = 0; j < 4; ++j, shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t s = sc[is++];
        const float dl = d * float(s & 0xF), ml = dmin * float(s >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
  }
}

// Q3_K: 32 bytes of high-bit masks, 64 bytes of 2-bit quants, sixteen 6-bit
// scales packed in 12 bytes, d (f16); a clear high bit subtracts 4.
void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const float d = f16_at(b + 108);
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
  aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
  aux[0] = (aux[0] & k2) | (((tmp >> 0) & k1) << 4);
  aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int j = 0, shift = 0; j < 4; ++j, shift += 2, m <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * float(scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          *y++ = dl * float(int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      }
    }
  }
}

// Q4_K: d, dmin (f16), 12 bytes of scales/mins, 128 bytes of nibbles; eight
// sub-blocks of 32; each 32 bytes of nibbles hold two sub-blocks (low, high).
void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    uint8_t sc, m;
    ggml_scale_min_k4(is, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    ggml_scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * float(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * float(q[l] >> 4) - m2;
  }
}

// Q5_K: Q4_K's scales and nibbles plus 32 bytes of fifth bits; sub-block
// pair p takes its high bits from bits 2p and 2p+1 of each of those bytes.
void dequant_q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    uint8_t sc, m;
    ggml_scale_min_k4(is, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    ggml_scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 signed
// 8-bit scales, d (f16). Two halves of 128 elements, 4 runs of 32 each.
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[n + l] = d * float(sc[is + 0]) * float(q1);
      y[n + l + 32] = d * float(sc[is + 2]) * float(q2);
      y[n + l + 64] = d * float(sc[is + 4]) * float(q3);
      y[n + l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

}  // namespace

void ggml_scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

const char* ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q4_1: return "Q4_1";
    case GgmlType::Q5_0: return "Q5_0";
    case GgmlType::Q5_1: return "Q5_1";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q8_1: return "Q8_1";
    case GgmlType::Q2_K: return "Q2_K";
    case GgmlType::Q3_K: return "Q3_K";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q5_K: return "Q5_K";
    case GgmlType::Q6_K: return "Q6_K";
    case GgmlType::Q8_K: return "Q8_K";
    case GgmlType::BF16: return "BF16";
  }
  return "unknown";
}

bool ggml_type_layout(GgmlType t, uint64_t& be, uint64_t& bb) {
  switch (t) {
    case GgmlType::F32: be = 1; bb = 4; return true;
    case GgmlType::F16: be = 1; bb = 2; return true;
    case GgmlType::BF16: be = 1; bb = 2; return true;
    case GgmlType::Q4_0: be = kQK; bb = 2 + kQK / 2; return true;
    case GgmlType::Q4_1: be = kQK; bb = 4 + kQK / 2; return true;
    case GgmlType::Q5_0: be = kQK; bb = 2 + 4 + kQK / 2; return true;
    case GgmlType::Q5_1: be = kQK; bb = 4 + 4 + kQK / 2; return true;
    case GgmlType::Q8_0: be = kQK; bb = 2 + kQK; return true;
    case GgmlType::Q8_1: be = kQK; bb = 4 + kQK; return true;
    case GgmlType::Q2_K: be = kQKK; bb = kQKK / 16 + kQKK / 4 + 4; return true;
    case GgmlType::Q3_K: be = kQKK; bb = kQKK / 8 + kQKK / 4 + 12 + 2; return true;
    case GgmlType::Q4_K: be = kQKK; bb = 4 + 12 + kQKK / 2; return true;
    case GgmlType::Q5_K: be = kQKK; bb = 4 + 12 + kQKK / 8 + kQKK / 2; return true;
    case GgmlType::Q6_K: be = kQKK; bb = kQKK / 2 + kQKK / 4 + kQKK / 16 + 2; return true;
    case GgmlType::Q8_K: be = kQKK; bb = 4 + kQKK + kQKK / 16 * 2; return true;
  }
  return false;
}

bool ggml_type_dequantizable(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

void dequantize(GgmlType t, const uint8_t* src, float* dst, uint64_t n) {
  uint64_t be = 0, bb = 0;
  RLX_CHECK(ggml_type_dequantizable(t) && ggml_type_layout(t, be, bb),
            "gguf: cannot dequantize type " << ggml_type_name(t));
  RLX_CHECK(n % be == 0, "gguf: " << n << " elements of " << ggml_type_name(t)
                                  << " are not whole blocks of " << be);
  const uint64_t blocks = n / be;
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, n * 4);  // the mapping may be unaligned
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = t == GgmlType::F16 ? half_to_float(h) : bf16_to_float(h);
      }
      return;
    default:
      break;
  }
  void (*block_fn)(const uint8_t*, float*) = nullptr;
  switch (t) {
    case GgmlType::Q4_0: block_fn = dequant_q4_0; break;
    case GgmlType::Q4_1: block_fn = dequant_q4_1; break;
    case GgmlType::Q5_0: block_fn = dequant_q5_0; break;
    case GgmlType::Q5_1: block_fn = dequant_q5_1; break;
    case GgmlType::Q5_K: block_fn = dequant_q5_k; break;
    case GgmlType::Q2_K: block_fn = dequant_q2_k; break;
    case GgmlType::Q3_K: block_fn = dequant_q3_k; break;
    case GgmlType::Q8_0: block_fn = dequant_q8_0; break;
    case GgmlType::Q4_K: block_fn = dequant_q4_k; break;
    case GgmlType::Q6_K: block_fn = dequant_q6_k; break;
    default: RLX_FAIL("gguf: cannot dequantize type " << ggml_type_name(t));
  }
#pragma omp parallel for schedule(static) if (blocks >= 4096)
  for (uint64_t i = 0; i < blocks; ++i) block_fn(src + i * bb, dst + i * be);
}

}  // namespace rlx
