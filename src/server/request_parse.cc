#include "server/request_parse.h"

#include <cmath>
#include <set>

#include "server/api_error.h"

namespace rlx::server {
namespace {

using nlohmann::json;

// OpenAI answers 400 for an argument it does not know; so does rlx, so that a
// misspelt field ("max_token") is not silently ignored.
void reject_unknown(const json& j, const std::set<std::string>& known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key())) {
      throw ApiError{400, "Unrecognized request argument supplied: " + it.key(), "invalid_request_error", it.key(),
                     "unknown_parameter"};
    }
  }
}

bool has(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

bool get_bool(const json& j, const char* key, bool dflt) {
  if (!has(j, key)) return dflt;
  if (!j[key].is_boolean()) throw bad_field(key, "a boolean");
  return j[key].get<bool>();
}

int64_t get_int(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j[key];
  if (!v.is_number_integer()) throw bad_field(key, "an integer");
  // Unsigned values beyond int64 are out of range, not wrapped.
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
    throw bad_field(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw bad_field(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

float get_float(const json& j, const char* key, double lo, double hi, float dflt) {
  if (!has(j, key)) return dflt;
  const json& v = j[key];
  if (!v.is_number()) throw bad_field(key, "a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream os;
    os << "a number in [" << lo << ", " << hi << "]";
    throw bad_field(key, os.str());
  }
  return float(x);
}

std::string get_string(const json& j, const char* key) {
  if (!has(j, key)) return "";
  if (!j[key].is_string()) throw bad_field(key, "a string");
  return j[key].get<std::string>();
}

// A string or an array of strings (at least one, none empty when nonempty is set).
std::vector<std::string> string_or_list(const json& j, const char* key, size_t max_items) {
  const json& v = j[key];
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.empty()) throw bad_field(key, "a string or a nonempty array of strings");
    if (v.size() > max_items) throw bad_field(key, "at most " + std::to_string(max_items) + " items");
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) throw bad_field(std::string(key) + "[" + std::to_string(i) + "]", "a string");
      out.push_back(v[i].get<std::string>());
    }
  } else {
    throw bad_field(key, "a string or an array of strings");
  }
  return out;
}

// Fields OpenAI defines that change nothing here, or only at their defaults.
void require_default(const json& j, const char* key, const json& ok, const std::string& why) {
  if (!has(j, key)) return;
  if (j[key] == ok) return;
  throw ApiError{400, std::string("'") + key + "' " + why, "invalid_request_error", key, "unsupported_value"};
}

void parse_sampling(const json& j, CompletionRequest& r) {
  SamplingParams& s = r.gen.sampling;
  s.temperature = get_float(j, "temperature", 0.0, 2.0, 1.0f);
  s.top_p = get_float(j, "top_p", 0.0, 1.0, 1.0f);
  if (s.top_p <= 0.f) throw bad_field("top_p", "a number in (0, 1]");
  if (has(j, "top_k")) s.top_k = int(get_int(j, "top_k", 0, 1 << 30));
  s.min_p = get_float(j, "min_p", 0.0, 1.0, 0.f);
  s.repeat_penalty = get_float(j, "repeat_penalty", 1e-3, 100.0, 1.f);
  s.presence_penalty = get_float(j, "presence_penalty", -2.0, 2.0, 0.f);
  s.frequency_penalty = get_float(j, "frequency_penalty", -2.0, 2.0, 0.f);
  if (has(j, "seed")) s.seed = uint64_t(get_int(j, "seed", INT64_MIN, INT64_MAX));
  if (has(j, "stop")) {
    r.gen.stop = string_or_list(j, "stop", 16);
    for (const std::string& t : r.gen.stop) {
      if (t.empty()) throw bad_field("stop", "nonempty strings");
    }
  }
  r.gen.ignore_eos = get_bool(j, "ignore_eos", false);
  if (has(j, "n")) {
    if (get_int(j, "n", 1, 128) != 1) {
      throw ApiError{400, "'n' must be 1: rlx returns one choice per request", "invalid_request_error", "n",
                     "unsupported_value"};
    }
  }
  if (has(j, "logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty())) {
    throw ApiError{400, "'logit_bias' is not supported", "invalid_request_error", "logit_bias", "unsupported_value"};
  }
  r.stream = get_bool(j, "stream", false);
  if (has(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) throw bad_field("stream_options", "an object");
    reject_unknown(so, {"include_usage", "include_obfuscation"});
    r.include_usage = get_bool(so, "include_usage", false);
  }
  r.model = get_string(j, "model");
}

std::string message_content(const json& m, size_t i) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (!m.contains("content") || m["content"].is_null()) return "";
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_field(field, "a string or an array of text parts");
  std::string text;
  for (size_t k = 0; k < c.size(); ++k) {
    const json& part = c[k];
    const std::string pf = field + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      throw ApiError{400, "'" + pf + "' must be a text part ({\"type\": \"text\", \"text\": ...}): rlx serves text models",
                     "invalid_request_error", pf, "unsupported_value"};
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError{400, std::string("the request body is not valid JSON: ") + e.what(), "invalid_request_error", "",
                   "invalid_json"};
  }
  if (!j.is_object()) throw ApiError{400, "the request body must be a JSON object", "invalid_request_error", "", "invalid_json"};
  return j;
}

CompletionRequest parse_completion(const json& j, bool chat) {
  CompletionRequest r;
  r.chat = chat;
  static const std::set<std::string> common = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty",
      "stop", "seed", "presence_penalty", "frequency_penalty", "n", "user", "ignore_eos", "logit_bias", "logprobs",
      "metadata", "store", "service_tier"};
  std::set<std::string> known = common;
  if (chat) {
    known.insert({"messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
                  "parallel_tool_calls", "reasoning_effort", "modalities"});
  } else {
    known.insert({"prompt", "best_of", "echo", "suffix"});
  }
  reject_unknown(j, known);
  parse_sampling(j, r);
  if (has(j, "max_tokens")) r.max_tokens = get_int(j, "max_tokens", 1, INT32_MAX);
  if (chat && has(j, "max_completion_tokens")) r.max_tokens = get_int(j, "max_completion_tokens", 1, INT32_MAX);
  if (chat) {
    require_default(j, "logprobs", false, "is not supported");
    require_default(j, "top_logprobs", 0, "is not supported");
    require_default(j, "tools", json::array(), "is not supported: rlx does not call tools");
    require_default(j, "tool_choice", "none", "is not supported: rlx does not call tools");
    require_default(j, "parallel_tool_calls", false, "is not supported: rlx does not call tools");
    if (has(j, "response_format")) {
      const json& f = j["response_format"];
      if (!f.is_object() || f.value("type", "") != "text") {
        throw ApiError{400, "'response_format' must be {\"type\": \"text\"}: structured output is not supported",
                       "invalid_request_error", "response_format", "unsupported_value"};
      }
    }
    if (has(j, "modalities") && j["modalities"] != json::array({"text"})) {
      throw ApiError{400, "'modalities' must be [\"text\"]", "invalid_request_error", "modalities", "unsupported_value"};
    }
    if (!j.contains("messages")) throw ApiError{400, "'messages' is required", "invalid_request_error", "messages", "missing_required_parameter"};
    const json& ms = j["messages"];
    if (!ms.is_array() || ms.empty()) throw bad_field("messages", "a nonempty array of messages");
    for (size_t i = 0; i < ms.size(); ++i) {
      const json& m = ms[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) throw bad_field(at, "an object with 'role' and 'content'");
      if (!m.contains("role") || !m["role"].is_string()) throw bad_field(at + ".role", "a string");
      std::string role = m["role"].get<std::string>();
      if (role == "developer") role = "system";  // OpenAI's newer name for the system turn
      if (role != "system" && role != "user" && role != "assistant") {
        throw ApiError{400, "'" + at + ".role' must be system, developer, user or assistant, not '" + role + "'",
                       "invalid_request_error", at + ".role", "invalid_value"};
      }
      r.messages.push_back({role, message_content(m, i)});
    }
  } else {
    require_default(j, "logprobs", nullptr, "is not supported");
    require_default(j, "best_of", 1, "must be 1");
    require_default(j, "echo", false, "is not supported");
    require_default(j, "suffix", "", "is not supported");
    if (!j.contains("prompt")) throw ApiError{400, "'prompt' is required", "invalid_request_error", "prompt", "missing_required_parameter"};
    const json& p = j["prompt"];
    if (p.is_string()) {
      r.prompt_text = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      r.prompt_is_ids = true;
      for (size_t i = 0; i < p.size(); ++i) {
        if (!p[i].is_number_integer() || p[i].get<int64_t>() < 0 || p[i].get<int64_t>() > INT32_MAX) {
          throw bad_field("prompt[" + std::to_string(i) + "]", "a token id (a nonnegative integer)");
        }
        r.prompt_ids.push_back(int32_t(p[i].get<int64_t>()));
      }
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt_text = p[0].get<std::string>();  // the one-string batch the clients send
    } else {
      throw ApiError{400, "'prompt' must be a string, one string in an array, or an array of token ids "
                          "(one prompt per request)", "invalid_request_error", "prompt", "invalid_value"};
    }
  }
  return r;
}

EmbeddingRequest parse_embedding(const json& j) {
  reject_unknown(j, {"input", "model", "encoding_format", "dimensions", "user"});
  EmbeddingRequest r;
  r.model = get_string(j, "model");
  if (!j.contains("input")) throw ApiError{400, "'input' is required", "invalid_request_error", "input", "missing_required_parameter"};
  if (j["input"].is_array() && !j["input"].empty() && !j["input"][0].is_string()) {
    throw ApiError{400, "'input' must be a string or an array of strings: token-id input is not supported",
                   "invalid_request_error", "input", "unsupported_value"};
  }
  r.inputs = string_or_list(j, "input", 2048);
  const std::string fmt = has(j, "encoding_format") ? get_string(j, "encoding_format") : "float";
  if (fmt != "float" && fmt != "base64") throw bad_field("encoding_format", "\"float\" or \"base64\"");
  r.base64 = fmt == "base64";
  if (has(j, "dimensions")) r.dimensions = int(get_int(j, "dimensions", 1, 1 << 20));
  return r;
}

TeiEmbedRequest parse_tei_embed(const json& j) {
  reject_unknown(j, {"inputs", "normalize", "truncate", "truncation_direction", "prompt_name"});
  if (!j.contains("inputs")) throw ApiError{400, "'inputs' is required", "validation", "inputs", ""};
  TeiEmbedRequest r;
  r.inputs = string_or_list(j, "inputs", 2048);
  r.normalize = get_bool(j, "normalize", true);
  r.truncate = get_bool(j, "truncate", true);
  require_default(j, "truncation_direction", "Right", "must be \"Right\"");
  require_default(j, "prompt_name", nullptr, "is not supported");
  return r;
}

TokenizeRequest parse_tokenize(const json& j) {
  reject_unknown(j, {"inputs", "add_special_tokens", "prompt_name"});
  if (!j.contains("inputs")) throw ApiError{400, "'inputs' is required", "validation", "inputs", ""};
  TokenizeRequest r;
  r.inputs = string_or_list(j, "inputs", 2048);
  r.add_special_tokens = get_bool(j, "add_special_tokens", true);
  return r;
}

RerankRequest parse_rerank(const json& j) {
  reject_unknown(j, {"query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction", "prompt",
                     "prompt_name"});
  if (!j.contains("query")) throw ApiError{400, "'query' is required", "validation", "query", ""};
  if (!j.contains("texts")) throw ApiError{400, "'texts' is required", "validation", "texts", ""};
  RerankRequest r;
  if (!j["query"].is_string()) throw bad_field("query", "a string");
  r.query = j["query"].get<std::string>();
  if (!j["texts"].is_array()) throw bad_field("texts", "an array of strings");
  r.texts = string_or_list(j, "texts", 2048);
  r.raw_scores = get_bool(j, "raw_scores", false);
  r.return_text = get_bool(j, "return_text", false);
  require_default(j, "truncate", true, "must be true: pairs are cut to the model's length");
  require_default(j, "truncation_direction", "Right", "must be \"Right\"");
  if (has(j, "prompt")) r.prompt = get_string(j, "prompt");
  if (has(j, "prompt_name")) r.prompt_name = get_string(j, "prompt_name");
  if (r.prompt && has(j, "prompt_name")) {
    throw ApiError{400, "'prompt' and 'prompt_name' were both given: send one (the instruction itself, or the name "
                        "of one of the model's prompts)", "validation", "prompt_name", ""};
  }
  return r;
}

}  // namespace rlx::server
