// The bytes of float32 values (little-endian, as the OpenAI clients decode
// them with numpy.frombuffer) in standard base64.
#pragma once
#include <string>
#include <vector>

namespace rlx::server {

std::string base64_floats(const std::vector<float>& v);

}  // namespace rlx::server
