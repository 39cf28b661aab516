// Names, dtypes and printing of thunks and schedules.
#include <sstream>

#include "thunks/thunk.h"

namespace rlx {

const char* thunk_name(ThunkKind k) {
  static const char* names[] = {
#define X(e, n, P) #n,
#include "thunks/thunks.def"
#undef X
  };
  return names[size_t(k)];
}

DType dtype_of(const ThunkParams& p) {
  return std::visit([](const auto& q) { return dtype_of(q); }, p);
}

DType Thunk::dtype() const { return dtype_of(params); }

std::map<std::string, int> Schedule::histogram() const {
  std::map<std::string, int> h;
  for (const Thunk& t : thunks) ++h[thunk_name(t.kind())];
  return h;
}

std::string Schedule::to_string() const {
  std::ostringstream os;
  for (size_t i = 0; i < thunks.size(); ++i) {
    const Thunk& t = thunks[i];
    os << i << ": " << thunk_name(t.kind()) << " " << dtype_name(t.dtype()) << "  " << t.label << "\n";
  }
  return os.str();
}

}  // namespace rlx
