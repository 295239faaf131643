#include "services/som/atlas.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/testing/temp_files.h"
#include "kernels/som/half.h"
#include "common/sha256.h"
#include "services/som/synthetic.h"
#include "services/som/testing/topic_corpus.h"

namespace tessera {
namespace som {
namespace {

using ::tessera::testing::PathExists;
using ::tessera::testing::ReadFileBytes;
using ::tessera::testing::TestTmpPath;
using ::tessera::testing::WriteFileBytes;

// Recomputes the manifest's closing "manifest_crc32" after an edit, as a
// writer of that text would have.
std::string ResealManifest(std::string manifest) {
  const size_t crc_at = manifest.rfind("\"manifest_crc32\": ") + std::strlen("\"manifest_crc32\": ");
  manifest.resize(crc_at);
  absl::StrAppend(&manifest, crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(manifest.data()),
                                   static_cast<uInt>(manifest.size())),
                  "\n}\n");
  return manifest;
}

uint32_t FileCrc32(const std::string& data) {
  return crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
}

SparseBinaryMatrix TinyCorpus() {
  SyntheticCorpusOptions corpus = testing::TopicCorpus(400, 60, /*grid=*/3);
  corpus.features_per_topic = 6;
  return GenerateSyntheticCorpus(corpus);
}

// A real (tiny) trained atlas.
Atlas TrainedAtlas(Topology topology = Topology::kPlanar) {
  const SparseBinaryMatrix docs = TinyCorpus();
  TrainOptions options;
  options.grid = GridShape{6, 4, topology};
  options.max_epochs = 4;
  options.radius_decay_epochs = 3;
  options.seed = 0xfedcba9876543210ull;  // beyond a double's integers
  auto trained = TrainSom(docs, options);
  EXPECT_TRUE(trained.ok()) << trained.status();
  auto projected = ProjectDocuments(trained->model, docs, Backend::kCpu);
  EXPECT_TRUE(projected.ok()) << projected.status();
  std::vector<std::string> names, ids;
  for (int v = 0; v < 60; ++v) names.push_back(absl::StrCat("term \"", v, "\"\tx"));  // quotes and tabs survive
  for (int d = 0; d < 400; ++d) ids.push_back(absl::StrCat("PMID", 1000 + d));
  auto atlas = MakeAtlas(*std::move(trained), projected->bmu, names, ids, options);
  EXPECT_TRUE(atlas.ok()) << atlas.status();
  // Held-out figures as a holdout would give (any values round-trip).
  atlas->held_out_quality = projected->quality;
  atlas->held_out_quality.docs = 40;
  return *std::move(atlas);
}

void ExpectSameAtlas(const Atlas& a, const Atlas& b) {
  EXPECT_EQ(a.model.grid.width, b.model.grid.width);
  EXPECT_EQ(a.model.grid.height, b.model.grid.height);
  EXPECT_EQ(a.model.grid.topology, b.model.grid.topology);
  EXPECT_EQ(a.model.features, b.model.features);
  EXPECT_EQ(a.model.type, b.model.type);
  EXPECT_EQ(a.model.weights_f32, b.model.weights_f32);
  EXPECT_EQ(a.model.weights_f16, b.model.weights_f16);
  EXPECT_EQ(a.model.sq_norms, b.model.sq_norms);
  EXPECT_EQ(a.bmu, b.bmu);
  EXPECT_EQ(a.feature_names, b.feature_names);
  EXPECT_EQ(a.document_ids, b.document_ids);
  EXPECT_EQ(a.epochs, b.epochs);
  EXPECT_EQ(a.converged, b.converged);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.final_quality.docs, b.final_quality.docs);
  EXPECT_EQ(a.final_quality.qe_euclidean, b.final_quality.qe_euclidean);
  EXPECT_EQ(a.final_quality.qe_cosine, b.final_quality.qe_cosine);
  EXPECT_EQ(a.final_quality.topographic_error, b.final_quality.topographic_error);
  EXPECT_EQ(a.final_quality.dead_units, b.final_quality.dead_units);
  EXPECT_EQ(a.final_quality.dead_unit_fraction, b.final_quality.dead_unit_fraction);
  EXPECT_EQ(a.held_out_quality.docs, b.held_out_quality.docs);
  EXPECT_EQ(a.held_out_quality.qe_euclidean, b.held_out_quality.qe_euclidean);
  EXPECT_EQ(a.held_out_quality.qe_cosine, b.held_out_quality.qe_cosine);
  EXPECT_EQ(a.held_out_quality.topographic_error, b.held_out_quality.topographic_error);
  EXPECT_EQ(a.held_out_quality.dead_units, b.held_out_quality.dead_units);
  EXPECT_EQ(a.held_out_quality.dead_unit_fraction, b.held_out_quality.dead_unit_fraction);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].epoch, b.history[e].epoch);
    EXPECT_EQ(a.history[e].radius, b.history[e].radius);
    EXPECT_EQ(a.history[e].box_half_width, b.history[e].box_half_width);
    EXPECT_EQ(a.history[e].tap_weight, b.history[e].tap_weight);
    EXPECT_EQ(a.history[e].qe, b.history[e].qe);
    EXPECT_EQ(a.history[e].qe_relative_change, b.history[e].qe_relative_change);
    EXPECT_EQ(a.history[e].topographic_error, b.history[e].topographic_error);
    EXPECT_EQ(a.history[e].seconds, b.history[e].seconds);
  }
  const TrainOptions& o = a.options;
  const TrainOptions& p = b.options;
  EXPECT_EQ(o.grid.width, p.grid.width);
  EXPECT_EQ(o.backend, p.backend);
  EXPECT_EQ(o.weight_type, p.weight_type);
  EXPECT_EQ(o.init, p.init);
  EXPECT_EQ(o.pca_sample_rows, p.pca_sample_rows);
  EXPECT_EQ(o.pca_iterations, p.pca_iterations);
  EXPECT_EQ(o.seed, p.seed);
  EXPECT_EQ(o.max_epochs, p.max_epochs);
  EXPECT_EQ(o.radius_start, p.radius_start);
  EXPECT_EQ(o.radius_end, p.radius_end);
  EXPECT_EQ(o.radius_decay_epochs, p.radius_decay_epochs);
  EXPECT_EQ(o.cooling, p.cooling);
  EXPECT_EQ(o.radius_schedule, p.radius_schedule);
  EXPECT_EQ(o.blur_passes, p.blur_passes);
  EXPECT_EQ(o.convergence_tolerance, p.convergence_tolerance);
  EXPECT_EQ(o.convergence_patience, p.convergence_patience);
  EXPECT_EQ(o.small_radius, p.small_radius);
  EXPECT_EQ(o.update_slab_bytes, p.update_slab_bytes);
  EXPECT_EQ(o.bmu_algorithm, p.bmu_algorithm);
}

TEST(AtlasTest, SaveLoadRoundTripIsExact) {
  for (Topology topology : {Topology::kPlanar, Topology::kToroidal}) {
    const Atlas atlas = TrainedAtlas(topology);
    EXPECT_EQ(atlas.nodes(), 24);
    EXPECT_EQ(atlas.created.size(), 20u);  // 2026-11-30T12:00:00Z
    const std::string dir = TestTmpPath(absl::StrCat("roundtrip_", TopologyName(topology)));
    ASSERT_TRUE(SaveAtlas(atlas, dir).ok());
    auto loaded = LoadAtlas(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ExpectSameAtlas(atlas, *loaded);
    // The reloaded model projects the training documents to the stored BMUs.
    auto projected = ProjectDocuments(loaded->model, TinyCorpus(), Backend::kCpu);
    ASSERT_TRUE(projected.ok()) << projected.status();
    EXPECT_EQ(projected->bmu, atlas.bmu);
    for (const auto& e : std::filesystem::directory_iterator(dir)) {  // no temporary file left
      EXPECT_FALSE(absl::EndsWith(e.path().filename().string(), ".tmp")) << e.path();
    }
  }
}

// A new atlas appears whole or not at all, and never replaces another.
TEST(AtlasTest, SaveNewAtlasRenamesIntoPlaceAndRefusesToReplace) {
  const Atlas atlas = TrainedAtlas();
  const std::string parent = TestTmpPath("save_new");
  const std::string dir = parent + "/fresh";
  ASSERT_TRUE(SaveNewAtlas(atlas, dir + "/").ok());
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAtlas(atlas, *loaded);
  absl::Status again = SaveNewAtlas(atlas, dir);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_TRUE(absl::StrContains(again.message(), "fresh")) << again;
  // An empty directory is there too: not replaced.
  mkdir((parent + "/empty").c_str(), 0755);
  EXPECT_EQ(SaveNewAtlas(atlas, parent + "/empty").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(PathExists(parent + "/empty/manifest.json"));
  // A failed save leaves nothing behind: no target, no staging directory.
  Atlas bad = atlas;
  bad.document_ids.pop_back();
  EXPECT_EQ(SaveNewAtlas(bad, parent + "/bad").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PathExists(parent + "/bad"));
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(parent)) {
    EXPECT_FALSE(absl::StartsWith(e.path().filename().string(), ".")) << e.path();
    ++entries;
  }
  EXPECT_EQ(entries, 2);  // fresh, empty
}

// Atlases saved before the manifest recorded the held-out quality kept it in
// held_out_quality.txt beside it.
TEST(AtlasTest, HeldOutQualityOfOlderAtlasesComesFromTheirSideFile) {
  const Atlas atlas = TrainedAtlas();
  const std::string dir = TestTmpPath("legacy_held_out");
  ASSERT_TRUE(SaveAtlas(atlas, dir).ok());
  // The manifest as it was written before: without the field, CRC redone.
  std::string manifest = ReadFileBytes(dir + "/manifest.json");
  const size_t begin = manifest.find("  \"held_out_quality\"");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = manifest.find("},\n", begin) + 3;
  manifest.erase(begin, end - begin);
  WriteFileBytes(dir + "/manifest.json", ResealManifest(manifest));
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->held_out_quality.docs, 0);
  EXPECT_EQ(loaded->held_out_quality.qe_euclidean, 0);
  WriteFileBytes(dir + "/held_out_quality.txt",
           "documents 60\nqe_euclidean 2.5\nqe_cosine 0.25\ntopographic_error 0.125\ndead_units 3\n"
           "dead_unit_fraction 0.0625\n");
  loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->held_out_quality.docs, 60);
  EXPECT_EQ(loaded->held_out_quality.qe_euclidean, 2.5);
  EXPECT_EQ(loaded->held_out_quality.topographic_error, 0.125);
  EXPECT_EQ(loaded->held_out_quality.dead_units, 3);
  WriteFileBytes(dir + "/held_out_quality.txt", "documents sixty\n");
  EXPECT_EQ(LoadAtlas(dir).status().code(), absl::StatusCode::kDataLoss);
}

TEST(AtlasTest, Float16MapsAreStoredWidenedAndReloadExactly) {
  TrainResult result;
  result.model.grid = GridShape{3, 2, Topology::kPlanar};
  result.model.features = 4;
  result.model.type = WeightType::kFloat16;
  for (int k = 0; k < 24; ++k) result.model.weights_f16.push_back(FloatToHalf(0.01f + k / 7.0f));
  TrainOptions options;
  options.weight_type = WeightType::kFloat16;
  auto atlas = MakeAtlas(result, {0, 5, 5}, {}, {}, options);
  ASSERT_TRUE(atlas.ok()) << atlas.status();
  ASSERT_EQ(atlas->model.weights_f32.size(), 24u);
  EXPECT_EQ(atlas->model.weights_f32[7], HalfToFloat(FloatToHalf(0.01f + 7 / 7.0f)));
  EXPECT_EQ(atlas->feature_names, (std::vector<std::string>{"f0", "f1", "f2", "f3"}));
  EXPECT_EQ(atlas->document_ids, (std::vector<std::string>{"d0", "d1", "d2"}));
  EXPECT_EQ(atlas->model.sq_norms.size(), 6u);
  const std::string dir = TestTmpPath("fp16");
  ASSERT_TRUE(SaveAtlas(*atlas, dir).ok());
  EXPECT_EQ(ReadFileBytes(dir + "/codebook.f32").size(), 24u * 4 + 4);
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameAtlas(*atlas, *loaded);
}

TEST(AtlasTest, ReplacingAnAtlasLeavesTheNewOne) {
  const std::string dir = TestTmpPath("replace");
  Atlas first = TrainedAtlas();
  ASSERT_TRUE(SaveAtlas(first, dir).ok());
  Atlas second = first;
  second.bmu.resize(10);
  second.document_ids.resize(10);
  second.feature_names[0] = "renamed";
  ASSERT_TRUE(SaveAtlas(second, dir).ok());
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->bmu.size(), 10u);
  EXPECT_EQ(loaded->feature_names[0], "renamed");
}

TEST(AtlasTest, SaveIntoAFileFails) {
  const std::string file = TestTmpPath("plain_file");
  WriteFileBytes(file, "x");
  const absl::Status s = SaveAtlas(TrainedAtlas(), file + "/atlas");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), file)) << s;
}

TEST(AtlasTest, MissingAtlasIsNotFound) {
  auto loaded = LoadAtlas(TestTmpPath("does_not_exist"));
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "manifest.json")) << loaded.status();
}

class DamagedAtlasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized names hold '/'
    dir_ = TestTmpPath(name);
    ASSERT_TRUE(SaveAtlas(TrainedAtlas(), dir_).ok());
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void FlipBit(const std::string& name, size_t byte_from_end) {
    std::string data = ReadFileBytes(Path(name));
    ASSERT_GT(data.size(), byte_from_end);
    data[data.size() - 1 - byte_from_end] ^= 0x10;
    WriteFileBytes(Path(name), data);
  }
  void ExpectError(absl::StatusCode code, const std::string& file) {
    auto loaded = LoadAtlas(dir_);
    EXPECT_EQ(loaded.status().code(), code) << loaded.status();
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), file)) << loaded.status();
  }
  std::string dir_;
};

TEST_F(DamagedAtlasTest, TruncatedCodebook) {
  const std::string data = ReadFileBytes(Path("codebook.f32"));
  WriteFileBytes(Path("codebook.f32"), data.substr(0, data.size() - 6));
  ExpectError(absl::StatusCode::kDataLoss, "codebook.f32");
  auto loaded = LoadAtlas(dir_);
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "truncated")) << loaded.status();
}

TEST_F(DamagedAtlasTest, BitFlipInManifestNumber) {
  // A digit of the final QE: still valid JSON, caught by the manifest's CRC.
  std::string m = ReadFileBytes(Path("manifest.json"));
  const size_t at = m.find("\"qe_euclidean\": ") + 17;
  m[at] = m[at] == '7' ? '8' : '7';
  WriteFileBytes(Path("manifest.json"), m);
  ExpectError(absl::StatusCode::kDataLoss, "manifest.json");
}

// One file of a saved atlas damaged one way: loading it is DATA_LOSS naming
// the file.
struct FileDamage {
  const char* name;  // the test's
  const char* file;
  enum Kind { kFlipBit, kTruncateToHalf, kRemove } kind;
  size_t byte_from_end = 0;  // kFlipBit
};

class DamagedAtlasFileTest : public DamagedAtlasTest, public ::testing::WithParamInterface<FileDamage> {};

TEST_P(DamagedAtlasFileTest, IsDataLossNamingTheFile) {
  const FileDamage& damage = GetParam();
  switch (damage.kind) {
    case FileDamage::kFlipBit:
      FlipBit(damage.file, damage.byte_from_end);
      break;
    case FileDamage::kTruncateToHalf: {
      const std::string data = ReadFileBytes(Path(damage.file));
      WriteFileBytes(Path(damage.file), data.substr(0, data.size() / 2));
      break;
    }
    case FileDamage::kRemove:
      ASSERT_EQ(unlink(Path(damage.file).c_str()), 0);
      break;
  }
  ExpectError(absl::StatusCode::kDataLoss, damage.file);
}

INSTANTIATE_TEST_SUITE_P(
    DamagedAtlasTest, DamagedAtlasFileTest,
    ::testing::Values(FileDamage{"BitFlipInCodebook", "codebook.f32", FileDamage::kFlipBit, 50},
                      FileDamage{"BitFlipInCodebookTrailer", "codebook.f32", FileDamage::kFlipBit, 0},
                      FileDamage{"BitFlipInBmu", "bmu.i32", FileDamage::kFlipBit, 20},
                      FileDamage{"BitFlipInFeatureNames", "features.txt", FileDamage::kFlipBit, 5},
                      FileDamage{"TruncatedDocumentIds", "documents.txt", FileDamage::kTruncateToHalf},
                      FileDamage{"TruncatedManifest", "manifest.json", FileDamage::kTruncateToHalf},
                      FileDamage{"MissingBmuFile", "bmu.i32", FileDamage::kRemove},
                      FileDamage{"MissingCodebookFile", "codebook.f32", FileDamage::kRemove}),
    [](const ::testing::TestParamInfo<FileDamage>& info) { return std::string(info.param.name); });

TEST_F(DamagedAtlasTest, WrongVersion) {
  std::string m = ReadFileBytes(Path("manifest.json"));
  m = absl::StrReplaceAll(m, {{"\"version\": 2,", "\"version\": 99,"}});
  WriteFileBytes(Path("manifest.json"), m);
  ExpectError(absl::StatusCode::kInvalidArgument, "version 99");
}

// The case a CRC-32 of the whole file could never catch: one byte of the data
// changed and the file's own CRC-32 trailer recomputed to match. The manifest's
// SHA-256 of the content still names the file.
TEST_F(DamagedAtlasTest, ByteChangedWithMatchingTrailerIsCaughtByTheManifest) {
  for (const char* name : {"codebook.f32", "bmu.i32"}) {
    SCOPED_TRACE(name);
    SetUp();  // a fresh atlas for each file
    std::string data = ReadFileBytes(Path(name));
    ASSERT_GT(data.size(), 8u);
    std::string body = data.substr(0, data.size() - 4);
    body[body.size() / 2] ^= 0x01;
    const uint32_t trailer = FileCrc32(body);
    WriteFileBytes(Path(name), body + std::string(reinterpret_cast<const char*>(&trailer), 4));
    ExpectError(absl::StatusCode::kDataLoss, name);
    EXPECT_TRUE(absl::StrContains(LoadAtlas(dir_).status().message(), "sha256")) << LoadAtlas(dir_).status();
  }
}

// Turns the saved (current-format) manifest into what version 1 wrote: no
// layouts, and a CRC-32 of each whole file instead of its SHA-256.
std::string AsVersion1Manifest(const std::string& dir) {
  std::string m = ReadFileBytes(dir + "/manifest.json");
  m = absl::StrReplaceAll(m, {{"\"version\": 2,", "\"version\": 1,"}});
  for (const char* key : {"  \"codebook_layout\": {", "  \"bmu_layout\": \""}) {
    const size_t begin = m.find(key);
    EXPECT_NE(begin, std::string::npos) << key;
    const size_t end = m.find(key[3] == 'c' ? "},\n" : "\",\n", begin) + 3;
    m.erase(begin, end - begin);
  }
  const size_t schedule = m.find("    \"radius_schedule\": \"");
  EXPECT_NE(schedule, std::string::npos);
  m.erase(schedule, m.find('\n', schedule) + 1 - schedule);
  for (const char* name : {"codebook.f32", "bmu.i32", "features.txt", "documents.txt"}) {
    const std::string data = ReadFileBytes(dir + "/" + name);
    const std::string from = absl::StrCat("\"sha256\": \"", Sha256Hex(data.data(), data.size()), "\"");
    EXPECT_TRUE(absl::StrContains(m, from)) << name;
    m = absl::StrReplaceAll(m, {{from, absl::StrCat("\"crc32\": ", FileCrc32(data))}});
  }
  return ResealManifest(m);
}

TEST(AtlasTest, ManifestRecordsContentChecksumsAndTheCodebookLayout) {
  const std::string dir = TestTmpPath("content_checksums");
  ASSERT_TRUE(SaveAtlas(TrainedAtlas(), dir).ok());
  const std::string m = ReadFileBytes(dir + "/manifest.json");
  EXPECT_TRUE(absl::StrContains(m, "\"version\": 2,")) << m;
  EXPECT_TRUE(absl::StrContains(m, "\"order\": \"feature-major\"")) << m;
  EXPECT_TRUE(absl::StrContains(m, "element [f * nodes + n], nodes = width * height")) << m;
  EXPECT_FALSE(absl::StrContains(m, "crc32\": 558161692")) << m;  // the old constant
  for (const char* name : {"codebook.f32", "bmu.i32", "features.txt", "documents.txt"}) {
    const std::string data = ReadFileBytes(dir + "/" + name);
    EXPECT_TRUE(absl::StrContains(m, absl::StrCat("\"sha256\": \"", Sha256Hex(data.data(), data.size()), "\"")))
        << name;
  }
  // The documented index is the one the code uses.
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format_version, 2);
  const std::string codebook = ReadFileBytes(dir + "/codebook.f32");
  const int64_t nodes = loaded->nodes(), f = 7, n = 13;
  float w = 0;
  std::memcpy(&w, codebook.data() + 4 * (f * nodes + n), 4);
  EXPECT_EQ(w, loaded->model.Weight(f, n));
}

TEST(AtlasTest, Version1AtlasesStillLoadAndStillCatchDamage) {
  const Atlas atlas = TrainedAtlas();
  const std::string dir = TestTmpPath("version1");
  ASSERT_TRUE(SaveAtlas(atlas, dir).ok());
  WriteFileBytes(dir + "/manifest.json", AsVersion1Manifest(dir));
  auto loaded = LoadAtlas(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format_version, 1);
  // Trained before the schedule could be chosen: with the legacy one.
  EXPECT_EQ(loaded->options.radius_schedule, RadiusSchedule::kLegacy);
  Atlas expected = atlas;
  expected.options.radius_schedule = RadiusSchedule::kLegacy;
  ExpectSameAtlas(expected, *loaded);
  // Saving it again writes the current version.
  ASSERT_TRUE(SaveAtlas(*loaded, dir).ok());
  EXPECT_EQ(LoadAtlas(dir)->format_version, 2);
  // A version-1 atlas with a flipped byte still fails (the trailer).
  WriteFileBytes(dir + "/manifest.json", AsVersion1Manifest(dir));
  std::string data = ReadFileBytes(dir + "/bmu.i32");
  data[3] ^= 0x04;
  WriteFileBytes(dir + "/bmu.i32", data);
  EXPECT_EQ(LoadAtlas(dir).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(LoadAtlas(dir).status().message(), "bmu.i32")) << LoadAtlas(dir).status();
}

TEST_F(DamagedAtlasTest, ManifestSizeDisagreesWithShape) {
  // A consistent-looking manifest (CRC recomputed is not possible by hand), so
  // change the file size instead: one extra byte is "too long".
  std::string data = ReadFileBytes(Path("bmu.i32"));
  WriteFileBytes(Path("bmu.i32"), data + "x");
  ExpectError(absl::StatusCode::kDataLoss, "bmu.i32");
}

TEST(AtlasTest, MakeAtlasChecksSizes) {
  TrainResult result;
  result.model.grid = GridShape{2, 2, Topology::kPlanar};
  result.model.features = 3;
  result.model.weights_f32.assign(12, 0.5f);
  TrainOptions options;
  EXPECT_EQ(MakeAtlas(result, {0, 1}, {"a", "b"}, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAtlas(result, {0, 1}, {}, {"x"}, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAtlas(result, {0, 4}, {}, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAtlas(result, {-1}, {}, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeAtlas(result, {0}, {"a", "b\nc", "d"}, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  TrainResult short_weights = result;
  short_weights.model.weights_f32.resize(11);
  EXPECT_EQ(MakeAtlas(short_weights, {0}, {}, {}, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MakeAtlas(result, {0, 3}, {}, {}, options).ok());
}

// Hand-made 3x2 map over 4 features with known weights.
Atlas SmallAtlas() {
  TrainResult result;
  result.model.grid = GridShape{3, 2, Topology::kPlanar};
  result.model.features = 4;
  // feature-major: w[v * 6 + i]
  result.model.weights_f32 = {
      0.9f, 0.1f, 0.0f, 0.2f, 0.2f, 0.0f,  // feature 0
      0.5f, 0.8f, 0.0f, 0.2f, 0.1f, 0.3f,  // feature 1
      0.5f, 0.2f, 0.7f, 0.2f, 0.6f, 0.0f,  // feature 2
      0.0f, 0.8f, 0.1f, 0.2f, 0.3f, 0.4f,  // feature 3
  };
  auto atlas = MakeAtlas(result, {1, 0, 1, 4, 1, 0}, {"a", "b", "c", "d"}, {}, TrainOptions());
  EXPECT_TRUE(atlas.ok()) << atlas.status();
  return *std::move(atlas);
}

TEST(AtlasQueryTest, DocumentsInCell) {
  const Atlas atlas = SmallAtlas();
  EXPECT_EQ(DocumentsInCell(atlas, 1), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(DocumentsInCell(atlas, 0), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(DocumentsInCell(atlas, 4), (std::vector<int64_t>{3}));
  EXPECT_TRUE(DocumentsInCell(atlas, 2).empty());
  EXPECT_TRUE(DocumentsInCell(atlas, 99).empty());
}

TEST(AtlasQueryTest, TopFeaturesStrongestFirstTiesByIndex) {
  const Atlas atlas = SmallAtlas();
  auto top = TopFeatures(atlas, 0, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].feature, 0);
  EXPECT_FLOAT_EQ(top[0].weight, 0.9f);
  EXPECT_EQ(top[1].feature, 1);  // 0.5 tie with feature 2: lower index first
  EXPECT_FLOAT_EQ(top[1].weight, 0.5f);
  top = TopFeatures(atlas, 1, 10);  // k beyond the features: all of them
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].feature, 1);  // 0.8 tie with feature 3
  EXPECT_EQ(top[1].feature, 3);
  EXPECT_EQ(top[2].feature, 2);
  EXPECT_EQ(top[3].feature, 0);
  EXPECT_TRUE(TopFeatures(atlas, 6, 3).empty());
  EXPECT_TRUE(TopFeatures(atlas, -1, 3).empty());
  EXPECT_TRUE(TopFeatures(atlas, 0, 0).empty());
}

TEST(AtlasQueryTest, HitCounts) {
  const Atlas atlas = SmallAtlas();
  EXPECT_EQ(HitCounts(atlas), (std::vector<int64_t>{2, 3, 0, 0, 1, 0}));
}

}  // namespace
}  // namespace som
}  // namespace tessera
