// A minimal chat-template renderer: ChatML (<|im_start|>role\n...<|im_end|>),
// the format of SmolLM2's template, with the default system message the
// template carries. Other templates are refused with a clear error: rlx has
// no Jinja engine.
#pragma once
#include <string>

namespace rlx {

// The prompt for one user message, ending where the assistant's reply begins.
// `tmpl` is the model's template text (GGUF tokenizer.chat_template).
std::string render_chat(const std::string& tmpl, const std::string& user_message);

}  // namespace rlx
