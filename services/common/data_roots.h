// Server-side file access confined to the directories an operator allowed
// (`tessera serve --data-root=DIR`, ServerOptions::data_roots). Shared by
// every service that takes paths in requests.
#ifndef TESSERA_SERVICES_COMMON_DATA_ROOTS_H_
#define TESSERA_SERVICES_COMMON_DATA_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// Canonical (realpath) forms of `roots`, each of which must be an existing
// directory: NOT_FOUND when missing, INVALID_ARGUMENT otherwise.
absl::StatusOr<std::vector<std::string>> CanonicalDataRoots(const std::vector<std::string>& roots);

// Resolves `requested` (absolute, or relative to each root in turn) with
// realpath and checks it is a regular file under one of `real_roots`
// (canonical paths). Missing files under a root are NOT_FOUND; anything
// outside is PERMISSION_DENIED, whether or not it exists; no roots at all is
// FAILED_PRECONDITION; a directory is INVALID_ARGUMENT.
absl::StatusOr<std::string> ResolveUnderRoots(const std::string& requested, const std::vector<std::string>& real_roots);

// For inputs that may be a DICOM series: a regular file as ResolveUnderRoots,
// or else an existing directory under the roots (its canonical path).
absl::StatusOr<std::string> ResolveFileOrDirUnderRoots(const std::string& requested,
                                                       const std::vector<std::string>& real_roots);

// For output directories: resolves `requested` (absolute, or relative to the
// first root) to a canonical path under one of `real_roots`. The directory
// may not exist yet, but then its parent must (the caller creates it).
// PERMISSION_DENIED outside the roots, NOT_FOUND when the parent is missing,
// INVALID_ARGUMENT when it exists and is not a directory, FAILED_PRECONDITION
// without roots.
absl::StatusOr<std::string> ResolveOutputDirUnderRoots(const std::string& requested,
                                                       const std::vector<std::string>& real_roots);

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_DATA_ROOTS_H_
