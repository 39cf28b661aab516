// The chat template of a causal-LM cross-encoder (Qwen3-Reranker), which
// sentence-transformers renders for each (query, document) pair: the pair as
// two messages of roles "query" and "document" (and a "system" message
// holding the prompt, when there is one), as the flat message format gives
// them ({"role": ..., "content": text}). Such templates pick the messages
// by role rather than looping over them:
//
//   {%- set q = messages | selectattr("role", "eq", "query") | map(attribute="content") | first -%}
//   <Query>: {{ q }} <Document>: {{ (messages | selectattr("role", "eq", "document") | first).content }}
//
// rlx has no Jinja engine; this renders the part of Jinja those templates
// use, with transformers' settings (trim_blocks, lstrip_blocks, one
// trailing newline dropped): text, {{ expression }}, {% set name =
// expression %} and comments, with "-" whitespace control; expressions are
// names, string literals, attribute access, parentheses and the filters
// selectattr(attr, "eq"|"equalto"|"==", value), map(attribute=name),
// first and default/d(value[, boolean]). Anything else (if, for, macro,
// other filters, names other than messages and those set) is refused when
// the template is read, naming the file and quoting the construct. An undefined
// value renders as nothing, as in Jinja.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rlx/chat.h"  // ChatMessage

namespace rlx {

class PairTemplate {
 public:
  // `where` names the template's file in errors.
  PairTemplate(const std::string& source, const std::string& where);
  ~PairTemplate();
  PairTemplate(PairTemplate&&) noexcept;
  PairTemplate& operator=(PairTemplate&&) noexcept;

  // The text for these messages, as transformers' apply_chat_template
  // renders it (before tokenizing). Throws rlx::Error where Jinja raises
  // (an attribute of an undefined value, a list rendered as text).
  std::string render(const std::vector<ChatMessage>& messages) const;

  // The messages sentence-transformers makes of a pair: an optional system
  // message with the prompt, then the query and the document.
  static std::vector<ChatMessage> pair_messages(const std::string& query, const std::string& document,
                                                const std::string& system_prompt = "");

 private:
  struct Node;
  std::vector<Node> nodes_;
  std::string where_;
};

}  // namespace rlx
