// The BERT GGUF fixture (tests/data/bert_gguf, written by
// tests/data/make_bert_gguf_case.py): its files and sentence-transformers'
// vectors, read by the CPU and GPU tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"  // tests/

namespace rlx::test {

inline const std::string kData = std::string(RLX_SOURCE_DIR) + "/tests/data/bert_gguf";
inline const std::string kF32 = kData + "/bert-f32.gguf", kF16 = kData + "/bert-f16.gguf", kDir = kData + "/st",
                  kNomic = kData + "/nomic-f32.gguf";

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<float> embedding;
  std::vector<float> nomic;  // the NomicBERT's, from a float64 forward
};

inline std::vector<Case> reference() {
  std::ifstream in(kData + "/reference.json");
  EXPECT_TRUE(in) << kData << "/reference.json is missing";
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : doc.at("texts"))
    cases.push_back({c.at("text"), c.at("ids").get<std::vector<int32_t>>(),
                     c.at("embedding").get<std::vector<float>>(), c.at("nomic").get<std::vector<float>>()});
  return cases;
}

inline std::vector<std::string> texts_of(const std::vector<Case>& cases) {
  std::vector<std::string> t;
  for (const Case& c : cases) t.push_back(c.text);
  return t;
}

inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

}  // namespace rlx::test
