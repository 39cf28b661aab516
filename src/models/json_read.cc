#include "models/json_read.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;
namespace {

// A key as it may appear in an error: short, and printable bytes only.
std::string printable(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size() && out.size() < 64; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (out.size() >= 64) out += "...";
  return out;
}

std::string value_text(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 64) + "..." : s;
}

}  // namespace

nlohmann::json read_json_file(const fs::path& p, uint64_t max_bytes) {
  std::error_code ec;
  fs::file_status st = fs::status(p, ec);
  RLX_CHECK(!ec && fs::exists(st), "cannot open '" << p.string() << "': no such file");
  RLX_CHECK(fs::is_regular_file(st), "'" << p.string() << "' is not a regular file");
  uint64_t size = fs::file_size(p, ec);
  RLX_CHECK(!ec, "cannot read the size of '" << p.string() << "'");
  RLX_CHECK(size <= max_bytes, "'" << p.string() << "' is " << size << " bytes, more than the "
                                   << max_bytes << " a JSON file may have here");
  std::ifstream in(p, std::ios::binary);
  RLX_CHECK(in, "cannot open '" << p.string() << "'");
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  RLX_CHECK(in.gcount() == std::streamsize(size), "cannot read '" << p.string() << "'");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    RLX_FAIL("'" << p.string() << "' is not valid JSON: " << e.what());
  }
}

JsonField::JsonField(const nlohmann::json& j, std::string file, std::string path)
    : j_(&j), file_(std::move(file)), path_(std::move(path)) {}

std::string JsonField::where() const {
  return "'" + file_ + "': " + (path_.empty() ? std::string("top level") : path_) + ": ";
}

std::string JsonField::type_name() const { return j_->type_name(); }

const JsonField& JsonField::object() const {
  RLX_CHECK(j_->is_object(), where() << "must be a JSON object, not " << type_name());
  return *this;
}

const JsonField& JsonField::array() const {
  RLX_CHECK(j_->is_array(), where() << "must be a JSON array, not " << type_name());
  return *this;
}

bool JsonField::has(const std::string& key) const {
  object();
  auto it = j_->find(key);
  return it != j_->end() && !it->is_null();
}

JsonField JsonField::at(const std::string& key) const {
  object();
  auto it = j_->find(key);
  std::string p = path_.empty() ? printable(key) : path_ + "." + printable(key);
  RLX_CHECK(it != j_->end() && !it->is_null(), "'" << file_ << "': " << p << ": is required");
  return JsonField(*it, file_, std::move(p));
}

JsonField JsonField::at(size_t index) const {
  array();
  RLX_CHECK(index < j_->size(), where() << "has no element " << index);
  return JsonField((*j_)[index], file_, path_ + "[" + std::to_string(index) + "]");
}

size_t JsonField::size() const { return array().j_->size(); }

void JsonField::for_each_member(
    const std::function<void(const std::string&, const JsonField&)>& f) const {
  object();
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    std::string p = (path_.empty() ? "" : path_ + ".") + "\"" + printable(it.key()) + "\"";
    f(it.key(), JsonField(it.value(), file_, std::move(p)));
  }
}

int64_t JsonField::integer(int64_t lo, int64_t hi) const {
  auto range = [&] {
    std::ostringstream os;
    os << value_text(*j_) << " is outside [" << lo << ", " << hi << "]";
    return os.str();
  };
  if (j_->is_number_unsigned()) {
    uint64_t v = j_->get<uint64_t>();
    RLX_CHECK(hi >= 0 && v <= uint64_t(hi) && int64_t(v) >= lo, where() << range());
    return int64_t(v);
  }
  if (j_->is_number_integer()) {
    int64_t v = j_->get<int64_t>();
    RLX_CHECK(v >= lo && v <= hi, where() << range());
    return v;
  }
  RLX_CHECK(j_->is_number_float(), where() << "must be an integer, not " << type_name());
  double d = j_->get<double>();
  RLX_CHECK(std::isfinite(d) && d == std::trunc(d), where() << value_text(*j_) << " is not an integer");
  // Compared as doubles before any cast: a cast of an out-of-range double is undefined.
  RLX_CHECK(d >= double(lo) && d <= double(hi) && d < 9223372036854775808.0, where() << range());
  return int64_t(d);
}

double JsonField::number(double lo, double hi) const {
  RLX_CHECK(j_->is_number(), where() << "must be a number, not " << type_name());
  double d = j_->get<double>();
  RLX_CHECK(std::isfinite(d) && d >= lo && d <= hi,
            where() << value_text(*j_) << " is outside [" << lo << ", " << hi << "]");
  return d;
}

bool JsonField::boolean() const {
  RLX_CHECK(j_->is_boolean(), where() << "must be true or false, not " << type_name());
  return j_->get<bool>();
}

std::string JsonField::string() const {
  RLX_CHECK(j_->is_string(), where() << "must be a string, not " << type_name());
  return j_->get<std::string>();
}

int64_t JsonField::integer_or(const std::string& key, int64_t def, int64_t lo, int64_t hi) const {
  return has(key) ? at(key).integer(lo, hi) : def;
}

double JsonField::number_or(const std::string& key, double def, double lo, double hi) const {
  return has(key) ? at(key).number(lo, hi) : def;
}

bool JsonField::boolean_or(const std::string& key, bool def) const {
  return has(key) ? at(key).boolean() : def;
}

std::string JsonField::string_or(const std::string& key, const std::string& def) const {
  return has(key) ? at(key).string() : def;
}

}  // namespace rlx
