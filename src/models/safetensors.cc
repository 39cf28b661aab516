#include "models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "models/json_read.h"
#include "rlx/error.h"

namespace rlx {
namespace {

// The format caps the header at 100 MB; anything larger is corruption.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// A SAX handler that records the first key named twice in the top-level
// object, and nothing else.
struct TopLevelDuplicates : nlohmann::json_sax<nlohmann::json> {
  int depth = 0;
  std::unordered_set<std::string> seen;
  std::string twice;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && twice.empty() && !seen.insert(k).second) twice = k;
    return true;
  }
  // The full parse that follows reports the error.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

bool parse_dtype(const std::string& s, DType& dt) {
  if (s == "F32") { dt = DType::F32; return true; }
  if (s == "F16") { dt = DType::F16; return true; }
  if (s == "BF16") { dt = DType::BF16; return true; }
  return false;
}

// Element size of dtypes rlx does not compute in, so offsets can still be checked.
uint64_t other_dtype_size(const std::string& s) {
  if (s == "F64" || s == "I64" || s == "U64") return 8;
  if (s == "I32" || s == "U32") return 4;
  if (s == "I16" || s == "U16") return 2;
  if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
  return 0;  // unknown: size not checked
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  RLX_CHECK(fd >= 0, "safetensors: cannot open '" << path << "': " << std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    RLX_FAIL("safetensors: '" << path << "' is not a regular file");
  }
  size_ = uint64_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    RLX_FAIL("safetensors: '" << path << "' is truncated (" << size_ << " bytes, no header length)");
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  RLX_CHECK(m != MAP_FAILED, "safetensors: cannot map '" << path << "': " << std::strerror(errno));
  map_ = static_cast<const uint8_t*>(m);
  try {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | map_[i];  // little-endian
    parse_header(header_len);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

void SafetensorsFile::parse_header(uint64_t header_len) {
  RLX_CHECK(header_len <= kMaxHeaderBytes,
            "safetensors: '" << path_ << "' has a corrupt header length (" << header_len << " bytes)");
  RLX_CHECK(header_len <= size_ - 8, "safetensors: '" << path_ << "' is truncated: header of "
                                                      << header_len << " bytes but the file has "
                                                      << size_ << " bytes");
  data_start_ = 8 + header_len;
  const char* text = reinterpret_cast<const char*>(map_ + 8);
  // The parser keeps the last of two equal keys; a tensor named twice is an
  // error instead. A SAX pass finds it in linear time (a parse callback would
  // make nlohmann rescan the parent object after every entry: quadratic).
  std::string twice;
  TopLevelDuplicates dup;
  nlohmann::json header;
  try {
    nlohmann::json::sax_parse(text, text + header_len, &dup);
    twice = dup.twice;
    header = nlohmann::json::parse(text, text + header_len);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("safetensors: '" << path_ << "' has a corrupt JSON header: " << e.what());
  }
  RLX_CHECK(twice.empty(), "safetensors: '" << path_ << "': tensor '" << twice << "' is named twice in the header");
  RLX_CHECK(header.is_object(), "safetensors: '" << path_ << "': header is not a JSON object");

  const uint64_t data_size = size_ - data_start_;
  JsonField top(header, path_);
  top.for_each_member([&](const std::string& name, const JsonField& entry) {
    if (name == "__metadata__") return;
    const std::string where = "safetensors: '" + path_ + "', tensor '" + name + "': ";
    RLX_CHECK(entry.json().is_object() && entry.has("dtype") && entry.has("shape") &&
                  entry.has("data_offsets"),
              where << "entry needs dtype, shape and data_offsets");
    SafetensorInfo info;
    try {
      info.dtype_name = entry.at("dtype").string();
      JsonField offs = entry.at("data_offsets");
      RLX_CHECK(offs.size() == 2, where << "data_offsets must have two entries");
      info.begin = uint64_t(offs.at(0).integer(0));
      info.end = uint64_t(offs.at(1).integer(0));
      JsonField shape = entry.at("shape");
      for (size_t i = 0; i < shape.size(); ++i) info.shape.push_back(shape.at(i).integer(0));
    } catch (const Error& e) {
      RLX_FAIL(where << "malformed entry: " << e.what());
    }
    RLX_CHECK(info.begin <= info.end && info.end <= data_size,
              where << "data offsets [" << info.begin << ", " << info.end
                    << ") lie outside the data section of " << data_size << " bytes");
    info.supported = parse_dtype(info.dtype_name, info.dtype);
    uint64_t elem = info.supported ? dtype_size(info.dtype) : other_dtype_size(info.dtype_name);
    if (elem) {
      uint64_t count = 1;
      for (int64_t d : info.shape) {
        RLX_CHECK(d == 0 || count <= std::numeric_limits<uint64_t>::max() / uint64_t(d),
                  where << "shape overflows");
        count *= uint64_t(d);
      }
      RLX_CHECK(count <= (info.end - info.begin) / elem && count * elem == info.end - info.begin,
                where << "shape " << shape_str(info.shape) << " of " << info.dtype_name << " needs "
                      << "a different byte size than its offsets give (" << info.end - info.begin
                      << " bytes)");
    }
    tensors_.emplace(name, std::move(info));
  });

  // No two tensors may share bytes: sorted by start, each must begin after
  // the furthest end so far (empty tensors hold no bytes).
  std::vector<std::pair<const std::string*, const SafetensorInfo*>> order;
  for (const auto& kv : tensors_)
    if (kv.second.begin != kv.second.end) order.push_back({&kv.first, &kv.second});
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1, furthest = 0; i < order.size(); ++i) {
    RLX_CHECK(order[i].second->begin >= order[furthest].second->end,
              "safetensors: '" << path_ << "': tensors '" << *order[furthest].first << "' and '"
                               << *order[i].first << "' overlap");
    if (order[i].second->end > order[furthest].second->end) furthest = i;
  }
}

const SafetensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  RLX_CHECK(it != tensors_.end(), "safetensors: '" << path_ << "' has no tensor '" << name << "'");
  RLX_CHECK(it->second.supported, "safetensors: '" << path_ << "', tensor '" << name << "': dtype "
                                                   << it->second.dtype_name
                                                   << " is not supported (F32, F16, BF16 are)");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

std::span<const uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const SafetensorInfo& t = info(name);
  return {map_ + data_start_ + t.begin, size_t(t.end - t.begin)};
}

std::vector<float> SafetensorsFile::to_f32(const std::string& name) const {
  const SafetensorInfo& t = info(name);
  auto raw = bytes(name);
  size_t n = raw.size() / dtype_size(t.dtype);
  std::vector<float> out(n);
  if (t.dtype == DType::F32) {
    if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());  // an empty vector's data() may be null  // the mapping may be unaligned
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    out[i] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
  }
  return out;
}

}  // namespace rlx
