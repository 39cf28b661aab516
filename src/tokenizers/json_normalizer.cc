#include "tokenizers/json_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "rlx/error.h"
#include "tokenizers/precompiled_charsmap.h"
#include "tokenizers/unicode_class.h"

namespace rlx {

struct JsonNormalizer::Step {
  virtual ~Step() = default;
  virtual std::string apply(std::string_view text) const = 0;
};

namespace {

using Json = nlohmann::json;

struct Precompiled : JsonNormalizer::Step {
  explicit Precompiled(PrecompiledCharsmap m) : map(std::move(m)) {}
  std::string apply(std::string_view t) const override { return map.normalize(t); }
  PrecompiledCharsmap map;
};

// One character (or \s) repeated between lo and hi times, greedy and
// leftmost-first as Rust's regex replaces: all `tokenizers` files use.
struct Repeat {
  std::string literal;  // "" with space = \s
  bool space = false;
  size_t lo = 1, hi = 1;
  // Bytes of the one-character match at t[i], or 0.
  size_t one(std::string_view t, size_t i) const {
    if (space) {
      const CodePoint c = code_point_at(t, i, t.size());
      return c.cp >= 0 && is_space(c.cp) ? c.len : 0;
    }
    return t.compare(i, literal.size(), literal) == 0 ? literal.size() : 0;
  }
};

struct Replace : JsonNormalizer::Step {
  std::optional<Repeat> regex;
  std::string pattern, content;
  std::string apply(std::string_view t) const override {
    std::string out;
    for (size_t i = 0; i < t.size();) {
      size_t end = i, count = 0;
      if (regex) {
        for (size_t n; count < regex->hi && end < t.size() && (n = regex->one(t, end)) > 0; ++count) end += n;
        if (count < regex->lo) end = i;
      } else if (t.compare(i, pattern.size(), pattern) == 0) {
        end = i + pattern.size();
      }
      if (end > i) {
        out += content;
        i = end;
      } else {
        const size_t n = code_point_at(t, i, t.size()).len;
        out.append(t.substr(i, n));
        i += n;
      }
    }
    return out;
  }
};

struct Strip : JsonNormalizer::Step {
  bool left = false, right = false;
  std::string apply(std::string_view t) const override {
    size_t b = 0, e = t.size();
    while (left && b < e) {
      const CodePoint c = code_point_at(t, b, e);
      if (c.cp < 0 || !is_space(c.cp)) break;
      b += c.len;
    }
    while (right && e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<unsigned char>(t[s]) & 0xc0) == 0x80) --s;
      const CodePoint c = code_point_at(t, s, e);
      if (c.cp < 0 || s + c.len != e || !is_space(c.cp)) break;
      e = s;
    }
    return std::string(t.substr(b, e - b));
  }
};

struct Prepend : JsonNormalizer::Step {
  std::string text;
  std::string apply(std::string_view t) const override { return t.empty() ? std::string() : text + std::string(t); }
};

struct UnicodeForm : JsonNormalizer::Step {
  int options = 0;
  std::string apply(std::string_view t) const override {
    if (t.empty()) return {};
    utf8proc_uint8_t* dest = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(t.data()),
                                            utf8proc_ssize_t(t.size()), &dest, utf8proc_option_t(options));
    if (n < 0) return std::string(t);  // not UTF-8: kept as it is
    std::string out(reinterpret_cast<const char*>(dest), size_t(n));
    std::free(dest);
    return out;
  }
};

// The regex of a Replace: one character, an escaped one or \s, then
// nothing, +, {n}, {n,} or {n,m}.
Repeat parse_repeat(const std::string& re, const std::string& where) {
  auto refuse = [&]() -> Repeat {
    RLX_FAIL(where << "Replace regex '" << re
                   << "' is not supported (one character or \\s, repeated: \" {2,}\", \"\\s+\")");
  };
  Repeat r;
  size_t i = 0;
  if (re.empty()) return refuse();
  if (re[0] == '\\') {
    if (re.size() < 2) return refuse();
    const char e = re[1];
    if (e == 's') r.space = true;
    else if (e == 't') r.literal = "\t";
    else if (e == 'n') r.literal = "\n";
    else if (e == 'r') r.literal = "\r";
    else if (std::ispunct(static_cast<unsigned char>(e))) r.literal = std::string(1, e);
    else return refuse();
    i = 2;
  } else {
    if (std::string_view("[](){}|^$*+?.").find(re[0]) != std::string_view::npos) return refuse();
    const CodePoint c = code_point_at(re, 0, re.size());
    if (c.cp < 0) return refuse();
    r.literal = re.substr(0, c.len);
    i = c.len;
  }
  const std::string q = re.substr(i);
  if (q.empty()) return r;
  if (q == "+") {
    r.hi = std::numeric_limits<size_t>::max();
    return r;
  }
  if (q.size() < 3 || q.front() != '{' || q.back() != '}') return refuse();
  const std::string body = q.substr(1, q.size() - 2);
  const size_t comma = body.find(',');
  auto number = [&](const std::string& s) -> size_t {
    if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) refuse();
    return size_t(std::stoul(s));
  };
  r.lo = number(body.substr(0, comma));
  r.hi = comma == std::string::npos            ? r.lo
         : comma + 1 == body.size()            ? std::numeric_limits<size_t>::max()
                                               : number(body.substr(comma + 1));
  // A match of nothing would need Rust's rules for empty matches.
  if (r.lo == 0 || r.hi < r.lo) return refuse();
  return r;
}

std::string string_member(const Json& j, const char* key, const std::string& where) {
  RLX_CHECK(j.contains(key) && j[key].is_string(), where << "'" << key << "' must be a string");
  return j[key].get<std::string>();
}

void add_steps(const Json& j, const std::string& where, int depth,
               std::vector<std::shared_ptr<const JsonNormalizer::Step>>& steps) {
  if (j.is_null()) return;
  RLX_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(),
            where << "a normalizer must be an object with a \"type\"");
  RLX_CHECK(depth < 16, where << "normalizer Sequences nest too deeply");
  const std::string type = j["type"].get<std::string>();
  const std::string here = where + "normalizer " + type + ": ";
  if (type == "Sequence") {
    RLX_CHECK(j.contains("normalizers") && j["normalizers"].is_array(), here << "'normalizers' must be a list");
    for (const Json& n : j["normalizers"]) add_steps(n, where, depth + 1, steps);
  } else if (type == "Precompiled") {
    const Json& m = j.contains("precompiled_charsmap") ? j["precompiled_charsmap"] : Json();
    // Written without a map, it does nothing (`tokenizers` does the same).
    if (m.is_null()) return;
    RLX_CHECK(m.is_string(), here << "'precompiled_charsmap' must be base64 text");
    steps.push_back(std::make_shared<Precompiled>(PrecompiledCharsmap::from_base64(m.get<std::string>(), here)));
  } else if (type == "Replace") {
    auto r = std::make_shared<Replace>();
    r->content = string_member(j, "content", here);
    RLX_CHECK(j.contains("pattern") && j["pattern"].is_object(), here << "'pattern' must be {\"String\"|\"Regex\": ...}");
    const Json& p = j["pattern"];
    if (p.contains("String")) {
      r->pattern = string_member(p, "String", here);
      RLX_CHECK(!r->pattern.empty(), here << "the pattern is empty");
    } else {
      r->regex = parse_repeat(string_member(p, "Regex", here), here);
    }
    steps.push_back(r);
  } else if (type == "Strip") {
    auto s = std::make_shared<Strip>();
    s->left = j.value("strip_left", false);
    s->right = j.value("strip_right", false);
    steps.push_back(s);
  } else if (type == "Prepend") {
    auto s = std::make_shared<Prepend>();
    s->text = string_member(j, "prepend", here);
    steps.push_back(s);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    auto s = std::make_shared<UnicodeForm>();
    s->options = UTF8PROC_STABLE | (type[type.size() - 1] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                 (type.size() == 4 ? UTF8PROC_COMPAT : 0);
    steps.push_back(s);
  } else {
    RLX_FAIL(where << "normalizer '" << type
                   << "' is not supported (Sequence, Precompiled, Replace, Strip, Prepend, NFC, NFD, NFKC and "
                      "NFKD are)");
  }
}

}  // namespace

JsonNormalizer JsonNormalizer::from_json(const nlohmann::json& j, const std::string& where) {
  JsonNormalizer n;
  add_steps(j, where, 0, n.steps_);
  return n;
}

std::string JsonNormalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const auto& step : steps_) s = step->apply(s);
  return s;
}

}  // namespace rlx
