// The `rlx` command line as a user runs it: the README's first command and
// what it prints, inspect's report, and a bad model directory.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "models/embedder.h"
#include "cli_run.h"  // tests/
#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

using Ran = test::CliRun;

Ran run_cli(const std::string& args) { return test::run_rlx(args); }

TEST(Cli, EmbedPrintsTheLibraryEmbeddingsAndTheirSimilarity) {
  ASSERT_TRUE(test::minilm_present());
  const std::vector<std::string> texts = {"A man is eating food.", "Someone is having a meal.",
                                          "The stock market fell sharply today."};
  Ran r = run_cli("embed --device cpu --model " + test::minilm_dir() + " --similarity \"" + texts[0] +
                  "\" \"" + texts[1] + "\" \"" + texts[2] + "\"");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(r.err.find("3 sentences in"), std::string::npos) << r.err;
  ASSERT_EQ(j.at("embeddings").size(), 3u);
  ASSERT_EQ(j.at("dim").get<int>(), 384);

  Embedder e(test::minilm_dir());
  auto want = e.embed(texts);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["embeddings"][i]["text"].get<std::string>(), texts[i]);
    auto got = j["embeddings"][i]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(got.size(), want[i].size());
    double norm = 0, err = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      norm += double(got[k]) * got[k];
      err = std::max(err, std::fabs(double(got[k]) - want[i][k]));
    }
    EXPECT_NEAR(norm, 1.0, 1e-4) << "embedding " << i << " is not unit length";
    EXPECT_LT(err, 1e-5) << "printed embedding " << i << " differs from the library's";
  }
  auto sim = j.at("similarity").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(sim.size(), 3u);
  for (size_t a = 0; a < 3; ++a)
    for (size_t b = 0; b < 3; ++b) {
      double dot = 0;
      for (size_t k = 0; k < want[a].size(); ++k) dot += double(want[a][k]) * want[b][k];
      EXPECT_NEAR(sim[a][b], dot, 1e-4) << a << "," << b;
    }
  EXPECT_GT(sim[0][1], sim[0][2] + 0.3) << "paraphrases must be closer than unrelated sentences";
}

// --quantize int8: the library's int8-product embeddings, bit for bit as
// printed, within cosine 0.99 of f32's; other names and --device cuda refused.
TEST(Cli, EmbedQuantizeInt8IsTheLibrarysInt8Path) {
  ASSERT_TRUE(test::minilm_present());
  const std::vector<std::string> texts = {"A man is eating food.", "hello"};
  Ran r = run_cli("embed --device cpu --dtype bf16 --quantize int8 --model " + test::minilm_dir() + " \"" + texts[0] +
                  "\" \"" + texts[1] + "\"");
  if (r.status != 0 && r.err.find("AVX512-VNNI") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EmbedderOptions o;
  o.dtype = DType::BF16;
  o.int8_products = true;
  const auto want = Embedder(test::minilm_dir(), o).embed(texts);
  const auto f32 = Embedder(test::minilm_dir()).embed(texts);
  for (size_t i = 0; i < texts.size(); ++i) {
    auto got = j["embeddings"][i]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(got.size(), want[i].size());
    double err = 0, dot = 0, n0 = 0, n1 = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      err = std::max(err, std::fabs(double(got[k]) - want[i][k]));
      dot += double(got[k]) * f32[i][k], n0 += double(got[k]) * got[k], n1 += double(f32[i][k]) * f32[i][k];
    }
    EXPECT_LT(err, 1e-5) << "printed embedding " << i << " differs from the library's int8 one";
    EXPECT_GE(dot / std::sqrt(n0 * n1), 0.99) << texts[i];
  }
  r = run_cli("embed --device cpu --quantize int4 --model " + test::minilm_dir() + " \"hello\"");
  EXPECT_NE(r.status, 0);
  r = run_cli("embed --device cuda --quantize int8 --model " + test::minilm_dir() + " \"hello\"");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--quantize int8 runs on the CPU only"), std::string::npos) << r.err;
}

TEST(Cli, InspectReportsFusionAndReuse) {
  Ran r = run_cli("inspect --layers 2 --hidden 96 --heads 4 --ffn 160 --seq 37");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("7 per encoder layer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("without reuse"), std::string::npos) << r.out;
}

TEST(Cli, BadModelDirectoryIsAClearError) {
  Ran r = run_cli("embed --device cpu --model /nonexistent/model \"hello\"");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("'/nonexistent/model' is not a directory"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = run_cli("embed --device cpu --model " + test::minilm_dir() + " --dtype f64 \"hello\"");
  EXPECT_NE(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("f64"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace rlx
