// Read-only, memory-mapped access to a GGUF (v2/v3) file: metadata, tensor
// table and tensor data. Everything is validated when the file is opened
// (counts, string lengths, dims, types, alignment, offsets, overlaps), so a
// tensor read afterwards never touches bytes outside the file.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

// Metadata value types, numbered as in the file.
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  GgufValueType elem = GgufValueType::U8;  // arrays: the element type
  uint64_t u = 0;     // unsigned integers and bool
  int64_t i = 0;      // signed integers
  double f = 0;       // floats
  std::string s;      // strings
  // Arrays hold `count` elements. Numbers and bools stay in the mapped file
  // (`raw`, little-endian, as stored), so a value never takes more memory
  // than its bytes; strings are copied into `strings`. Arrays of arrays are
  // refused when the file is read, as ggml's reader refuses them.
  uint64_t count = 0;
  const uint8_t* raw = nullptr;
  std::vector<std::string> strings;

  bool is_integer() const;  // any integer type; bool is not one
  bool is_number() const { return is_integer() || type == GgufValueType::F32 || type == GgufValueType::F64; }
  int64_t as_int() const;    // any integer type or bool (u64 past 2^63 wraps: use the checked readers)
  double as_double() const;  // any number
  // Element k of an array of numbers or bools, as a scalar value.
  GgufValue element(uint64_t k) const;
};

const char* gguf_value_type_name(GgufValueType t);

// Tensor element types, numbered as ggml numbers them.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};
const char* ggml_type_name(GgmlType t);
// Elements per block and bytes per block; false for a type rlx cannot size.
bool ggml_type_layout(GgmlType t, uint64_t& block_elems, uint64_t& block_bytes);
// Whether dequantize() handles the type.
bool ggml_type_dequantizable(GgmlType t);
// Dequantizes n elements (a multiple of the type's block) from src to f32.
void dequantize(GgmlType t, const uint8_t* src, float* dst, uint64_t n);
// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0-7) from the
// super-block's 12 bytes of packed scales.
void ggml_scale_min_k4(int j, const uint8_t* scales, uint8_t& sc, uint8_t& m);

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the contiguous dim
  Shape shape;               // row-major order: ne reversed
  uint64_t offset = 0;       // from the start of the data section
  uint64_t bytes = 0;
  uint64_t numel = 0;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  // Drops the mapped pages of `bytes` (a span of the file, e.g. a tensor's;
  // empty: the whole file) from this process's resident memory: they stay in
  // the page cache and fault back in on the next read. Called as weights are
  // copied into an arena, so the file does not count twice.
  void release_pages(std::span<const uint8_t> bytes = {}) const;
  uint64_t alignment() const { return alignment_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  bool has(const std::string& key) const { return kv_index_.count(key) != 0; }
  const GgufValue& get(const std::string& key) const;  // throws naming file and key
  // Typed getters: each fails naming the file and the key when the key is
  // absent (the forms without a fallback), has another type, or lies outside
  // the range. Integers are read from any integer type (never a bool) and
  // range-checked before they are narrowed; floats are read from f32 or f64
  // and must be finite.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key) const { return get_int(key, INT64_MIN, INT64_MAX); }
  int64_t get_int(const std::string& key, int64_t lo, int64_t hi) const;
  int64_t get_int_or(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
  // Narrowed to T, which bounds the range as well as [lo, hi].
  template <class T>
  T get_as(const std::string& key, T lo = std::numeric_limits<T>::min(), T hi = std::numeric_limits<T>::max()) const {
    return T(get_int(key, int64_t(lo), int64_t(hi)));
  }
  template <class T>
  T get_as_or(const std::string& key, T fallback, T lo = std::numeric_limits<T>::min(),
           T hi = std::numeric_limits<T>::max()) const {
    return T(get_int_or(key, int64_t(fallback), int64_t(lo), int64_t(hi)));
  }
  double get_float(const std::string& key) const;  // any finite value
  double get_float(const std::string& key, double lo, double hi) const;
  double get_float_or(const std::string& key, double fallback, double lo, double hi) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  // Arrays of any integer type, each element in [lo, hi].
  std::vector<int64_t> get_int_array(const std::string& key, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  // Arrays of f32 or f64, each element finite.
  std::vector<float> get_float_array(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws naming file and tensor
  std::span<const uint8_t> bytes(const std::string& name) const;
  // The tensor dequantized to f32, row-major over `shape`.
  std::vector<float> to_f32(const std::string& name) const;

 private:
  void parse();
  std::string path_;
  const uint8_t* map_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace rlx
