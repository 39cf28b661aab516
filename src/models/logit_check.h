// A forward whose logits hold a NaN has no next token: argmax would return
// the first NaN's id and sampling would skip them, so the caller would get a
// token from a broken pass (NaN or inf in the weights or the activations).
// These checks turn it into an error instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rlx/session.h"

namespace rlx {

// Checks the logits (f32 [rows, vocab]) where the outputs have them, else
// the device-chosen graphs' logit_sum (f32 [rows]: NaN when any logit of
// the row is). `what` names the pass in the error, e.g. "the forward pass
// over 12 tokens"; rows past `rows` (padding) are not looked at.
void check_logits_finite(const std::map<std::string, HostTensor>& out, int64_t rows, const std::string& what);

}  // namespace rlx
