#include "models/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "rlx/error.h"

namespace rlx {
namespace {

constexpr uint32_t kMaxDims = 4;      // GGML_MAX_DIMS

// Reads little-endian values from [begin, end) and fails, naming the file and
// what it was reading, instead of stepping past the end.
class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t size, const std::string& path) : p_(p), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void need(uint64_t n, const std::string& what) const {
    RLX_CHECK(n <= left(), "gguf: '" << path_ << "' is truncated: " << what << " needs " << n
                                     << " bytes at offset " << pos_ << ", " << left() << " remain");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // little-endian hosts only
    pos_ += sizeof(T);
    return v;
  }
  const uint8_t* here() const { return p_ + pos_; }
  void skip(uint64_t n) { pos_ += n; }  // after need(n)
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (length)");
    RLX_CHECK(n <= left(), "gguf: '" << path_ << "': " << what << " claims " << n
                                     << " bytes but only " << left() << " remain in the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  uint64_t size_, pos_ = 0;
  const std::string& path_;
};

// The fewest bytes one value of type t takes in the file (0: unknown type).
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::String: return 8;
    case GgufValueType::Array: return 12;
  }
  return 0;
}

GgufValue read_value(Cursor& c, GgufValueType t, const std::string& what, const std::string& path) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufValueType::U8: v.u = c.read<uint8_t>(what); break;
    case GgufValueType::I8: v.i = c.read<int8_t>(what); break;
    case GgufValueType::U16: v.u = c.read<uint16_t>(what); break;
    case GgufValueType::I16: v.i = c.read<int16_t>(what); break;
    case GgufValueType::U32: v.u = c.read<uint32_t>(what); break;
    case GgufValueType::I32: v.i = c.read<int32_t>(what); break;
    case GgufValueType::U64: v.u = c.read<uint64_t>(what); break;
    case GgufValueType::I64: v.i = c.read<int64_t>(what); break;
    case GgufValueType::F32: v.f = c.read<float>(what); break;
    case GgufValueType::F64: v.f = c.read<double>(what); break;
    case GgufValueType::Bool: {
      uint8_t b = c.read<uint8_t>(what);
      RLX_CHECK(b <= 1, "gguf: '" << path << "': " << what << " is a bool of value " << int(b));
      v.u = b;
      break;
    }
    case GgufValueType::String: v.s = c.string(what); break;
    case GgufValueType::Array: {
      const uint32_t et = c.read<uint32_t>(what + " (element type)");
      const uint64_t n = c.read<uint64_t>(what + " (count)");
      v.elem = GgufValueType(et);
      const uint64_t min = min_value_bytes(v.elem);
      RLX_CHECK(min != 0, "gguf: '" << path << "': " << what << " has unknown element type " << et);
      RLX_CHECK(v.elem != GgufValueType::Array, "gguf: '" << path << "': " << what
                                                          << " is an array of arrays, which GGUF readers refuse");
      // The count is bounded by the bytes left, so what the value holds in
      // memory is bounded by the file: numbers stay in the map, and a string
      // takes at most its 8-byte length's worth of bookkeeping besides its text.
      RLX_CHECK(n <= c.left() / min, "gguf: '" << path << "': " << what << " claims " << n
                                               << " elements, more than the " << c.left()
                                               << " bytes left can hold");
      v.count = n;
      if (v.elem == GgufValueType::String) {
        v.strings.reserve(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.strings.push_back(c.string(what + "[" + std::to_string(k) + "]"));
      } else {
        v.raw = c.here();
        c.skip(n * min);
        if (v.elem == GgufValueType::Bool)
          for (uint64_t k = 0; k < n; ++k)
            RLX_CHECK(v.raw[k] <= 1, "gguf: '" << path << "': " << what << "[" << k << "] is a bool of value "
                                               << int(v.raw[k]));
      }
      break;
    }
    default:
      RLX_FAIL("gguf: '" << path << "': " << what << " has unknown value type " << uint32_t(t));
  }
  return v;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

int64_t GgufValue::as_int() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64:
    case GgufValueType::Bool:
      return int64_t(u);
    default:
      return i;
  }
}

double GgufValue::as_double() const {
  if (type == GgufValueType::F32 || type == GgufValueType::F64) return f;
  if (type == GgufValueType::U64) return double(u);
  return double(as_int());
}

GgufValue GgufValue::element(uint64_t k) const {
  RLX_CHECK(type == GgufValueType::Array && raw && k < count, "gguf: element " << k << " of a value that is not an "
                                                                                  "array of numbers of that size");
  GgufValue e;
  e.type = elem;
  const uint8_t* p = raw + k * min_value_bytes(elem);
  auto load = [&](auto v) {
    std::memcpy(&v, p, sizeof v);  // little-endian hosts only
    return v;
  };
  switch (elem) {
    case GgufValueType::U8: case GgufValueType::Bool: e.u = load(uint8_t{}); break;
    case GgufValueType::I8: e.i = load(int8_t{}); break;
    case GgufValueType::U16: e.u = load(uint16_t{}); break;
    case GgufValueType::I16: e.i = load(int16_t{}); break;
    case GgufValueType::U32: e.u = load(uint32_t{}); break;
    case GgufValueType::I32: e.i = load(int32_t{}); break;
    case GgufValueType::U64: e.u = load(uint64_t{}); break;
    case GgufValueType::I64: e.i = load(int64_t{}); break;
    case GgufValueType::F32: e.f = load(float{}); break;
    case GgufValueType::F64: e.f = load(double{}); break;
    default: RLX_FAIL("gguf: element of an array of " << gguf_value_type_name(elem));
  }
  return e;
}

namespace {

// An integer value in [lo, hi], compared without narrowing first (a u64 of
// 2^32 + 1 is not 1, and not a negative int64 either).
bool integer_in(const GgufValue& v, int64_t lo, int64_t hi, std::string& shown) {
  if (v.type == GgufValueType::U8 || v.type == GgufValueType::U16 || v.type == GgufValueType::U32 ||
      v.type == GgufValueType::U64) {
    shown = std::to_string(v.u);
    return hi >= 0 && v.u >= uint64_t(std::max<int64_t>(lo, 0)) && v.u <= uint64_t(hi);
  }
  shown = std::to_string(v.i);
  return v.i >= lo && v.i <= hi;
}

std::string range_str(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path) {
  // stat before open: opening a FIFO would wait for a writer.
  struct stat pre{};
  RLX_CHECK(::stat(path.c_str(), &pre) == 0, "gguf: cannot open '" << path << "': " << std::strerror(errno));
  RLX_CHECK(S_ISREG(pre.st_mode), "gguf: '" << path << "' is not a regular file");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  RLX_CHECK(fd >= 0, "gguf: cannot open '" << path << "': " << std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    RLX_FAIL("gguf: '" << path << "' is not a regular file");
  }
  size_ = uint64_t(st.st_size);
  if (size_ < 24) {
    ::close(fd);
    RLX_FAIL("gguf: '" << path << "' is truncated (" << size_ << " bytes, the header alone is 24)");
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  RLX_CHECK(m != MAP_FAILED, "gguf: cannot map '" << path << "': " << std::strerror(errno));
  map_ = static_cast<const uint8_t*>(m);
  try {
    parse();
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), size_);
    map_ = nullptr;
    throw;
  }
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_);
}

void GgufFile::release_pages(std::span<const uint8_t> bytes) const {
  if (!map_) return;
  if (bytes.empty()) bytes = {map_, size_};
  // Whole pages inside the span only: a page shared with a neighbour stays.
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (uintptr_t(bytes.data()) + page - 1) / page * page;
  const uintptr_t hi = (uintptr_t(bytes.data()) + bytes.size()) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void GgufFile::parse() {
  Cursor c(map_, size_, path_);
  RLX_CHECK(std::memcmp(map_, "GGUF", 4) == 0, "gguf: '" << path_ << "' has no GGUF magic (not a GGUF file)");
  c.read<uint32_t>("magic");
  version_ = c.read<uint32_t>("version");
  RLX_CHECK(version_ == 2 || version_ == 3,
            "gguf: '" << path_ << "' has version " << version_ << " (2 and 3 are read)");
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 12 bytes, a tensor entry at least 24.
  RLX_CHECK(n_kv <= c.left() / 12, "gguf: '" << path_ << "' claims " << n_kv
                                             << " metadata entries, more than the file can hold");
  RLX_CHECK(n_tensors <= c.left() / 24, "gguf: '" << path_ << "' claims " << n_tensors
                                                  << " tensors, more than the file can hold");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("metadata key " + std::to_string(k));
    const std::string what = "metadata '" + key + "'";
    RLX_CHECK(!kv_index_.count(key), "gguf: '" << path_ << "': " << what << " appears twice");
    const uint32_t t = c.read<uint32_t>(what + " (type)");
    RLX_CHECK(min_value_bytes(GgufValueType(t)) != 0,
              "gguf: '" << path_ << "': " << what << " has unknown value type " << t);
    GgufValue v = read_value(c, GgufValueType(t), what, path_);
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (has("general.alignment")) {
    const int64_t a = get_int("general.alignment", 1, 1 << 20);
    RLX_CHECK((a & (a - 1)) == 0, "gguf: '" << path_ << "': general.alignment must be a power of two, not " << a);
    alignment_ = uint64_t(a);
  }

  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.string("tensor name " + std::to_string(k));
    const std::string what = "tensor '" + t.name + "'";
    auto where = [&] { return "gguf: '" + path_ + "', " + what + ": "; };
    RLX_CHECK(!tensor_index_.count(t.name), where() << "appears twice");
    const uint32_t nd = c.read<uint32_t>(what + " (dims)");
    RLX_CHECK(nd >= 1 && nd <= kMaxDims, where() << "has " << nd << " dims (1 to " << kMaxDims << ")");
    t.numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = c.read<uint64_t>(what + " (dim)");
      RLX_CHECK(n >= 1 && n <= (uint64_t(1) << 62), where() << "dim " << d << " is " << n);
      RLX_CHECK(!__builtin_mul_overflow(t.numel, n, &t.numel) && t.numel <= (uint64_t(1) << 62),
                where() << "dims overflow");
      t.ne.push_back(n);
    }
    for (uint32_t d = nd; d-- > 0;) t.shape.push_back(int64_t(t.ne[d]));
    const uint32_t type = c.read<uint32_t>(what + " (type)");
    t.type = GgmlType(type);
    uint64_t be = 0, bb = 0;
    RLX_CHECK(ggml_type_layout(t.type, be, bb), where() << "has unknown type " << type);
    RLX_CHECK(t.ne[0] % be == 0, where() << "rows of " << t.ne[0] << " are not whole blocks of " << be
                                         << " (" << ggml_type_name(t.type) << ")");
    t.bytes = t.numel / be * bb;  // numel <= 2^62, bb <= 292: no overflow
    RLX_CHECK(t.bytes / bb == t.numel / be, where() << "byte size overflows");
    t.offset = c.read<uint64_t>(what + " (offset)");
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  data_start_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = data_start_ <= size_ ? size_ - data_start_ : 0;
  if (!tensors_.empty())
    RLX_CHECK(data_start_ <= size_, "gguf: '" << path_ << "' is truncated: no data section");
  for (const auto& t : tensors_) {
    auto where = [&] { return "gguf: '" + path_ + "', tensor '" + t.name + "': "; };
    RLX_CHECK(t.offset % alignment_ == 0,
              where() << "offset " << t.offset << " is not aligned to " << alignment_);
    RLX_CHECK(t.offset <= data_size && t.bytes <= data_size - t.offset,
              where() << "data [" << t.offset << ", +" << t.bytes << ") lies outside the data section of "
                      << data_size << " bytes (truncated file?)");
  }
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i)
    RLX_CHECK(order[i]->offset >= order[i - 1]->offset + order[i - 1]->bytes,
              "gguf: '" << path_ << "': tensors '" << order[i - 1]->name << "' and '" << order[i]->name
                        << "' overlap");
}

const GgufValue& GgufFile::get(const std::string& key) const {
  auto it = kv_index_.find(key);
  RLX_CHECK(it != kv_index_.end(), "gguf: '" << path_ << "' has no metadata '" << key << "'");
  return kv_[it->second].second;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key);
  RLX_CHECK(v.type == GgufValueType::String, "gguf: '" << path_ << "': metadata '" << key << "' is a "
                                                       << gguf_value_type_name(v.type) << ", not a string");
  return v.s;
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key, int64_t lo, int64_t hi) const {
  const GgufValue& v = get(key);
  RLX_CHECK(v.is_integer(), "gguf: '" << path_ << "': metadata '" << key << "' is a "
                                      << gguf_value_type_name(v.type) << ", not an integer");
  std::string shown;
  RLX_CHECK(integer_in(v, lo, hi, shown), "gguf: '" << path_ << "': metadata '" << key << "' is " << shown
                                                    << ", outside " << range_str(lo, hi));
  return v.as_int();
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
  return has(key) ? get_int(key, lo, hi) : fallback;
}

double GgufFile::get_float(const std::string& key) const {
  return get_float(key, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
}

double GgufFile::get_float(const std::string& key, double lo, double hi) const {
  const GgufValue& v = get(key);
  RLX_CHECK(v.type == GgufValueType::F32 || v.type == GgufValueType::F64,
            "gguf: '" << path_ << "': metadata '" << key << "' is a " << gguf_value_type_name(v.type)
                      << ", not a float (f32 or f64)");
  RLX_CHECK(std::isfinite(v.f) && v.f >= lo && v.f <= hi, "gguf: '" << path_ << "': metadata '" << key << "' is "
                                                                    << v.f << ", outside [" << lo << ", " << hi
                                                                    << "]");
  return v.f;
}

double GgufFile::get_float_or(const std::string& key, double fallback, double lo, double hi) const {
  return has(key) ? get_float(key, lo, hi) : fallback;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const GgufValue& v = get(key);
  RLX_CHECK(v.type == GgufValueType::Bool, "gguf: '" << path_ << "': metadata '" << key << "' is a "
                                                     << gguf_value_type_name(v.type) << ", not a bool");
  return v.u != 0;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = get(key);
  RLX_CHECK(v.type == GgufValueType::Array && v.elem == GgufValueType::String,
            "gguf: '" << path_ << "': metadata '" << key << "' is not an array of strings");
  return v.strings;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key, int64_t lo, int64_t hi) const {
  const GgufValue& v = get(key);
  GgufValue elem;
  elem.type = v.elem;
  RLX_CHECK(v.type == GgufValueType::Array && elem.is_integer(),
            "gguf: '" << path_ << "': metadata '" << key << "' is not an array of integers");
  std::vector<int64_t> out;
  out.reserve(size_t(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    const GgufValue e = v.element(k);
    std::string shown;
    RLX_CHECK(integer_in(e, lo, hi, shown), "gguf: '" << path_ << "': metadata '" << key << "'[" << k << "] is "
                                                      << shown << ", outside " << range_str(lo, hi));
    out.push_back(e.as_int());
  }
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = get(key);
  RLX_CHECK(v.type == GgufValueType::Array && (v.elem == GgufValueType::F32 || v.elem == GgufValueType::F64),
            "gguf: '" << path_ << "': metadata '" << key << "' is not an array of floats (f32 or f64)");
  std::vector<float> out;
  out.reserve(size_t(v.count));
  for (uint64_t k = 0; k < v.count; ++k) {
    const double x = v.element(k).f;
    RLX_CHECK(std::isfinite(float(x)), "gguf: '" << path_ << "': metadata '" << key << "'[" << k << "] is " << x
                                                 << ", not a finite float");
    out.push_back(float(x));
  }
  return out;
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  RLX_CHECK(it != tensor_index_.end(), "gguf: '" << path_ << "' has no tensor '" << name << "'");
  return tensors_[it->second];
}

std::span<const uint8_t> GgufFile::bytes(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  return {map_ + data_start_ + t.offset, size_t(t.bytes)};
}

std::vector<float> GgufFile::to_f32(const std::string& name) const {
  const GgufTensorInfo& t = tensor(name);
  RLX_CHECK(ggml_type_dequantizable(t.type), "gguf: '" << path_ << "', tensor '" << name << "': type "
                                                       << ggml_type_name(t.type)
                                                       << " cannot be dequantized by rlx");
  std::vector<float> out(t.numel);
  dequantize(t.type, bytes(name).data(), out.data(), t.numel);
  return out;
}

}  // namespace rlx
