// The request bodies of the OpenAI and TEI routes, parsed and checked. Each
// parse_* throws ApiError (400) naming the field that is missing, of the
// wrong type or out of range, or that asks for something rlx does not do.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/chat.h"
#include "rlx/llm.h"

namespace rlx::server {

// The body as JSON: an object, else ApiError.
nlohmann::json parse_body(const std::string& body);

struct CompletionRequest {
  bool chat = false;                   // /v1/chat/completions
  std::vector<ChatMessage> messages;   // chat
  std::string prompt_text;             // completions: a string prompt ...
  std::vector<int32_t> prompt_ids;     // ... or token ids
  bool prompt_is_ids = false;
  std::string model;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::optional<int64_t> max_tokens;   // none: up to the context
  GenerateOptions gen;                 // sampling, stop, ignore_eos (max_tokens set later)
};
CompletionRequest parse_completion(const nlohmann::json& j, bool chat);

struct EmbeddingRequest {
  std::vector<std::string> inputs;
  std::string model;
  bool base64 = false;                 // encoding_format
  std::optional<int> dimensions;       // keep the first n (Matryoshka), renormalized
};
EmbeddingRequest parse_embedding(const nlohmann::json& j);

// TEI's /embed: {"inputs": string | [string], "normalize": bool, "truncate": bool}.
struct TeiEmbedRequest {
  std::vector<std::string> inputs;
  bool normalize = true;
  bool truncate = true;
};
TeiEmbedRequest parse_tei_embed(const nlohmann::json& j);

// TEI's /tokenize: {"inputs": string | [string], "add_special_tokens": bool}.
struct TokenizeRequest {
  std::vector<std::string> inputs;
  bool add_special_tokens = true;
};
TokenizeRequest parse_tokenize(const nlohmann::json& j);

// TEI's /rerank: {"query": string, "texts": [string], "raw_scores": bool,
// "return_text": bool, "truncate": bool}, and rlx's "prompt" or
// "prompt_name" (one at most): a causal-LM cross-encoder's instruction.
struct RerankRequest {
  std::string query;
  std::vector<std::string> texts;
  bool raw_scores = false, return_text = false;
  std::optional<std::string> prompt;
  std::string prompt_name;
};
RerankRequest parse_rerank(const nlohmann::json& j);

}  // namespace rlx::server
