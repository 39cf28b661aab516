// The tokenizer.json pre-tokenizer sequences of the DeepSeek LLM, DeepSeek
// Coder and Falcon vocabularies, recognised by their exact steps and regexes
// and mapped onto the splitters rlx has for them (split_deepseek.cc,
// split_falcon.cc): a sequence that differs in any step is not one of them.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>

#include "tokenizers/pre_tokenizers.h"

namespace rlx {

// DeepseekLlm, DeepseekCoder or Falcon for a Sequence written as those
// models' tokenizer.json files write it (ByteLevel without a prefix space),
// else nullopt.
std::optional<BpeSplit> known_split_sequence(const nlohmann::json& pre_tokenizer);

}  // namespace rlx
