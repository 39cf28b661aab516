// An error answered to a client: the HTTP status and OpenAI's error body
// ({"error": {"message", "type", "param", "code"}}), so that the official
// clients raise the matching exception with rlx's message.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rlx::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault, "" when none
  std::string code;   // a stable name ("context_length_exceeded"), "" when none
  int retry_after_s = 0;  // > 0: a Retry-After header (queue full)

  nlohmann::json body() const;
};

// 400 naming the field: `field` must be `what` (e.g. "an integer").
ApiError bad_field(const std::string& field, const std::string& what);

}  // namespace rlx::server
