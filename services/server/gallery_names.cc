#include "services/server/gallery_names.h"

#include "absl/strings/str_cat.h"
#include "common/text_checks.h"

namespace tessera {

absl::Status CheckGalleryName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("gallery name is empty");
  // First the checks shared with ids, whose messages name the code point.
  if (absl::Status s = CheckIdentifierText(name, "gallery name"); !s.ok()) return s;
  if (name.size() > kMaxGalleryNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("gallery name of ", name.size(), " bytes; at most ", kMaxGalleryNameLength));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || (i > 0 && (c == '.' || c == '_' || c == '-'))) continue;
    return absl::InvalidArgumentError(absl::StrCat("gallery name ", QuoteBounded(name), " has ",
                                                   QuoteBounded(name.substr(i, 1)), " at byte ", i,
                                                   " (names are [A-Za-z0-9._-], starting with a letter or digit)"));
  }
  return absl::OkStatus();
}

std::string GalleryOrDefault(absl::string_view name) {
  return name.empty() ? std::string(kDefaultGallery) : std::string(name);
}

}  // namespace tessera
