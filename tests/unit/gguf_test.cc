// The GGUF reader: every dequantized type against the `gguf` package's values
// (tests/data/gguf_cases.gguf, made by make_gguf_cases.py), metadata of every
// value type, and each kind of malformed file failing with a message that
// names the file and the key or tensor.
#include "models/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "models/test_files.h"  // tests/models
#include "test_util.h"

namespace rlx {
namespace {

using test::error_of;
using test::TempDir;

const std::string kCases = std::string(RLX_SOURCE_DIR) + "/tests/data/gguf_cases.gguf";

TEST(Gguf, DequantizesEveryTypeLikeTheReference) {
  GgufFile f(kCases);
  EXPECT_EQ(f.version(), 3u);
  for (const char* type : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "F32",
                           "F16", "BF16"}) {
    SCOPED_TRACE(type);
    const auto& q = f.tensor(std::string("q.") + type);
    EXPECT_STREQ(ggml_type_name(q.type), type);
    const auto& r = f.tensor(std::string("ref.") + type);
    ASSERT_EQ(r.type, GgmlType::F32);
    ASSERT_EQ(q.shape, r.shape);
    std::vector<float> got = f.to_f32(q.name), want = f.to_f32(r.name);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(int64_t(got.size()), numel(q.shape));
    size_t nonzero = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(want[i])) << i;
      ASSERT_EQ(got[i], want[i]) << "element " << i;
      nonzero += want[i] != 0.f;
    }
    EXPECT_GT(nonzero, got.size() / 2);  // the reference is not degenerate
  }
}

TEST(Gguf, ShapesAreRowMajor) {
  GgufFile f(kCases);
  const auto& t = f.tensor("shape.3d");
  EXPECT_EQ(t.shape, (Shape{2, 3, 5}));
  EXPECT_EQ(t.ne, (std::vector<uint64_t>{5, 3, 2}));
  auto v = f.to_f32("shape.3d");
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], float(i));
  EXPECT_EQ(f.tensor("q.Q4_K").shape, (Shape{3, 512}));
}

TEST(Gguf, ReadsEveryMetadataType) {
  GgufFile f(kCases);
  EXPECT_EQ(f.get_string("general.architecture"), "test");
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000LL);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000LL);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_TRUE(f.get_bool("t.bool", false));
  EXPECT_EQ(f.get_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get("t.u64").u, (uint64_t(1) << 63) + 5);
  EXPECT_EQ(f.get_int("t.i64"), -(int64_t(1) << 62));
  EXPECT_EQ(f.get_float("t.f64"), -0.125);
  EXPECT_EQ(f.get_int_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_int_or("absent.key", 7, 0, 10), 7);
  std::string e = error_of([&] { f.get_string("t.u8"); });
  EXPECT_NE(e.find("gguf_cases.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("t.u8"), std::string::npos) << e;
  e = error_of([&] { f.get("no.such"); });
  EXPECT_NE(e.find("no.such"), std::string::npos) << e;
  e = error_of([&] { f.tensor("no.tensor"); });
  EXPECT_NE(e.find("no.tensor"), std::string::npos) << e;
}

// ---- malformed files, written byte by byte ----

struct Bytes {
  std::string b;
  template <class T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
};

struct TensorSpec {
  std::string name = "w";
  std::vector<uint64_t> ne = {32, 2};
  uint32_t type = 0;  // F32
  uint64_t offset = 0;
};

// A GGUF with one u32 metadata entry and the given tensors; data_bytes of
// zeros after the aligned header. `edit` can rewrite any field first.
struct Spec {
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::vector<TensorSpec> tensors = {TensorSpec{}};
  uint64_t tensor_count_override = 0, kv_count_override = 0;
  std::string key = "k.one";
  uint32_t kv_type = 4;  // u32
  std::string kv_payload = std::string("\x07\x00\x00\x00", 4);
  uint64_t data_bytes = 256;
};

std::string build(const Spec& s) {
  Bytes o;
  o.put(s.magic).put(s.version);
  o.put<uint64_t>(s.tensor_count_override ? s.tensor_count_override : s.tensors.size());
  o.put<uint64_t>(s.kv_count_override ? s.kv_count_override : 1);
  o.str(s.key).put(s.kv_type);
  o.b += s.kv_payload;
  for (const auto& t : s.tensors) {
    o.str(t.name).put<uint32_t>(uint32_t(t.ne.size()));
    for (uint64_t n : t.ne) o.put(n);
    o.put(t.type).put(t.offset);
  }
  while (o.b.size() % 32) o.b += '\0';
  o.b.append(size_t(s.data_bytes), '\0');
  return o.b;
}

class GgufMalformed : public ::testing::Test {
 protected:
  // The error opening these bytes gives; it must name the file.
  std::string open_error(const std::string& bytes) {
    auto p = dir_.path() / "bad.gguf";
    test::write_text(p, bytes);
    std::string e = error_of([&] { GgufFile f(p.string()); });
    EXPECT_NE(e.find("bad.gguf"), std::string::npos) << "message does not name the file: " << e;
    return e;
  }
  void expect_error(const std::string& bytes, const std::string& needle) {
    std::string e = open_error(bytes);
    EXPECT_NE(e.find(needle), std::string::npos) << "expected '" << needle << "' in: " << e;
  }
  TempDir dir_;
};

TEST_F(GgufMalformed, TheWellFormedBaseOpens) {
  auto p = dir_.path() / "good.gguf";
  test::write_text(p, build(Spec{}));
  GgufFile f(p.string());
  EXPECT_EQ(f.get_int("k.one"), 7);
  EXPECT_EQ(f.tensor("w").shape, (Shape{2, 32}));
  EXPECT_EQ(f.to_f32("w").size(), 64u);
}

TEST_F(GgufMalformed, BadMagicAndVersion) {
  Spec s;
  s.magic = 0x46554746;
  expect_error(build(s), "magic");
  s = Spec{};
  s.version = 1;
  expect_error(build(s), "version 1");
  s.version = 4;
  expect_error(build(s), "version 4");
}

TEST_F(GgufMalformed, TruncatedFiles) {
  std::string good = build(Spec{});
  expect_error(good.substr(0, 10), "truncated");
  // Every cut inside the header fails cleanly (never reads past the end).
  for (size_t n = 24; n < good.size() - 256; n += 3) open_error(good.substr(0, n));
  // Cut inside the tensor data.
  expect_error(good.substr(0, good.size() - 1), "'w'");
}

TEST_F(GgufMalformed, AbsurdCounts) {
  Spec s;
  s.kv_count_override = uint64_t(1) << 60;
  expect_error(build(s), "metadata entries");
  s = Spec{};
  s.tensor_count_override = uint64_t(1) << 60;
  expect_error(build(s), "tensors");
  s = Spec{};
  s.kv_type = 9;  // array of u32 claiming 2^62 elements
  Bytes a;
  a.put<uint32_t>(4).put<uint64_t>(uint64_t(1) << 62);
  s.kv_payload = a.b;
  expect_error(build(s), "k.one");
}

TEST_F(GgufMalformed, StringLongerThanTheFile) {
  Spec s;
  s.kv_type = 8;
  Bytes a;
  a.put<uint64_t>(1000000).b += "abc";
  s.kv_payload = a.b;
  expect_error(build(s), "k.one");
  // A key's own length.
  std::string b = build(Spec{});
  uint64_t huge = uint64_t(1) << 50;
  std::memcpy(b.data() + 24, &huge, 8);
  expect_error(b, "metadata key 0");
}

TEST_F(GgufMalformed, UnknownTypes) {
  Spec s;
  s.kv_type = 13;
  expect_error(build(s), "k.one");
  s = Spec{};
  s.tensors[0].type = 99;
  expect_error(build(s), "unknown type 99");
}

TEST_F(GgufMalformed, BadDims) {
  Spec s;
  s.tensors[0].ne = {};
  expect_error(build(s), "0 dims");
  s.tensors[0].ne = {1, 1, 1, 1, 1};
  expect_error(build(s), "5 dims");
  s.tensors[0].ne = {uint64_t(1) << 40, uint64_t(1) << 40};
  expect_error(build(s), "overflow");
  s.tensors[0].ne = {0, 4};
  expect_error(build(s), "dim 0");
  s.tensors[0].ne = {20, 2};
  s.tensors[0].type = 2;  // Q4_0 rows must be whole blocks of 32
  expect_error(build(s), "whole blocks");
}

TEST_F(GgufMalformed, OffsetsOutOfRangeMisalignedOrOverlapping) {
  Spec s;
  s.tensors[0].offset = 16;
  expect_error(build(s), "not aligned");
  s.tensors[0].offset = 1024;
  expect_error(build(s), "outside the data section");
  s.tensors[0].offset = uint64_t(-32);
  expect_error(build(s), "outside the data section");
  s = Spec{};
  s.tensors.push_back(TensorSpec{"v", {32}, 0, 128});  // w is [0, 256)
  expect_error(build(s), "overlap");
  s.tensors[1].name = "w";
  expect_error(build(s), "twice");
}

TEST_F(GgufMalformed, BadAlignmentAndBool) {
  Spec s;
  s.key = "general.alignment";
  s.kv_payload = std::string("\x03\x00\x00\x00", 4);
  expect_error(build(s), "alignment");
  s = Spec{};
  s.kv_type = 7;
  s.kv_payload = "\x02";
  expect_error(build(s), "bool");
}

TEST(Gguf, DequantizeRejectsPartialBlocksAndUnsupportedTypes) {
  std::vector<uint8_t> src(512);
  std::vector<float> dst(256);
  EXPECT_NE(error_of([&] { dequantize(GgmlType::Q4_0, src.data(), dst.data(), 20); }).find("whole blocks"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dequantize(GgmlType::Q8_K, src.data(), dst.data(), 256); }).find("Q8_K"),
            std::string::npos);
}

}  // namespace
}  // namespace rlx
