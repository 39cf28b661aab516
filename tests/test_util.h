// Shared test helpers: deterministic random data, dtype round trips, NaN
// poison, and the reference comparison every numeric test goes through.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/error.h"

namespace rlx::test {

// The message of the rlx::Error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)

 private:
  uint64_t state_;
};

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(lo + (double(hi) - lo) * rng.uniform());
  return v;
}

// Integers uniform in [lo, hi] inclusive.
inline std::vector<int32_t> random_ints(size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  Rng rng(seed);
  std::vector<int32_t> v(n);
  const uint64_t span = uint64_t(int64_t(hi) - lo + 1);
  for (auto& x : v) x = int32_t(lo + int64_t(rng.next() % span));
  return v;
}

// Floats -> stored bytes of dtype dt (rounded to nearest even).
inline std::vector<uint8_t> to_bytes(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> out(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) store_from_float(out.data(), dt, i, v[i]);
  return out;
}

inline std::vector<uint8_t> i32_bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Stored bytes of dtype dt -> floats.
inline std::vector<float> from_bytes(const std::vector<uint8_t>& b, DType dt) {
  std::vector<float> out(b.size() / dtype_size(dt));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_float(b.data(), dt, i);
  return out;
}

inline std::vector<int32_t> i32_from_bytes(const std::vector<uint8_t>& b) {
  std::vector<int32_t> out(b.size() / 4);
  if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * 4);
  return out;
}

// The values a kernel actually sees once v is stored as dt.
inline std::vector<float> quantize(const std::vector<float>& v, DType dt) {
  return from_bytes(to_bytes(v, dt), dt);
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The cosine of two vectors, summed in double (0 where either is zero).
inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

// n elements of dt filled with NaN (for i32: the bit pattern of a float NaN),
// written over outputs before a run so unwritten elements are caught.
inline std::vector<uint8_t> nan_bytes(size_t n, DType dt) {
  if (dt == DType::I32) {
    std::vector<int32_t> v(n, 0x7fc00000);
    return i32_bytes(v);
  }
  return to_bytes(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()), dt);
}

// Relative tolerance (to max |ref|) of a result stored in dt, computed in f32.
inline double tolerance(DType dt) {
  switch (dt) {
    case DType::F32: return 1e-4;
    case DType::F16: return 2e-3;
    case DType::BF16: return 2e-2;
    case DType::I32: return 0.0;
  }
  return 0.0;
}

// Fails (non-fatally) when sizes differ, got has a NaN/inf where ref is
// finite, got is all zero while ref is not, or max |got - ref| exceeds
// rel_tol * max |ref|. Reports the worst element and its index.
inline void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double rel_tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what << ": output size";
  ASSERT_FALSE(got.empty()) << what << ": empty output";
  double ref_max = 0.0;
  bool ref_all_zero = true, got_all_zero = true;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isfinite(ref[i])) ref_max = std::max(ref_max, std::fabs(ref[i]));
    if (ref[i] != 0.0) ref_all_zero = false;
    if (got[i] != 0.f) got_all_zero = false;
  }
  EXPECT_FALSE(got_all_zero && !ref_all_zero) << what << ": output is all zero (never written?)";
  const double scale = ref_max > 0.0 ? ref_max : 1.0;
  double worst = 0.0;
  size_t worst_i = 0, bad_finite = 0, first_bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool ref_finite = std::isfinite(ref[i]);
    if (ref_finite != std::isfinite(double(got[i])) ||
        (!ref_finite && !(std::isnan(ref[i]) && std::isnan(got[i])) && ref[i] != double(got[i]))) {
      if (bad_finite++ == 0) first_bad = i;
      continue;
    }
    if (!ref_finite) continue;
    const double err = std::fabs(double(got[i]) - ref[i]);
    if (err > worst) worst = err, worst_i = i;
  }
  EXPECT_EQ(bad_finite, 0u) << what << ": " << bad_finite << " elements NaN/inf where the reference "
                            << "is not (or the reverse); first at index " << first_bad << ": got "
                            << (ref.empty() ? 0.f : got[first_bad]) << ", expected " << ref[first_bad];
  EXPECT_LE(worst, rel_tol * scale) << what << ": max error " << worst << " (" << worst / scale
                                    << " of max |ref| " << ref_max << ") at index " << worst_i << ": got "
                                    << got[worst_i] << ", expected " << ref[worst_i] << "; tolerance "
                                    << rel_tol;
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double rel_tol,
                         const std::string& what) {
  expect_close(got, to_double(ref), rel_tol, what);
}

// Per-element tolerance of a result stored in dt after f32 accumulation:
// |got - ref| <= atol + rtol * |ref|. The output rounding of the dtype plus
// an allowance for reduction order; `scale` widens it for long reductions.
struct Tol {
  double atol, rtol;
};
inline Tol tol_for(DType dt, double scale = 1.0) {
  switch (dt) {
    case DType::F32: return {1e-5 * scale, 1e-4 * scale};
    case DType::F16: return {2e-3 * scale, 4e-3 * scale};
    case DType::BF16: return {1.5e-2 * scale, 2e-2 * scale};
    default: return {0, 0};
  }
}

// Element-wise comparison; NaN must match NaN. Fails on unwritten (NaN where
// a number is expected) and on all-zero output when the reference is not.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref, Tol tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0, first = got.size();
  bool ref_nonzero = false, got_nonzero = false;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i])) {
      if (!std::isnan(got[i]) && bad++ == 0) first = i;
      continue;
    }
    ref_nonzero |= ref[i] != 0;
    got_nonzero |= got[i] != 0 && !std::isnan(got[i]);
    double err = std::fabs(got[i] - ref[i]);
    if (!(err <= tol.atol + tol.rtol * std::fabs(ref[i]))) {
      if (bad++ == 0) first = i;
      if (!(err <= worst)) worst = err;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off; first at " << first
                     << ": got " << (first < got.size() ? got[first] : 0) << " want "
                     << (first < got.size() ? ref[first] : 0) << "; worst abs err " << worst;
  if (ref_nonzero) EXPECT_TRUE(got_nonzero) << what << ": output is all zero (unwritten?)";
}

}  // namespace rlx::test
