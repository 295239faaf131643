// Names of fingerprint galleries (FingerprintService's `gallery` fields, the
// token file's galleries=, directories under tessera serve --galleries-root).
// A name becomes a directory name and appears in audit records and error
// messages, so it is strict: 1-64 characters of [A-Za-z0-9._-], starting with
// a letter or digit (so never "", ".", ".." or a path). Empty in a request
// means kDefaultGallery.
#ifndef TESSERA_SERVICES_SERVER_GALLERY_NAMES_H_
#define TESSERA_SERVICES_SERVER_GALLERY_NAMES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

inline constexpr char kDefaultGallery[] = "default";
inline constexpr size_t kMaxGalleryNameLength = 64;

// OK, or INVALID_ARGUMENT naming the problem: a control, bidi or zero-width
// character by code point and byte (common/text_checks.h), a '/' or other
// character outside the charset by byte, or the length. Never echoes the text
// unbounded.
absl::Status CheckGalleryName(absl::string_view name);

// `name`, or kDefaultGallery when empty.
std::string GalleryOrDefault(absl::string_view name);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_GALLERY_NAMES_H_
