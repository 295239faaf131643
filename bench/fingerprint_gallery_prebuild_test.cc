// WritePrebuiltGallery writes the gallery enrolling through the service
// writes: opened by the service, both hold the same templates (ids, bytes,
// minutiae), the bulk one loads every template's cylinders from its snapshot,
// and searches over both return the same candidates and scores. Random
// templates (never trivial), CPU backend; a non-empty directory is refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/fingerprint_gallery_prebuild.h"
#include "common/device.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/store/gallery_store.h"

namespace tessera::fingerprint {
namespace {

// An XYT record of 15-45 random minutiae (x y degrees quality per line).
std::string RandomXyt(std::mt19937& rng) {
  std::string text;
  const int n = 15 + static_cast<int>(rng() % 31);
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, 20 + rng() % 260, " ", 20 + rng() % 360, " ", rng() % 360, " 60\n");
  }
  return text;
}

std::string TempDir(const char* name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "-", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

FingerprintServiceOptions CpuOptions(const std::string& dir) {
  FingerprintServiceOptions o;
  o.gallery_dir = dir;
  o.device = "cpu";
  o.matcher = "lssr";
  o.compact_log_bytes = int64_t{1} << 40;
  return o;
}

TEST(FingerprintGalleryPrebuild, EqualsEnrollingThroughTheService) {
  constexpr int kTemplates = 300;
  std::mt19937 rng(20261207);
  std::vector<std::string> records;
  for (int i = 0; i < kTemplates; ++i) records.push_back(RandomXyt(rng));
  auto id_of = [](int64_t i) { return absl::StrCat("t", i); };

  const std::string enrolled_dir = TempDir("enrolled");
  {
    auto g = FingerprintGallery::Open(CpuOptions(enrolled_dir));
    ASSERT_TRUE(g.ok()) << g.status();
    std::vector<EnrollItem> items;
    for (int i = 0; i < kTemplates; ++i) items.push_back({id_of(i), records[i], TemplateFormat::kXyt, 0});
    auto statuses = (*g)->EnrollBatch(items);
    ASSERT_TRUE(statuses.ok()) << statuses.status();
    for (const absl::Status& s : *statuses) ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE((*g)->Compact().ok());
  }
  const std::string bulk_dir = TempDir("bulk");
  PrebuiltGalleryStats stats;
  ASSERT_TRUE(WritePrebuiltGallery(
                  bulk_dir, kTemplates, id_of, [&](int64_t i) { return records[i]; }, TemplateFormat::kXyt,
                  Stream::Cpu(), &stats)
                  .ok());
  EXPECT_EQ(stats.templates, kTemplates);
  // Written once: a second call into the same directory is refused.
  EXPECT_EQ(WritePrebuiltGallery(
                bulk_dir, 1, id_of, [&](int64_t i) { return records[i]; }, TemplateFormat::kXyt, Stream::Cpu())
                .code(),
            absl::StatusCode::kFailedPrecondition);

  auto a = FingerprintGallery::Open(CpuOptions(enrolled_dir));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = FingerprintGallery::Open(CpuOptions(bulk_dir));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*a)->size(), kTemplates);
  ASSERT_EQ((*b)->size(), kTemplates);
  EXPECT_EQ((*b)->open_stats().snapshot_cylinder_templates, kTemplates) << "cylinders not in the snapshot";
  for (int i = 0; i < kTemplates; ++i) {
    auto ta = (*a)->Get(id_of(i));
    auto tb = (*b)->Get(id_of(i));
    ASSERT_TRUE(ta != nullptr && tb != nullptr) << i;
    EXPECT_EQ(ta->bytes, tb->bytes);
    EXPECT_EQ(ta->format, tb->format);
    ASSERT_EQ(ta->minutiae.size(), tb->minutiae.size());
  }
  // Probes: some enrolled templates' own minutiae and fresh random ones.
  std::vector<std::vector<MinutiaPoint>> probes;
  for (int i = 0; i < kTemplates; i += 50) probes.push_back((*a)->Get(id_of(i))->minutiae);
  auto ra = (*a)->Search(probes, 10);
  auto rb = (*b)->Search(probes, 10);
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->size(), rb->size());
  for (size_t p = 0; p < ra->size(); ++p) {
    ASSERT_EQ((*ra)[p].size(), (*rb)[p].size()) << p;
    ASSERT_FALSE((*ra)[p].empty());
    EXPECT_EQ((*ra)[p][0].id, id_of(static_cast<int64_t>(p) * 50)) << "a template finds itself first";
    for (size_t k = 0; k < (*ra)[p].size(); ++k) {
      EXPECT_EQ((*ra)[p][k].id, (*rb)[p][k].id) << p << " " << k;
      EXPECT_EQ((*ra)[p][k].score, (*rb)[p][k].score) << p << " " << k;
    }
  }
  std::filesystem::remove_all(enrolled_dir);
  std::filesystem::remove_all(bulk_dir);
}

}  // namespace
}  // namespace tessera::fingerprint
