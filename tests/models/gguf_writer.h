// A GGUF v3 file of metadata and f32 tensors, laid out as the format (and
// the `gguf` package) writes one: header, key/values, tensor infos with
// ggml's reversed dims, then the data, every tensor at a 32-byte boundary.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/test_files.h"
#include "rlx/graph.h"

namespace rlx::test {

class GgufWriter {
 public:
  GgufWriter& str(const std::string& k, const std::string& v) { return head(k, 8).text(kv_, v); }
  GgufWriter& u32(const std::string& k, uint32_t v) { return head(k, 4).raw(kv_, v); }
  GgufWriter& f32(const std::string& k, float v) { return head(k, 6).raw(kv_, v); }
  // A value of any GGUF type, as its bytes (hostile files: a u64 or a bool
  // where a u32 belongs, a NaN f64).
  GgufWriter& value(const std::string& k, uint32_t type, const std::string& payload) {
    head(k, type);
    kv_ += payload;
    return *this;
  }
  GgufWriter& i32(const std::string& k, int32_t v) { return head(k, 5).raw(kv_, v); }
  GgufWriter& boolean(const std::string& k, bool v) { return head(k, 7).raw(kv_, uint8_t(v)); }
  GgufWriter& strs(const std::string& k, const std::vector<std::string>& v) {
    head(k, 9).raw(kv_, uint32_t(8)).raw(kv_, uint64_t(v.size()));
    for (const auto& x : v) text(kv_, x);
    return *this;
  }
  GgufWriter& i32s(const std::string& k, const std::vector<int32_t>& v) {
    head(k, 9).raw(kv_, uint32_t(5)).raw(kv_, uint64_t(v.size()));
    for (int32_t x : v) raw(kv_, x);
    return *this;
  }
  GgufWriter& f32s(const std::string& k, const std::vector<float>& v) {
    head(k, 9).raw(kv_, uint32_t(6)).raw(kv_, uint64_t(v.size()));
    for (float x : v) raw(kv_, x);
    return *this;
  }
  GgufWriter& tensor(const std::string& name, const Shape& shape, const std::vector<float>& v) {
    while (data_.size() % 32) data_ += '\0';
    text(infos_, name).raw(infos_, uint32_t(shape.size()));
    for (size_t i = shape.size(); i-- > 0;) raw(infos_, uint64_t(shape[i]));  // ne[0] is the contiguous dim
    raw(infos_, uint32_t(0)).raw(infos_, uint64_t(data_.size()));           // F32, offset
    data_.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    ++n_tensors_;
    return *this;
  }
  // A tensor of any ggml type, as its bytes (quantized blocks).
  GgufWriter& tensor_bytes(const std::string& name, const Shape& shape, uint32_t type, const std::string& bytes) {
    while (data_.size() % 32) data_ += '\0';
    text(infos_, name).raw(infos_, uint32_t(shape.size()));
    for (size_t i = shape.size(); i-- > 0;) raw(infos_, uint64_t(shape[i]));
    raw(infos_, type).raw(infos_, uint64_t(data_.size()));
    data_ += bytes;
    ++n_tensors_;
    return *this;
  }
  void write(const std::filesystem::path& p) const {
    std::string h;
    raw(h, uint32_t(0x46554747)).raw(h, uint32_t(3)).raw(h, n_tensors_).raw(h, n_kv_);
    std::string b = h + kv_ + infos_;
    while (b.size() % 32) b += '\0';
    write_text(p, b + data_);
  }

 private:
  template <class T>
  const GgufWriter& raw(std::string& to, T v) const {
    to.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  template <class T>
  GgufWriter& raw(std::string& to, T v) {
    to.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  GgufWriter& text(std::string& to, const std::string& s) {
    raw(to, uint64_t(s.size()));
    to += s;
    return *this;
  }
  GgufWriter& head(const std::string& k, uint32_t type) {
    ++n_kv_;
    return text(kv_, k).raw(kv_, type);
  }
  std::string kv_, infos_, data_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
};

}  // namespace rlx::test
