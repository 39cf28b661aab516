// The one exception type rlx throws. Messages name the file, tensor or node.
#pragma once
#include <stdexcept>
#include <string>

namespace rlx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace rlx

#define RLX_CHECK(cond, msg)                                   \
  do {                                                         \
    if (!(cond)) throw ::rlx::Error(std::string() + msg);      \
  } while (0)
