// Host sampling: greedy, top-k and top-p limits (ties at a threshold kept),
// frequencies that follow the tempered softmax over the kept tokens, NaN and
// infinite logits, and draws that depend only on (seed, position).
#include "models/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "test_util.h"

namespace rlx {
namespace {

std::vector<float> odd_logits() {
  std::vector<float> l = test::random_floats(1001, 5, -4.f, 4.f);
  l[617] = 9.f;
  return l;
}

TEST(Sampling, GreedyAndTightLimitsPickTheArgmax) {
  auto l = odd_logits();
  EXPECT_EQ(argmax(l), 617);
  EXPECT_EQ(Sampler({}).next(l, 0), 617);
  for (int seed = 0; seed < 20; ++seed)
    for (int64_t pos : {0, 1, 77, 4096}) {
      EXPECT_EQ(Sampler({1.f, 1, 1.f, uint64_t(seed)}).next(l, pos), 617);    // top-k 1
      EXPECT_EQ(Sampler({1.f, 0, 1e-6f, uint64_t(seed)}).next(l, pos), 617);  // top-p tiny
      EXPECT_EQ(Sampler({2.f, 1, 1e-6f, uint64_t(seed)}).next(l, pos), 617);
    }
  // Random rows without ties: top-k 1 and tiny top-p are the argmax.
  for (uint64_t s = 0; s < 50; ++s) {
    const std::vector<float> r = test::random_floats(257, 100 + s, -3.f, 3.f);
    EXPECT_EQ(Sampler({0.7f, 1, 1.f, s}).next(r, int64_t(s)), argmax(r));
    EXPECT_EQ(Sampler({0.7f, 0, 1e-4f, s}).next(r, int64_t(s)), argmax(r));
  }
}

// softmax(l / T) over the tokens the limits keep, computed directly: top-k
// keeps l >= the k-th largest; top-p keeps l >= t for the largest t whose
// mass {l >= t} reaches top_p of the kept mass.
std::vector<double> kept_softmax(const std::vector<float>& l, float temp, int top_k, float top_p) {
  std::vector<float> sorted = l;
  std::sort(sorted.rbegin(), sorted.rend());
  const float mx = sorted[0];
  float t = top_k > 0 && size_t(top_k) < l.size() ? sorted[size_t(top_k - 1)] : -INFINITY;
  double z = 0;
  for (float v : l)
    if (v >= t) z += std::exp((double(v) - mx) / temp);
  if (top_p < 1.f) {
    for (float cand : sorted) {
      double mass = 0;
      for (float v : l)
        if (v >= cand && v >= t) mass += std::exp((double(v) - mx) / temp);
      if (mass >= top_p * z) {
        t = std::max(t, cand);
        break;
      }
    }
  }
  std::vector<double> p(l.size(), 0.0);
  double kept = 0;
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i] >= t) kept += p[i] = std::exp((double(l[i]) - mx) / temp);
  for (double& x : p) x /= kept;
  return p;
}

// Frequencies over n positions within 4 sigma per token and a chi-square
// bound (cells expecting 5 or more); tokens outside the kept set never drawn.
void expect_frequencies(const std::vector<float>& l, const SamplingOptions& o, const std::vector<double>& p,
                        const std::string& what) {
  const int n = 20000;
  std::vector<int> count(l.size(), 0);
  const Sampler s(o);
  for (int i = 0; i < n; ++i) ++count[size_t(s.next(l, i))];
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < l.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(count[i], 0) << what << ": token " << i << " is not in the kept set";
      continue;
    }
    const double mean = n * p[i], sd = std::sqrt(n * p[i] * (1 - p[i]));
    EXPECT_LE(std::abs(count[i] - mean), 4 * sd + 1) << what << ": token " << i;
    if (mean < 5) continue;  // too rare a cell for the chi-square approximation
    chi2 += (count[i] - mean) * (count[i] - mean) / mean;
    ++df;
  }
  if (df > 0) EXPECT_LT(chi2, df + 6 * std::sqrt(2.0 * df)) << what;
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmaxOfTheKeptTokens) {
  // Two tokens tie at the top (2 and 4).
  const std::vector<float> l = {1.f, -0.5f, 2.f, 0.3f, 2.f, -3.f};
  struct Case {
    float temp;
    int top_k;
    float top_p;
    size_t kept;
  };
  const Case cases[] = {{1.f, 0, 1.f, 6},    {0.5f, 3, 1.f, 3},   {2.f, 2, 1.f, 2},  {2.f, 1, 1.f, 2},
                        {1.f, 0, 0.6f, 2},   {1.f, 0, 0.85f, 3},  {1.5f, 4, 0.8f, 3}, {0.3f, 0, 1.f, 6},
                        {3.f, 5, 0.97f, 5}};
  uint64_t seed = 40;
  for (const Case& c : cases) {
    const std::vector<double> p = kept_softmax(l, c.temp, c.top_k, c.top_p);
    EXPECT_EQ(size_t(std::count_if(p.begin(), p.end(), [](double x) { return x > 0; })), c.kept)
        << "T " << c.temp << " top-k " << c.top_k << " top-p " << c.top_p;
    expect_frequencies(l, {c.temp, c.top_k, c.top_p, ++seed},
                       p, "T " + std::to_string(c.temp) + " top-k " + std::to_string(c.top_k) + " top-p " +
                              std::to_string(c.top_p));
  }
  // logits 0, ln 2, ln 4 at temperature 1: probabilities 1/7, 2/7, 4/7.
  const std::vector<float> l3 = {0.f, std::log(2.f), std::log(4.f)};
  expect_frequencies(l3, {1.f, 0, 1.f, 42}, {1 / 7.0, 2 / 7.0, 4 / 7.0}, "1:2:4");
  expect_frequencies(l3, {1.f, 2, 1.f, 43}, {0, 1 / 3.0, 2 / 3.0}, "1:2:4 top-k 2");
  // top-p 0.8: 4/7 < 0.8 <= 6/7 keeps the two most likely.
  expect_frequencies(l3, {1.f, 0, 0.8f, 44}, {0, 1 / 3.0, 2 / 3.0}, "1:2:4 top-p 0.8");
}

// NaN counts as -inf; a row whose largest value is not finite gives the
// lowest index holding it.
TEST(Sampling, NanAndInfiniteLogits) {
  const float nan = NAN, inf = INFINITY;
  const std::vector<float> some_nan = {nan, 1.f, nan, 2.f, -inf};
  expect_frequencies(some_nan, {1.f, 0, 1.f, 3}, {0, 1 / (1 + std::exp(1.0)), 0, 1 / (1 + std::exp(-1.0)), 0},
                     "NaN as -inf");
  for (int64_t pos = 0; pos < 50; ++pos) {
    EXPECT_EQ(Sampler({1.f, 0, 1.f, 9}).next({nan, nan, nan}, pos), 0);
    EXPECT_EQ(Sampler({1.f, 2, 0.5f, 9}).next({-inf, nan, -inf}, pos), 0);
    EXPECT_EQ(Sampler({1.f, 0, 1.f, 9}).next({3.f, inf, nan, inf}, pos), 1);
    EXPECT_EQ(Sampler({1.f, 1, 1.f, 9}).next({nan, -inf, 4.f}, pos), 2);
  }
}

// The draw is a function of (seed, position): repeatable, and other seeds
// or positions draw otherwise.
TEST(Sampling, DrawsDependOnSeedAndPositionOnly) {
  const std::vector<float> flat(50, 0.f);
  const Sampler a({1.f, 0, 1.f, 5}), b({1.f, 0, 1.f, 6});
  std::vector<int32_t> ra, ra2, rb;
  for (int64_t pos = 0; pos < 64; ++pos) {
    ra.push_back(a.next(flat, pos));
    rb.push_back(b.next(flat, pos));
  }
  for (int64_t pos = 0; pos < 64; ++pos) ra2.push_back(Sampler({1.f, 0, 1.f, 5}).next(flat, pos));
  EXPECT_EQ(ra, ra2);
  EXPECT_NE(ra, rb);
  EXPECT_GT(std::set<int32_t>(ra.begin(), ra.end()).size(), 20u);
}

TEST(Sampling, RejectsBadOptions) {
  EXPECT_NE(test::error_of([] { Sampler({1.f, -1, 1.f, 0}); }).find("top-k"), std::string::npos);
  EXPECT_NE(test::error_of([] { Sampler({1.f, 0, 1.5f, 0}); }).find("top-p"), std::string::npos);
  EXPECT_NE(test::error_of([] { Sampler({INFINITY, 0, 1.f, 0}); }).find("temperature"), std::string::npos);
}

}  // namespace
}  // namespace rlx
