// One message of a conversation, as chat templates take them.
#pragma once
#include <string>

namespace rlx {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

}  // namespace rlx
