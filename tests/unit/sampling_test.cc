// Host sampling: greedy, top-k and top-p limits, and temperature sampling
// following the softmax's probabilities.
#include "models/sampling.h"

#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_EQ(Sampler({}).next(l), 617);
  for (int seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(Sampler({1.f, 1, 1.f, uint64_t(seed)}).next(l), 617);    // top-k 1
    EXPECT_EQ(Sampler({1.f, 0, 1e-6f, uint64_t(seed)}).next(l), 617);  // top-p tiny
  }
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmax) {
  // logits 0, ln 2, ln 4 at temperature 1: probabilities 1/7, 2/7, 4/7.
  std::vector<float> l = {0.f, std::log(2.f), std::log(4.f)};
  Sampler s({1.f, 0, 1.f, 42});
  int count[3] = {0, 0, 0};
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[s.next(l)];
  EXPECT_NEAR(count[0] / double(n), 1 / 7.0, 0.015);
  EXPECT_NEAR(count[1] / double(n), 2 / 7.0, 0.015);
  EXPECT_NEAR(count[2] / double(n), 4 / 7.0, 0.015);
  // top-k 2 drops the least likely: 1/3, 2/3.
  Sampler k2({1.f, 2, 1.f, 43});
  int c2[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) ++c2[k2.next(l)];
  EXPECT_EQ(c2[0], 0);
  EXPECT_NEAR(c2[1] / double(n), 1 / 3.0, 0.015);
  // top-p 0.8: 4/7 < 0.8 <= 6/7 keeps the two most likely.
  Sampler p8({1.f, 0, 0.8f, 44});
  int c3[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) ++c3[p8.next(l)];
  EXPECT_EQ(c3[0], 0);
  EXPECT_NEAR(c3[2] / double(n), 2 / 3.0, 0.015);
}

TEST(Sampling, RejectsBadOptions) {
  EXPECT_NE(test::error_of([] { Sampler({1.f, -1, 1.f, 0}); }).find("top-k"), std::string::npos);
  EXPECT_NE(test::error_of([] { Sampler({1.f, 0, 1.5f, 0}); }).find("top-p"), std::string::npos);
}

}  // namespace
}  // namespace rlx
