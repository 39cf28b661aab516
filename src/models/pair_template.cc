#include "models/pair_template.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include "rlx/error.h"

namespace rlx {
namespace {

// An expression: a name, a string or boolean literal, an attribute of a
// value (args[0]), or a filter applied to args[0] with the other args
// (keyword arguments carry their name in `keys`).
struct Expr {
  enum class Kind { Name, Str, Bool, Attr, Filter } kind = Kind::Name;
  std::string text;  // the name, the string, the attribute or the filter
  bool flag = false;  // a Bool's value
  std::vector<Expr> args;
  std::vector<std::string> keys;  // per argument after args[0]: its keyword, "" when positional
};

// A value while rendering.
struct Value {
  enum class Kind { Undefined, Str, Bool, Messages, Strings, Message } kind = Kind::Undefined;
  std::string s;
  bool b = false;
  std::vector<ChatMessage> messages;
  std::vector<std::string> strings;
  ChatMessage message;
};

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Undefined: return "an undefined value";
    case Value::Kind::Str: return "a string";
    case Value::Kind::Bool: return "a boolean";
    case Value::Kind::Messages: return "a list of messages";
    case Value::Kind::Strings: return "a list of strings";
    case Value::Kind::Message: return "a message";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::Str: return !v.s.empty();
    case Value::Kind::Bool: return v.b;
    case Value::Kind::Messages: return !v.messages.empty();
    case Value::Kind::Strings: return !v.strings.empty();
    case Value::Kind::Message: return true;
  }
  return false;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Parses the expression inside one tag.
class ExprParser {
 public:
  ExprParser(const std::string& text, const std::string& where) : t_(text), where_(where) {}

  Expr parse_all() {
    Expr e = expr();
    skip();
    RLX_CHECK(i_ == t_.size(), fail() << "unexpected '" << t_.substr(i_) << "'");
    return e;
  }
  std::string name() {
    skip();
    size_t b = i_;
    while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_')) ++i_;
    RLX_CHECK(i_ > b && !std::isdigit(static_cast<unsigned char>(t_[b])), fail() << "expected a name");
    return t_.substr(b, i_ - b);
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) { RLX_CHECK(eat(c), fail() << "expected '" << c << "'"); }

 private:
  std::string fail() const { return where_ + ": in the chat template's '" + t_ + "': "; }
  void skip() {
    while (i_ < t_.size() && is_space(t_[i_])) ++i_;
  }
  Expr expr() {
    Expr e = postfix();
    while (eat('|')) {
      Expr f;
      f.kind = Expr::Kind::Filter;
      f.text = name();
      f.args.push_back(std::move(e));
      if (eat('(')) {
        if (!eat(')')) {
          do {
            // A keyword argument: name '=' (but not '==').
            size_t save = i_;
            std::string key;
            skip();
            if (i_ < t_.size() && (std::isalpha(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_')) {
              std::string n = name();
              skip();
              if (i_ + 1 < t_.size() && t_[i_] == '=' && t_[i_ + 1] != '=') {
                ++i_;
                key = n;
              } else {
                i_ = save;
              }
            }
            f.args.push_back(expr());
            f.keys.push_back(key);
          } while (eat(','));
          expect(')');
        }
      }
      e = std::move(f);
    }
    return e;
  }
  Expr postfix() {
    Expr e = atom();
    while (eat('.')) {
      Expr a;
      a.kind = Expr::Kind::Attr;
      a.text = name();
      a.args.push_back(std::move(e));
      e = std::move(a);
    }
    return e;
  }
  Expr atom() {
    skip();
    RLX_CHECK(i_ < t_.size(), fail() << "expected a value");
    if (eat('(')) {
      Expr e = expr();
      expect(')');
      return e;
    }
    const char q = t_[i_];
    if (q == '"' || q == '\'') {
      Expr e;
      e.kind = Expr::Kind::Str;
      for (++i_;; ++i_) {
        RLX_CHECK(i_ < t_.size(), fail() << "unterminated string");
        char c = t_[i_];
        if (c == q) break;
        if (c == '\\' && i_ + 1 < t_.size()) {
          c = t_[++i_];
          e.text += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        } else {
          e.text += c;
        }
      }
      ++i_;
      return e;
    }
    Expr e;
    e.text = name();
    if (e.text == "true" || e.text == "True" || e.text == "false" || e.text == "False") {
      e.kind = Expr::Kind::Bool;
      e.flag = e.text[0] == 't' || e.text[0] == 'T';
    }
    return e;
  }
  const std::string& t_;
  std::string where_;
  size_t i_ = 0;
};

}  // namespace

struct PairTemplate::Node {
  enum class Kind { Text, Output, Set } kind = Kind::Text;
  std::string text;  // Text: the text; Set: the variable
  Expr expr;
};

namespace {

// The names an expression reads, and the filters it applies.
void names_of(const Expr& e, std::set<std::string>& names, std::set<std::string>& filters) {
  if (e.kind == Expr::Kind::Name) names.insert(e.text);
  if (e.kind == Expr::Kind::Filter) filters.insert(e.text);
  for (const Expr& a : e.args) names_of(a, names, filters);
}

class Renderer {
 public:
  Renderer(const std::vector<ChatMessage>& messages, const std::string& where)
      : messages_(messages), where_(where) {}
  std::map<std::string, Value> vars;

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Str: {
        Value v;
        v.kind = Value::Kind::Str;
        v.s = e.text;
        return v;
      }
      case Expr::Kind::Bool: {
        Value v;
        v.kind = Value::Kind::Bool;
        v.b = e.flag;
        return v;
      }
      case Expr::Kind::Name: {
        if (e.text == "messages") {
          Value v;
          v.kind = Value::Kind::Messages;
          v.messages = messages_;
          return v;
        }
        auto it = vars.find(e.text);
        return it == vars.end() ? Value{} : it->second;
      }
      case Expr::Kind::Attr: {
        Value base = eval(e.args[0]);
        RLX_CHECK(base.kind == Value::Kind::Message,
                  where_ << ": the chat template reads '" << e.text << "' of " << kind_name(base.kind)
                         << (base.kind == Value::Kind::Undefined ? " (no message has that role)" : ""));
        RLX_CHECK(e.text == "role" || e.text == "content",
                  where_ << ": the chat template reads a message's '" << e.text << "' (rlx gives role and content)");
        Value v;
        v.kind = Value::Kind::Str;
        v.s = e.text == "role" ? base.message.role : base.message.content;
        return v;
      }
      case Expr::Kind::Filter: return filter(e);
    }
    return {};
  }

 private:
  Value filter(const Expr& e) {
    Value in = eval(e.args[0]);
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(e.args[k]));
    auto fail = [&](const std::string& why) {
      RLX_FAIL(where_ << ": the chat template's filter '" << e.text << "' " << why);
      return Value{};
    };
    auto str_arg = [&](size_t k) {
      if (args[k].kind != Value::Kind::Str) fail("takes a string as argument " + std::to_string(k + 1));
      return args[k].s;
    };
    const std::string& f = e.text;
    if (f == "selectattr") {
      if (in.kind != Value::Kind::Messages || args.size() != 3) fail("is supported on the messages with 3 arguments");
      const std::string attr = str_arg(0), test = str_arg(1), want = str_arg(2);
      if (attr != "role" && attr != "content") fail("selects by role or content");
      if (test != "eq" && test != "equalto" && test != "==") fail("supports the test eq (equalto, ==) only");
      Value out;
      out.kind = Value::Kind::Messages;
      for (const ChatMessage& m : in.messages)
        if ((attr == "role" ? m.role : m.content) == want) out.messages.push_back(m);
      return out;
    }
    if (f == "map") {
      if (in.kind != Value::Kind::Messages || args.size() != 1 || e.keys[0] != "attribute")
        fail("is supported as map(attribute=...) on messages");
      const std::string attr = str_arg(0);
      if (attr != "role" && attr != "content") fail("maps role or content");
      Value out;
      out.kind = Value::Kind::Strings;
      for (const ChatMessage& m : in.messages) out.strings.push_back(attr == "role" ? m.role : m.content);
      return out;
    }
    if (f == "first") {
      if (!args.empty()) fail("takes no arguments");
      Value out;
      if (in.kind == Value::Kind::Messages) {
        if (!in.messages.empty()) {
          out.kind = Value::Kind::Message;
          out.message = in.messages.front();
        }
      } else if (in.kind == Value::Kind::Strings) {
        if (!in.strings.empty()) {
          out.kind = Value::Kind::Str;
          out.s = in.strings.front();
        }
      } else {
        fail(std::string("is not supported on ") + kind_name(in.kind));
      }
      return out;  // an empty list: undefined, as in Jinja
    }
    if (f == "default" || f == "d") {
      if (args.empty() || args.size() > 2) fail("takes a value and an optional boolean");
      bool boolean = false;
      if (args.size() == 2) {
        if (args[1].kind != Value::Kind::Bool) fail("takes a boolean as argument 2");
        boolean = args[1].b;
      }
      const bool use = in.kind == Value::Kind::Undefined || (boolean && !truthy(in));
      return use ? args[0] : in;
    }
    return fail("is not supported (selectattr, map, first and default are)");
  }

  const std::vector<ChatMessage>& messages_;
  std::string where_;
};

}  // namespace

PairTemplate::PairTemplate(const std::string& source, const std::string& where) : where_(where) {
  // Jinja's lexer: newlines normalised to \n, one trailing newline dropped
  // (keep_trailing_newline is off in transformers).
  std::string src;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  struct Tag {
    char kind;  // '{' output, '%' statement, '#' comment
    std::string body;
    bool strip_before = false, strip_after = false, keep_before = false;
  };
  std::vector<std::string> texts;  // texts[k] precedes tags[k]; one more text at the end
  std::vector<Tag> tags;
  size_t i = 0;
  std::string text;
  while (i < src.size()) {
    const bool open = src[i] == '{' && i + 1 < src.size() && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#');
    if (!open) {
      text += src[i++];
      continue;
    }
    Tag t;
    t.kind = src[i + 1];
    const char close = t.kind == '{' ? '}' : t.kind;
    size_t j = i + 2;
    if (j < src.size() && src[j] == '-') t.strip_before = true, ++j;
    else if (j < src.size() && src[j] == '+') t.keep_before = true, ++j;
    // The tag's end, outside string literals (comments have none).
    size_t end = std::string::npos;
    char quote = 0;
    for (size_t k = j; k + 1 < src.size(); ++k) {
      const char c = src[k];
      if (quote) {
        if (c == '\\') ++k;
        else if (c == quote) quote = 0;
        continue;
      }
      if (t.kind != '#' && (c == '"' || c == '\'')) {
        quote = c;
        continue;
      }
      if (c == close && src[k + 1] == '}') {
        end = k;
        break;
      }
    }
    RLX_CHECK(end != std::string::npos,
              where << ": the chat template has an unclosed tag at '" << src.substr(i, 40) << "'");
    size_t body_end = end;
    if (body_end > j && src[body_end - 1] == '-') t.strip_after = true, --body_end;
    else if (body_end > j && src[body_end - 1] == '+') --body_end;
    t.body = src.substr(j, body_end - j);
    texts.push_back(std::move(text));
    text.clear();
    tags.push_back(std::move(t));
    i = end + 2;
  }
  texts.push_back(std::move(text));

  // Whitespace control: "-" strips all whitespace on its side; statements
  // and comments also take the first newline after them (trim_blocks) and
  // the spaces and tabs before them on their line (lstrip_blocks).
  // lstrip_blocks looks at the source: the spaces before a tag at a line's
  // start (after a newline, or at the template's start), also where the
  // newline before them went with the previous tag (trim_blocks).
  std::vector<size_t> indent(tags.size(), 0);
  for (size_t k = 0; k < tags.size(); ++k) {
    const std::string& before = texts[k];
    size_t n = before.size();
    while (n > 0 && (before[n - 1] == ' ' || before[n - 1] == '\t')) --n;
    if ((n == 0 && k == 0) || (n > 0 && before[n - 1] == '\n')) indent[k] = before.size() - n;
  }
  for (size_t k = 0; k < tags.size(); ++k) {
    const Tag& t = tags[k];
    std::string& before = texts[k];
    std::string& after = texts[k + 1];
    const bool block = t.kind != '{';
    if (t.strip_before) {
      while (!before.empty() && is_space(before.back())) before.pop_back();
    } else if (block && !t.keep_before) {
      before.resize(before.size() - std::min(indent[k], before.size()));
    }
    if (t.strip_after) {
      size_t n = 0;
      while (n < after.size() && is_space(after[n])) ++n;
      after.erase(0, n);
    } else if (block && !after.empty() && after[0] == '\n') {
      after.erase(0, 1);
    }
  }

  std::set<std::string> defined{"messages"};
  auto add_text = [&](std::string s) {
    if (s.empty()) return;
    Node n;
    n.kind = Node::Kind::Text;
    n.text = std::move(s);
    nodes_.push_back(std::move(n));
  };
  auto check_names = [&](const Expr& e, const std::string& body) {
    std::set<std::string> used, filters;
    names_of(e, used, filters);
    for (const std::string& f : filters)
      RLX_CHECK(f == "selectattr" || f == "map" || f == "first" || f == "default" || f == "d",
                where << ": the chat template applies the filter '" << f << "' in '" << body
                      << "' (rlx renders selectattr, map, first and default)");
    for (const std::string& name : used)
      RLX_CHECK(defined.count(name) || name == "true" || name == "false" || name == "True" || name == "False",
                where << ": the chat template reads '" << name << "' in '" << body
                      << "'; rlx gives a cross-encoder's template only `messages` and the names it sets");
  };
  for (size_t k = 0; k < tags.size(); ++k) {
    add_text(std::move(texts[k]));
    const Tag& t = tags[k];
    if (t.kind == '#') continue;
    Node n;
    if (t.kind == '{') {
      n.kind = Node::Kind::Output;
      n.expr = ExprParser(t.body, where).parse_all();
      check_names(n.expr, t.body);
    } else {
      ExprParser p(t.body, where);
      const std::string stmt = p.name();
      RLX_CHECK(stmt == "set", where << ": the chat template uses '{% " << stmt
                                     << " %}' ('" << t.body
                                     << "'); rlx renders a cross-encoder's template of text, {{ }} and {% set %} only");
      n.kind = Node::Kind::Set;
      n.text = p.name();
      p.expect('=');
      n.expr = p.parse_all();
      check_names(n.expr, t.body);
      defined.insert(n.text);
    }
    nodes_.push_back(std::move(n));
  }
  add_text(std::move(texts.back()));
}

PairTemplate::~PairTemplate() = default;
PairTemplate::PairTemplate(PairTemplate&&) noexcept = default;
PairTemplate& PairTemplate::operator=(PairTemplate&&) noexcept = default;

std::string PairTemplate::render(const std::vector<ChatMessage>& messages) const {
  Renderer r(messages, where_);
  std::string out;
  for (const Node& n : nodes_) {
    switch (n.kind) {
      case Node::Kind::Text: out += n.text; break;
      case Node::Kind::Set: r.vars[n.text] = r.eval(n.expr); break;
      case Node::Kind::Output: {
        const Value v = r.eval(n.expr);
        if (v.kind == Value::Kind::Str) out += v.s;
        else if (v.kind == Value::Kind::Bool) out += v.b ? "True" : "False";
        else
          RLX_CHECK(v.kind == Value::Kind::Undefined,
                    where_ << ": the chat template writes " << kind_name(v.kind) << " as text");
        break;
      }
    }
  }
  return out;
}

std::vector<ChatMessage> PairTemplate::pair_messages(const std::string& query, const std::string& document,
                                                     const std::string& system_prompt) {
  std::vector<ChatMessage> m;
  if (!system_prompt.empty()) m.push_back({"system", system_prompt});
  m.push_back({"query", query});
  m.push_back({"document", document});
  return m;
}

}  // namespace rlx
