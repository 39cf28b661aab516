#include "server/api_error.h"

namespace rlx::server {

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", e}};
}

ApiError bad_field(const std::string& field, const std::string& what) {
  return ApiError{400, "'" + field + "' must be " + what, "invalid_request_error", field, "invalid_value"};
}

}  // namespace rlx::server
