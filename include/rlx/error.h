// The one exception type rlx throws. Messages name the file, tensor or node.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace rlx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace rlx

// RLX_CHECK(cond, "node " << id << " is wrong"): the message is streamed.
#define RLX_CHECK(cond, msg)               \
  do {                                     \
    if (!(cond)) {                         \
      std::ostringstream rlx_os_;          \
      rlx_os_ << msg;                      \
      throw ::rlx::Error(rlx_os_.str());   \
    }                                      \
  } while (0)

#define RLX_FAIL(msg)                    \
  do {                                   \
    std::ostringstream rlx_os_;          \
    rlx_os_ << msg;                      \
    throw ::rlx::Error(rlx_os_.str());   \
  } while (0)
