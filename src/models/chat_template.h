// Chat prompts from a model's own chat template. rlx has no Jinja engine, so
// the template text is recognised as one of the families below (and, within
// a family, as the variant the model ships: a default system message, where
// the system message goes, which markers carry bos/eos), and that family's
// rendering is written out here. The result equals what transformers'
// apply_chat_template gives for the same template and messages
// (tests/data/chat_templates holds real templates and jinja2's output).
#pragma once
#include <string>
#include <vector>

#include "rlx/chat.h"  // ChatMessage

namespace rlx {

enum class ChatFormat {
  ChatML,   // <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2.5, ...)
  Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Llama2,   // [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] (system folded into the first turn)
  Mistral,  // [INST] ... [/INST] without <<SYS>> (v0.1/v0.2: no system role; v0.3/Nemo: system before the last turn)
  Gemma,    // <start_of_turn>user|model\n...<end_of_turn>\n
  Phi3,     // <|user|>\n...<|end|>\n
  Zephyr,   // <|user|>\n...</s>\n (TinyLlama-Chat)
};

// The family `tmpl` belongs to. Throws rlx::Error, quoting the template's
// start, when it is none of them.
ChatFormat detect_chat_format(const std::string& tmpl);

std::string chat_format_name(ChatFormat format);

// The prompt for the conversation so far; with add_generation_prompt it ends
// where the assistant's reply begins (for families whose template always
// ends that way, e.g. Llama 2, the flag changes nothing, as in the template).
// bos_token/eos_token are the model's strings, written where the template
// writes them. `today` is what strftime_now("%d %b %Y") returns for templates
// that print the date (Llama 3.2); empty means the current local date, as in
// transformers. Throws rlx::Error where the template raises an exception
// (e.g. roles not alternating, a system message Gemma 2 refuses) and for
// templates of a known family that use features not rendered here.
std::string render_chat(const std::string& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_token = "",
                        const std::string& eos_token = "", const std::string& today = "");

// One user message, ending where the assistant's reply begins.
std::string render_chat(const std::string& tmpl, const std::string& user_message);

// The text that ends an assistant turn in this format, for a generator to
// stop on. Llama 2, Mistral and Zephyr end turns with the model's eos token,
// "</s>" in those models.
std::string chat_turn_end(ChatFormat format);

}  // namespace rlx
