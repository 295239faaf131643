// Helpers of the durable gallery's tests (gallery_store_test,
// gallery_chain_test, gallery_group_commit_test) and of the searchers' tests
// (gallery entries made of minutiae).
#ifndef TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_TEST_UTIL_H_
#define TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_TEST_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/store/gallery_store.h"

namespace tessera {
namespace fingerprint {
namespace gallery_testing {

// A path under TEST_TMPDIR that does not exist yet (or exists and is empty
// with `create`).
inline std::string FreshDir(const std::string& name, bool create = false) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (create) std::filesystem::create_directories(dir, ec);
  return dir;
}

// A small xyt template whose bytes and minutiae depend on `salt`.
inline StoredTemplate MakeTemplate(const std::string& id, int salt) {
  StoredTemplate t;
  t.id = id;
  t.format = TemplateFormat::kXyt;
  t.bytes = absl::StrCat("10 20 30 40\n", salt, " ", salt + 1, " 90 50\n");
  for (int i = 0; i < 3 + salt % 5; ++i) {
    t.minutiae.push_back({static_cast<float>(10 + i + salt), static_cast<float>(20 + 2 * i), 0.25f * i});
  }
  return t;
}

// `t` with metadata derived from `salt` (none for every fourth salt, so a
// gallery mixes records with and without metadata).
inline StoredTemplate WithMetadata(StoredTemplate t, int salt) {
  if (salt % 4 == 3) return t;
  t.metadata.subject_id = absl::StrCat("subject", salt % 17);
  t.metadata.finger_position = 1 + salt % 10;
  t.metadata.impression_type = salt % 4;
  t.metadata.capture_date = absl::StrCat("2026-12-", 10 + salt % 19);
  t.metadata.source_tcn = absl::StrCat("TCN", salt);
  t.metadata.attributes = {{"case", absl::StrCat("C", salt % 5)}, {"operator", "kiosk 2"}};
  return t;
}

// Gallery entries of points[begin, end) as a searcher is given them: ids
// "<prefix><i>", seq i + 1.
inline std::vector<std::shared_ptr<const StoredTemplate>> EntriesOf(
    const std::vector<std::vector<MinutiaPoint>>& points, const std::string& prefix = "t", size_t begin = 0,
    size_t end = SIZE_MAX) {
  std::vector<std::shared_ptr<const StoredTemplate>> out;
  for (size_t i = begin; i < std::min(end, points.size()); ++i) {
    auto t = std::make_shared<StoredTemplate>();
    t->id = absl::StrCat(prefix, i);
    t->minutiae = points[i];
    t->seq = i + 1;
    out.push_back(std::move(t));
  }
  return out;
}

inline std::string LogPath(const std::string& dir, uint64_t gen = 1) {
  return dir + "/" + gallery_internal::LogFileName(gen);
}

}  // namespace gallery_testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_STORE_GALLERY_TEST_UTIL_H_
