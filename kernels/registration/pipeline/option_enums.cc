#include "kernels/registration/pipeline/option_enums.h"

#include "absl/strings/str_cat.h"

namespace tessera::registration {

absl::Status UnknownOptionName(absl::string_view field, absl::string_view text, const std::string& choices) {
  return absl::InvalidArgumentError(absl::StrCat(field, " '", text, "' is not one of ", choices));
}

}  // namespace tessera::registration
