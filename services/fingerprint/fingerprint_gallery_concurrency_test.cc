// FingerprintGallery under concurrent enrolls, replacements and deletes of
// the same ids: store commits share syncs (group commit) and the searcher
// updates run after them in any order, yet the searcher must end holding
// exactly the store's templates (same ids, and for each id the template of
// the last committed enroll).
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/fingerprint_service.h"

namespace tessera {
namespace fingerprint {
namespace {

std::string XytTemplate(int salt) {
  std::string out;
  for (int i = 0; i < 14; ++i) {
    absl::StrAppend(&out, 20 + (salt * 37 + i * 53) % 300, " ", 30 + (salt * 11 + i * 71) % 350, " ",
                    (salt * 13 + i * 29) % 360, " 60\n");
  }
  return out;
}

TEST(FingerprintGalleryConcurrencyTest, SearcherEndsEqualToTheStore) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  FingerprintServiceOptions options;
  options.gallery_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/fp_concurrency_", getpid());
  options.device = "cpu";
  auto gallery = FingerprintGallery::Open(options);
  ASSERT_TRUE(gallery.ok()) << gallery.status();
  FingerprintGallery* g = gallery->get();
  constexpr int kThreads = 8, kOps = 60, kIds = 6;
  std::mutex mu;
  std::map<std::string, uint64_t> last_seq;  // the highest seq a successful enroll returned, per id
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      for (int i = 0; i < kOps; ++i) {
        const std::string id = absl::StrCat("id", rng() % kIds);
        if (rng() % 3 == 0) {
          const absl::Status s = g->Delete(id);
          EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound) << s;
        } else {
          EnrollItem item{id, XytTemplate(t * 1000 + i), TemplateFormat::kXyt, 0};
          auto stored = g->Enroll(item, /*replace=*/true);
          ASSERT_TRUE(stored.ok()) << stored.status();
          std::lock_guard<std::mutex> lock(mu);
          last_seq[id] = std::max(last_seq[id], (*stored)->seq);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<std::string, uint64_t> searcher;
  for (const auto& [id, seq] : g->searcher().Entries()) searcher[id] = seq;
  const std::vector<std::string> live = g->List("", 1000);
  ASSERT_EQ(searcher.size(), live.size());
  for (const std::string& id : live) {
    ASSERT_EQ(searcher.count(id), 1u) << id << " is stored but not searchable";
    EXPECT_EQ(searcher[id], last_seq[id]) << id << ": the searcher holds an older template than the store";
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
