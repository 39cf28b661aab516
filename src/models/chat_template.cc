#include "models/chat_template.h"

#include "rlx/error.h"

namespace rlx {

std::string render_chat(const std::string& tmpl, const std::string& user) {
  RLX_CHECK(tmpl.find("<|im_start|>") != std::string::npos && tmpl.find("<|im_end|>") != std::string::npos,
            "chat: the model's chat template is not ChatML (<|im_start|> ... <|im_end|>), the only kind rlx renders");
  std::string out;
  // A default system message, written in the template as '<|im_start|>system\n...<|im_end|>'.
  const std::string sys_open = "<|im_start|>system\n";
  size_t s = tmpl.find(sys_open);
  if (s != std::string::npos) {
    size_t b = s + sys_open.size(), e = tmpl.find("<|im_end|>", b);
    if (e != std::string::npos && tmpl.find_first_of("{}'\"", b) >= e)
      out += sys_open + tmpl.substr(b, e - b) + "<|im_end|>\n";
  }
  out += "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  return out;
}

}  // namespace rlx
