// Helpers for tests that write small model files into a temporary directory.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rlx/graph.h"

namespace rlx::test {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("rlx_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// A safetensors file from a literal header and data section.
inline void write_safetensors_raw(const std::filesystem::path& p, const std::string& header,
                                  const std::string& body) {
  std::ofstream out(p, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);  // little-endian hosts only
  out << header << body;
}

// A well-formed f32 safetensors file from named tensors.
inline void write_safetensors(const std::filesystem::path& p,
                              const std::map<std::string, std::pair<Shape, std::vector<float>>>& ts) {
  std::string header = "{", body;
  for (const auto& [name, t] : ts) {
    size_t begin = body.size();
    body.append(reinterpret_cast<const char*>(t.second.data()), t.second.size() * 4);
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t i = 0; i < t.first.size(); ++i) header += (i ? "," : "") + std::to_string(t.first[i]);
    header += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(body.size()) + "]}";
  }
  header += "}";
  write_safetensors_raw(p, header, body);
}

#ifdef RLX_SOURCE_DIR
// The default model, fetched by scripts/setup. Tests need it and fail
// (not skip) when it is absent: ASSERT_TRUE(test::minilm_present()).
inline std::string minilm_dir() { return std::string(RLX_SOURCE_DIR) + "/models/all-MiniLM-L6-v2"; }
inline ::testing::AssertionResult minilm_present() {
  if (std::filesystem::exists(minilm_dir() + "/model.safetensors") &&
      std::filesystem::exists(minilm_dir() + "/tokenizer.json"))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "model directory " << minilm_dir()
                                       << " is missing: run scripts/setup first";
}
#endif

}  // namespace rlx::test
