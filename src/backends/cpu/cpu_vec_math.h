// Branch-free f32 exp, erfc and GELU that compilers vectorize inside loops,
// and the attribute that compiles a kernel for AVX-512, AVX2 and plain x86-64
// and picks one at run time by what the running processor has.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

// Products and sums below are contracted to FMA where the target has it.

// ThreadSanitizer instruments the clones' resolvers, which the dynamic loader
// runs before the sanitizer's runtime starts: such builds take the baseline.
#if defined(__SANITIZE_THREAD__)
#define RLX_NO_CPU_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RLX_NO_CPU_CLONES 1
#endif
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(RLX_NO_CPU_CLONES)
#define RLX_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RLX_CPU_CLONES
#endif
// For helpers of an RLX_CPU_CLONES function: inlined, they are compiled for
// each variant's instructions; called, they would run the baseline's.
#define RLX_CPU_INLINE inline __attribute__((always_inline))

namespace rlx::cpu {

// Which RLX_CPU_CLONES variant this processor runs: "x86-64-v4" (AVX-512),
// "x86-64-v3" (AVX2 + FMA) or "default".
const char* cpu_vector_isa();

// e^x to within ~2 ulp: x = n ln2 + r, |r| <= ln2/2, e^r by its degree-7
// Taylor polynomial (truncation < 1e-8 relative), times 2^n built in the
// exponent bits. Below -87.3 (where 2^n leaves the normal range) it is 0.
RLX_CPU_INLINE float exp_approx(float x) {
  // A NaN takes the low clamp, so that n below stays a finite, convertible
  // number; the NaN itself is returned at the end.
  const float xc = !(x >= -87.3f) ? -87.3f : (x > 88.3f ? 88.3f : x);
  // Round to nearest by the 1.5 * 2^23 trick: no libm call, vectorizes anywhere.
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  // ln2 in two parts; n * the first is exact, so r loses nothing.
  const float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const float scale = std::bit_cast<float>((int32_t(n) + 127) << 23);
  return x < -87.3f ? 0.f : (x != x ? x : p * scale);
}

// erfc(|x| / sqrt2) as exp(-x^2/2) R(t), t = 1 / (1 + z/2), z = |x| / sqrt2,
// R a degree-9 polynomial fitted (least squares, relative) to erfc(z) e^(z^2)
// on [0, 10]: 5e-8 relative there; beyond, erfc underflows f32 anyway.
// x^2/2 is carried as hi + lo so the tail keeps its relative accuracy.
RLX_CPU_INLINE float erfc_scaled_abs(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.f / (0.5f * z + 1.f);
  float r = -0.05595078691840172f;
  r = r * t + 0.2684580981731415f;
  r = r * t + -0.45137378573417664f;
  r = r * t + 0.23325689136981964f;
  r = r * t + 0.0080110440030694f;
  r = r * t + 0.1855889856815338f;
  r = r * t + 0.24847514927387238f;
  r = r * t + 0.281343013048172f;
  r = r * t + 0.2821962833404541f;
  r = r * t + -4.925447228742996e-06f;
  const float hi = x * x, lo = std::fma(x, x, -hi);  // exact: x*x = hi + lo
  return exp_approx(-0.5f * hi) * (1.f - 0.5f * lo) * r;
}

// x * Phi(x) = x/2 * erfc(-x/sqrt2): the negative tail keeps its relative
// accuracy because erfc is evaluated directly there, not as 1 + erf.
RLX_CPU_INLINE float gelu_erf(float x) {
  const float e = erfc_scaled_abs(x);
  return 0.5f * x * (x <= 0.f ? e : 2.f - e);
}

}  // namespace rlx::cpu
