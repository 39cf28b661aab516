// Read-only, memory-mapped access to a .safetensors file. The header is
// validated when the file is opened (sizes, offsets, overlaps), so a tensor
// read afterwards never touches bytes outside the file.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/graph.h"

namespace rlx {

struct SafetensorInfo {
  std::string dtype_name;  // as written in the file: "F32", "I64", ...
  bool supported = false;  // F32, F16 or BF16
  DType dtype = DType::F32;  // meaningful when supported
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws for an absent tensor or one of a dtype rlx does not read.
  const SafetensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;
  // The tensor's raw bytes inside the mapping (valid while the file lives).
  std::span<const uint8_t> bytes(const std::string& name) const;
  // The tensor converted to f32, row-major.
  std::vector<float> to_f32(const std::string& name) const;

 private:
  void parse_header(uint64_t header_len);
  std::string path_;
  const uint8_t* map_ = nullptr;
  uint64_t size_ = 0;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorInfo> tensors_;
};

}  // namespace rlx
