#include "models/chat_template.h"

#include <cstdint>
#include <ctime>

#include "rlx/error.h"

namespace rlx {
namespace {

using Messages = std::vector<ChatMessage>;

bool has(const std::string& t, const std::string& s) { return t.find(s) != std::string::npos; }

// A Jinja string literal may spell a newline as an escape ("\n", two
// characters: Llama 2's template in tokenizer_config.json) or as the character
// itself (most others, whose JSON escape decodes to one); look for both.
bool has_text(const std::string& t, const std::string& s) {
  if (has(t, s)) return true;
  std::string esc;
  for (char c : s) esc += c == '\n' ? std::string("\\n") : std::string(1, c);
  return has(t, esc);
}

// Decodes the UTF-8 code point at s[i] (advancing i), or returns the byte.
uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
  bool ok = n > 0 && i + n < s.size();
  for (int k = 1; ok && k <= n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
  if (!ok) {  // ASCII, or not valid UTF-8: one byte
    ++i;
    return b;
  }
  uint32_t cp = b & (0x3f >> n);
  for (int k = 1; k <= n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += n + 1;
  return cp;
}

// Python's str.isspace, which str.strip() and Jinja's trim use.
bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// Python's s.strip() on UTF-8 text (the templates' `| trim` and `.strip()`).
std::string py_strip(const std::string& s) {
  size_t begin = s.size(), end = 0;
  for (size_t i = 0; i < s.size();) {
    size_t at = i;
    if (!is_py_space(next_code_point(s, i))) {
      if (begin == s.size()) begin = at;
      end = i;
    }
  }
  return begin < end ? s.substr(begin, end - begin) : std::string();
}

// The text of a Jinja string literal's body (the escapes Python accepts).
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

void check_roles(const Messages& messages) {
  RLX_CHECK(!messages.empty(), "chat: no messages to render");
  for (const auto& m : messages)
    RLX_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant",
              "chat: message role '" + m.role + "' is not system, user or assistant");
}

// The templates' `(message['role'] == 'user') != (loop.index0 % 2 == 0)` test.
void check_alternating(const Messages& messages, size_t first, const std::string& what) {
  for (size_t i = first; i < messages.size(); ++i)
    if ((messages[i].role == "user") != ((i - first) % 2 == 0)) RLX_FAIL("chat template: " + what);
}

const char* kAlternate = "Conversation roles must alternate user/assistant/user/assistant/...";

std::string first_chars(const std::string& tmpl) {
  std::string out;
  for (size_t i = 0; i < tmpl.size() && out.size() < 60; ++i)
    out += tmpl[i] == '\n' ? std::string("\\n") : std::string(1, tmpl[i]);
  return out + (tmpl.size() > 60 ? "..." : "");
}

void refuse(const std::string& tmpl, ChatFormat f, const std::string& why) {
  RLX_FAIL("chat: the " + chat_format_name(f) + " template \"" + first_chars(tmpl) + "\" " + why +
           ", which rlx does not render");
}

// ---- ChatML ----
// Every message as <|im_start|>role\ncontent<|im_end|>\n. SmolLM2's and
// Qwen2.5's templates add their default system message when the first message
// is not a system one; the text is a literal in the template.
std::string render_chatml(const std::string& tmpl, const Messages& messages, bool gen) {
  if (has(tmpl, "<think>")) refuse(tmpl, ChatFormat::ChatML, "reasons in <think> blocks");
  if (has(tmpl, "bos_token") || has(tmpl, "eos_token")) refuse(tmpl, ChatFormat::ChatML, "writes bos/eos tokens");
  std::string out;
  if (messages.front().role != "system") {
    for (const char* open : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
      size_t s = tmpl.find(open);
      while (s != std::string::npos) {
        size_t b = s + std::string(open).size(), e = tmpl.find("<|im_end|>", b);
        if (e != std::string::npos && e > b && tmpl.find_first_of("{}'\"+", b) >= e) {
          out = "<|im_start|>system\n" + unescape(tmpl.substr(b, e - b)) + "<|im_end|>\n";
          break;
        }
        s = tmpl.find(open, s + 1);
      }
      if (!out.empty()) break;
    }
  }
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

// ---- Llama 3 ----
std::string today_string(const std::string& today) {
  if (!today.empty()) return today;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
  return buf;
}

std::string header(const std::string& role) { return "<|start_header_id|>" + role + "<|end_header_id|>\n\n"; }

// Meta-Llama-3: every message as a header and its trimmed content, bos first.
// Llama 3.1+: always a system turn carrying the knowledge cut-off, the date
// and the (trimmed) system message, if any.
std::string render_llama3(const std::string& tmpl, const Messages& messages, bool gen, const std::string& bos,
                          const std::string& today) {
  std::string out = bos;
  size_t first = 0;
  if (has(tmpl, "Cutting Knowledge Date")) {
    std::string date;
    if (has(tmpl, "strftime_now")) {
      if (!has(tmpl, "strftime_now(\"%d %b %Y\")")) refuse(tmpl, ChatFormat::Llama3, "formats the date unusually");
      date = today_string(today);
    } else {
      const std::string key = "set date_string = \"";
      size_t s = tmpl.find(key), e = s == std::string::npos ? s : tmpl.find('"', s + key.size());
      if (e == std::string::npos) refuse(tmpl, ChatFormat::Llama3, "has no default date");
      date = tmpl.substr(s + key.size(), e - s - key.size());
    }
    std::string system;
    if (messages.front().role == "system") {
      system = py_strip(messages.front().content);
      first = 1;
    }
    out += header("system") + "Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" + system +
           "<|eot_id|>";
  }
  for (size_t i = first; i < messages.size(); ++i)
    out += header(messages[i].role) + py_strip(messages[i].content) + "<|eot_id|>";
  if (gen) out += header("assistant");
  return out;
}

// ---- Llama 2 ----
// The system message goes inside the first [INST] between <<SYS>> markers;
// every user turn starts with bos, every reply ends with eos; contents are
// stripped. The template has no generation prompt: a prompt ends at [/INST].
std::string render_llama2(const Messages& messages, const std::string& bos, const std::string& eos) {
  size_t first = messages.front().role == "system" ? 1 : 0;
  check_alternating(messages, first, kAlternate);
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    std::string content = messages[i].content;
    if (i == first && first == 1) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (messages[i].role == "user")
      out += bos + "[INST] " + py_strip(content) + " [/INST]";
    else if (messages[i].role == "assistant")
      out += " " + py_strip(content) + " " + eos;
  }
  return out;
}

// ---- Mistral ----
std::string render_mistral(const std::string& tmpl, const Messages& messages, const std::string& bos,
                           const std::string& eos) {
  if (has(tmpl, "[SYSTEM_PROMPT]")) refuse(tmpl, ChatFormat::Mistral, "has a [SYSTEM_PROMPT] turn");
  std::string out = bos;
  if (has(tmpl, "system_message")) {
    // v0.3 / Nemo: the system message goes before the last user message,
    // and only when that message ends the conversation.
    const bool spaced = has(tmpl, "\"[INST] \" + message[\"content\"]");
    const bool unspaced = has(tmpl, "\"[INST]\" + message[\"content\"]");
    if (spaced == unspaced || !has(tmpl, "loop.last and system_message is defined"))
      refuse(tmpl, ChatFormat::Mistral, "places the system message in an unknown way");
    const bool reply_trimmed = has(tmpl, "\" \" + message[\"content\"]|trim + eos_token");
    const std::string inst = spaced ? "[INST] " : "[INST]";
    size_t first = messages.front().role == "system" ? 1 : 0;
    check_alternating(messages, first,
                      "After the optional system message, conversation roles must alternate "
                      "user/assistant/user/assistant/...");
    for (size_t i = first; i < messages.size(); ++i) {
      const auto& m = messages[i];
      if (m.role == "user") {
        if (i + 1 == messages.size() && first == 1)
          out += inst + messages[0].content + "\n\n" + m.content + "[/INST]";
        else
          out += inst + m.content + "[/INST]";
      } else if (m.role == "assistant") {
        out += reply_trimmed ? " " + py_strip(m.content) + eos : m.content + eos;
      } else {
        RLX_FAIL(
            "chat template: Only user and assistant roles are supported, with the exception of an initial "
            "optional system message!");
      }
    }
    return out;
  }
  // v0.1 / v0.2: user and assistant only, alternating from the first message.
  const std::string after_reply = has(tmpl, "eos_token + ' '") ? " " : "";
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if ((m.role == "user") != (i % 2 == 0)) RLX_FAIL(std::string("chat template: ") + kAlternate);
    if (m.role == "user")
      out += "[INST] " + m.content + " [/INST]";
    else if (m.role == "assistant")
      out += m.content + eos + after_reply;
    else
      RLX_FAIL("chat template: Only user and assistant roles are supported!");
  }
  return out;
}

// ---- Gemma ----
// No system role: Gemma 1/2 templates refuse it, Gemma 3 prepends it (and a
// blank line) to the first user turn. Assistant turns are "model"; contents
// are trimmed.
std::string render_gemma(const std::string& tmpl, const Messages& messages, bool gen, const std::string& bos) {
  std::string out = has(tmpl, "bos_token") ? bos : "";
  size_t first = 0;
  std::string prefix;
  if (messages.front().role == "system") {
    if (has(tmpl, "System role not supported")) RLX_FAIL("chat template: System role not supported");
    if (!has(tmpl, "first_user_prefix")) refuse(tmpl, ChatFormat::Gemma, "handles a system message in an unknown way");
    prefix = messages.front().content + "\n\n";
    first = 1;
  }
  check_alternating(messages, first, kAlternate);
  for (size_t i = first; i < messages.size(); ++i) {
    const std::string role = messages[i].role == "assistant" ? "model" : messages[i].role;
    out += "<start_of_turn>" + role + "\n" + (i == first ? prefix : "") + py_strip(messages[i].content) +
           "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// ---- Phi-3 ----
// Phi-3-mini's first template drops system messages and opens the
// assistant's turn after every user turn; later ones (Phi-3.5) keep a
// (non-empty) system message, and end with the generation prompt or eos.
std::string render_phi3(const std::string& tmpl, const Messages& messages, bool gen, const std::string& bos,
                        const std::string& eos) {
  std::string out = has(tmpl, "bos_token") ? bos : "";
  if (!has(tmpl, "<|system|>")) {
    if (!has_text(tmpl, "'<|end|>' + '\n' + '<|assistant|>'")) refuse(tmpl, ChatFormat::Phi3, "has an unknown layout");
    for (const auto& m : messages) {
      if (m.role == "user") out += "<|user|>\n" + m.content + "<|end|>\n<|assistant|>\n";
      if (m.role == "assistant") out += m.content + "<|end|>\n";
    }
    return out;
  }
  const bool skip_empty_system = has(tmpl, "'system' and message['content']");
  for (const auto& m : messages) {
    if (m.role == "system" && skip_empty_system && m.content.empty()) continue;
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  out += gen ? "<|assistant|>\n" : eos;
  return out;
}

// ---- Zephyr ----
// <|role|>\ncontent</s>\n for each message; the generation prompt is
// "<|assistant|>\n".
std::string render_zephyr(const Messages& messages, bool gen, const std::string& eos) {
  std::string out;
  for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + eos + "\n";
  if (gen) out += "<|assistant|>\n";
  return out;
}

}  // namespace

ChatFormat detect_chat_format(const std::string& t) {
  if (has(t, "<|im_start|>")) return ChatFormat::ChatML;
  if (has(t, "<|start_header_id|>")) return ChatFormat::Llama3;
  if (has(t, "<start_of_turn>")) return ChatFormat::Gemma;
  if (has(t, "<|user|>") && has(t, "<|end|>")) return ChatFormat::Phi3;
  if (has(t, "<|user|>") && has(t, "<|assistant|>")) return ChatFormat::Zephyr;
  if (has(t, "[INST]") && has(t, "<<SYS>>")) return ChatFormat::Llama2;
  if (has(t, "[INST]")) return ChatFormat::Mistral;
  RLX_FAIL("chat: unrecognised chat template \"" + first_chars(t) +
           "\"; rlx renders ChatML, Llama 3, Llama 2, Mistral, Gemma, Phi-3 and Zephyr templates");
}

std::string chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "ChatML";
    case ChatFormat::Llama3: return "Llama 3";
    case ChatFormat::Llama2: return "Llama 2";
    case ChatFormat::Mistral: return "Mistral";
    case ChatFormat::Gemma: return "Gemma";
    case ChatFormat::Phi3: return "Phi-3";
    case ChatFormat::Zephyr: return "Zephyr";
  }
  return "?";
}

std::string chat_turn_end(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "<|im_end|>";
    case ChatFormat::Llama3: return "<|eot_id|>";
    case ChatFormat::Gemma: return "<end_of_turn>";
    case ChatFormat::Phi3: return "<|end|>";
    case ChatFormat::Llama2:
    case ChatFormat::Mistral:
    case ChatFormat::Zephyr: return "</s>";
  }
  return "";
}

std::string render_chat(const std::string& tmpl, const std::vector<ChatMessage>& messages, bool gen,
                        const std::string& bos, const std::string& eos, const std::string& today) {
  const ChatFormat f = detect_chat_format(tmpl);
  check_roles(messages);
  switch (f) {
    case ChatFormat::ChatML: return render_chatml(tmpl, messages, gen);
    case ChatFormat::Llama3: return render_llama3(tmpl, messages, gen, bos, today);
    case ChatFormat::Llama2: return render_llama2(messages, bos, eos);
    case ChatFormat::Mistral: return render_mistral(tmpl, messages, bos, eos);
    case ChatFormat::Gemma: return render_gemma(tmpl, messages, gen, bos);
    case ChatFormat::Phi3: return render_phi3(tmpl, messages, gen, bos, eos);
    case ChatFormat::Zephyr: return render_zephyr(messages, gen, eos);
  }
  return "";
}

std::string render_chat(const std::string& tmpl, const std::string& user_message) {
  return render_chat(tmpl, {{"user", user_message}}, true);
}

}  // namespace rlx
