// The embedder on the GPU for each encoder family, in f32, f16 and bf16:
// embeddings (every pooling mode computed in or after the graph) and
// cross-encoder logits of a random model of odd sizes against the
// double-precision reference forward of tests/models/tiny_bert.h.
#include <gtest/gtest.h>

#include <cmath>

#include "models/embedder.h"
#include "models/tiny_bert.h"  // tests/models

namespace rlx {
namespace {

using test::TinyBert;

const std::vector<std::vector<int>> kWords = {{3}, {0, 7, 11, 2, 19, 4, 4}, {22, 1}, {}, {5, 6, 8, 9, 10, 12, 13, 14, 15, 16, 17}};

struct Case {
  std::string family;
  DType dtype;
};

class GpuEmbedderFamilies : public ::testing::TestWithParam<Case> {};

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += double(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

TEST_P(GpuEmbedderFamilies, EmbeddingsAndScoresMatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device present: GPU tests skipped";
  const Case c = GetParam();
  const double min_cos = c.dtype == DType::F32 ? 0.9999 : 0.999;
  test::TempDir d;
  test::TinyBertSpec s;
  s.family = c.family;
  TinyBert m(s);
  m.write(d.path());
  std::vector<std::string> texts;
  for (const auto& w : kWords) texts.push_back(TinyBert::text_of(w));
  for (const std::string mode : {"mean", "cls", "max", "lasttoken"}) {
    test::write_sentence_modules(d.path(), mode, true);
    EmbedderOptions o;
    o.device = Device::Cuda;
    o.dtype = c.dtype;
    o.max_batch = 4;
    Embedder e(d.path().string(), o);
    auto got = e.embed(texts);
    ASSERT_EQ(got.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = m.ids_of(kWords[i]);
      auto want = m.pool(m.hidden(ids, std::vector<int32_t>(ids.size(), 0)), mode);
      ASSERT_EQ(got[i].size(), want.size());
      for (float x : got[i]) ASSERT_TRUE(std::isfinite(x)) << mode << " row " << i;
      EXPECT_GE(cosine(got[i], want), min_cos) << c.family << " " << mode << " row " << i;
    }
  }
  test::TempDir ce;
  s.classifier = true;
  TinyBert cm(s);
  cm.write(ce.path());
  EmbedderOptions o;
  o.device = Device::Cuda;
  o.dtype = c.dtype;
  Embedder e(ce.path().string(), o);
  const std::vector<int> q = {2, 9, 14};
  std::vector<std::string> docs;
  for (const auto& w : kWords) docs.push_back(TinyBert::text_of(w));
  auto got = e.logits(TinyBert::text_of(q), docs);
  for (size_t i = 0; i < docs.size(); ++i) {
    auto [ids, types] = cm.pair_ids(q, kWords[i]);
    double want = cm.logit(ids, types);
    EXPECT_NEAR(got[i], want, c.dtype == DType::F32 ? 2e-4 : 3e-2 * std::max(1.0, std::fabs(want)))
        << c.family << " pair " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GpuEmbedderFamilies,
                         ::testing::Values(Case{"bert", DType::F32}, Case{"bert", DType::F16}, Case{"bert", DType::BF16},
                                           Case{"roberta", DType::F32}, Case{"roberta", DType::F16},
                                           Case{"roberta", DType::BF16}, Case{"distilbert", DType::F32},
                                           Case{"distilbert", DType::F16}, Case{"distilbert", DType::BF16},
                                           Case{"xlm-roberta", DType::F32}, Case{"xlm-roberta", DType::F16}),
                         [](const auto& info) {
                           return (info.param.family == "xlm-roberta" ? "xlm_roberta" : info.param.family) + "_" +
                                  (info.param.dtype == DType::F32 ? "f32" : info.param.dtype == DType::F16 ? "f16" : "bf16");
                         });

}  // namespace
}  // namespace rlx
