// A token id read from a tokenizer.json: a JSON integer. nlohmann's
// get<int64_t>() converts a float as well, which is undefined behaviour past
// int64's range (a hostile file's 1e30), so a float or any other type is an
// rlx::Error naming the file. Range checks stay with the caller.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "rlx/error.h"

namespace rlx {

inline int64_t json_token_id(const nlohmann::json& v, const std::string& where) {
  RLX_CHECK(v.is_number_integer(), where << ": a token id is a JSON " << v.type_name() << ", not an integer");
  return v.get<int64_t>();
}

}  // namespace rlx
