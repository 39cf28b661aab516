// The safetensors reader: values of every supported dtype, and each kind of
// broken file failing with a message that names the file and the tensor.
#include "models/safetensors.h"

#include <gtest/gtest.h>

#include "test_util.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "models/test_files.h"  // tests/models

namespace rlx {
namespace {

using test::error_of;

using test::TempDir;
using test::write_safetensors_raw;


TEST(Safetensors, ReadsF32F16Bf16Values) {
  TempDir dir;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> a(33 * 7), b(129), c(1);
  for (auto* v : {&a, &b, &c})
    for (float& x : *v) x = u(rng);
  std::string body;
  auto put = [&](const void* p, size_t n) { body.append(static_cast<const char*>(p), n); };
  put(a.data(), a.size() * 4);
  std::vector<uint16_t> bh(b.size()), cb(c.size());
  for (size_t i = 0; i < b.size(); ++i) bh[i] = float_to_half(b[i]);
  for (size_t i = 0; i < c.size(); ++i) cb[i] = float_to_bf16(c[i]);
  put(bh.data(), bh.size() * 2);
  put(cb.data(), cb.size() * 2);
  size_t o1 = a.size() * 4, o2 = o1 + b.size() * 2, o3 = o2 + 2;
  std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[33,7],"data_offsets":[0,)" +
                       std::to_string(o1) + R"(]},"b":{"dtype":"F16","shape":[129],"data_offsets":[)" +
                       std::to_string(o1) + "," + std::to_string(o2) +
                       R"(]},"c":{"dtype":"BF16","shape":[1,1],"data_offsets":[)" + std::to_string(o2) +
                       "," + std::to_string(o3) + "]}}";
  auto path = dir.path() / "m.safetensors";
  write_safetensors_raw(path, header, body);

  SafetensorsFile f(path.string());
  EXPECT_TRUE(f.has("a"));
  EXPECT_FALSE(f.has("__metadata__"));
  EXPECT_FALSE(f.has("d"));
  EXPECT_EQ(f.info("a").shape, (Shape{33, 7}));
  EXPECT_EQ(f.info("b").dtype, DType::F16);
  EXPECT_EQ(f.info("c").dtype, DType::BF16);
  auto ra = f.to_f32("a"), rb = f.to_f32("b"), rc = f.to_f32("c");
  ASSERT_EQ(ra.size(), a.size());
  ASSERT_EQ(rb.size(), b.size());
  ASSERT_EQ(rc.size(), 1u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(ra[i], a[i]) << i;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_NEAR(rb[i], b[i], 2e-3) << i;
    EXPECT_EQ(rb[i], half_to_float(bh[i])) << i;
  }
  EXPECT_NEAR(rc[0], c[0], 2e-2);
  EXPECT_EQ(rc[0], bf16_to_float(cb[0]));
}

TEST(Safetensors, OtherDtypesAreListedButRefusedByName) {
  TempDir dir;
  auto path = dir.path() / "i.safetensors";
  write_safetensors_raw(path, R"({"pos":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                        std::string(16, '\0'));
  SafetensorsFile f(path.string());
  EXPECT_TRUE(f.has("pos"));
  std::string msg = error_of([&] { f.to_f32("pos"); });
  EXPECT_NE(msg.find("I64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pos"), std::string::npos) << msg;
  EXPECT_NE(msg.find("i.safetensors"), std::string::npos) << msg;
}

struct BrokenCase {
  const char* label;
  std::string header, body;
  const char* must_mention;  // besides the file name
};

TEST(Safetensors, BrokenFilesFailNamingFileAndTensor) {
  std::vector<BrokenCase> cases = {
      {"offsets past the end", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       std::string(8, '\0'), "w"},
      {"overlap",
       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       std::string(12, '\0'), "overlap"},
      {"shape disagrees with bytes", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       std::string(8, '\0'), "w"},
      {"begin after end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})",
       std::string(8, '\0'), "w"},
      {"corrupt json", R"({"w":{"dtype":"F32","shape":[2],"data_offs)", std::string(8, '\0'), "JSON"},
      {"not an object", R"([1,2,3])", "", "object"},
      {"missing fields", R"({"w":{"dtype":"F32"}})", "", "w"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    auto path = dir.path() / "broken.safetensors";
    write_safetensors_raw(path, c.header, c.body);
    std::string msg = error_of([&] { SafetensorsFile f(path.string()); });
    EXPECT_NE(msg.find("broken.safetensors"), std::string::npos) << c.label << ": " << msg;
    EXPECT_NE(msg.find(c.must_mention), std::string::npos) << c.label << ": " << msg;
  }
}

TEST(Safetensors, TruncatedAndOversizedHeadersFail) {
  TempDir dir;
  auto path = dir.path() / "t.safetensors";
  {  // fewer than 8 bytes
    std::ofstream(path, std::ios::binary) << "abc";
    std::string msg = error_of([&] { SafetensorsFile f(path.string()); });
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
  }
  {  // header length larger than the file
    std::ofstream out(path, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  std::string msg = error_of([&] { SafetensorsFile f(path.string()); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  {  // absurd header length
    std::ofstream out(path, std::ios::binary);
    uint64_t n = ~uint64_t(0) - 3;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  msg = error_of([&] { SafetensorsFile f(path.string()); });
  EXPECT_NE(msg.find("corrupt header length"), std::string::npos) << msg;
  // A file cut short in its data section.
  write_safetensors_raw(path, R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})",
                        std::string(32, '\0'));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  msg = error_of([&] { SafetensorsFile f(path.string()); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outside"), std::string::npos) << msg;
  // Missing file.
  msg = error_of([&] { SafetensorsFile f((dir.path() / "nope.safetensors").string()); });
  EXPECT_NE(msg.find("nope.safetensors"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
