// Strict, typed reading of JSON from model files, which come from the
// internet: every value is checked for its type, its range and (for
// integers) integer-ness before it is converted, and every error names the
// file and the field's path, e.g. "'m/config.json': hidden_size: 384.9 is not
// an integer". Nothing here aborts, wraps or truncates silently.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

namespace rlx {

// Parses a JSON file. Fails with rlx::Error for a missing file, a directory
// or other non-regular file, a file over max_bytes, or invalid JSON.
nlohmann::json read_json_file(const std::filesystem::path& p, uint64_t max_bytes = 256ull << 20);

// One value inside a parsed document, with the file and the path that lead
// to it. Holds a pointer into the document: keep the document alive.
class JsonField {
 public:
  JsonField(const nlohmann::json& j, std::string file, std::string path = "");

  const nlohmann::json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  // "'file': path: " for error messages.
  std::string where() const;

  bool is_null() const { return j_->is_null(); }
  // Type checks that return the field itself, for chaining.
  const JsonField& object() const;
  const JsonField& array() const;

  // A member that is present and not null.
  bool has(const std::string& key) const;
  // A required member (absent or null is an error); this must be an object.
  JsonField at(const std::string& key) const;
  // An element of an array.
  JsonField at(size_t index) const;
  size_t size() const;  // of an array
  // Every member of an object, in the document's order.
  void for_each_member(const std::function<void(const std::string&, const JsonField&)>& f) const;

  // Conversions: the value must have the type and lie in [lo, hi]. A float
  // is accepted for an integer only when it is exactly integral.
  int64_t integer(int64_t lo = std::numeric_limits<int64_t>::min(),
                  int64_t hi = std::numeric_limits<int64_t>::max()) const;
  double number(double lo = -std::numeric_limits<double>::max(),
                double hi = std::numeric_limits<double>::max()) const;
  bool boolean() const;
  std::string string() const;

  // Optional members: the default when absent or null, else checked as above.
  int64_t integer_or(const std::string& key, int64_t def, int64_t lo, int64_t hi) const;
  double number_or(const std::string& key, double def, double lo, double hi) const;
  bool boolean_or(const std::string& key, bool def) const;
  std::string string_or(const std::string& key, const std::string& def) const;

 private:
  std::string type_name() const;
  const nlohmann::json* j_;
  std::string file_, path_;
};

}  // namespace rlx
