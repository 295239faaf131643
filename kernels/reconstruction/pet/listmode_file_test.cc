// TSLM list-mode files: round trips (bytes and files), the exact little-endian
// layout, and every corruption the reader must name: magic, version, reserved
// bytes, TOF fields, truncation (naming the incomplete event), trailing bytes,
// events out of the geometry's range (naming the event), header/geometry TOF
// mismatch, missing file.
#include "kernels/reconstruction/pet/listmode_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/reconstruction/pet/pet_testing.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

using ::testing::HasSubstr;

PetGeometry Geometry() { return testing::Cone3D(testing::Tof(5, 4.0, 7.0)); }  // 16 views, 20 cols, 14 rows

std::vector<ListModeEvent> RandomEvents(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<ListModeEvent> events(n);
  for (ListModeEvent& e : events) {
    e.view = rng() % 16;
    e.col = rng() % 20;
    e.row = rng() % 14;
    e.tof_bin = static_cast<int16_t>(static_cast<int>(rng() % 5) - 2);
    e.weight = rng() % 7 == 0 ? 0 : 1;
  }
  return events;
}

bool Same(const ListModeEvent& a, const ListModeEvent& b) {
  return a.view == b.view && a.col == b.col && a.row == b.row && a.tof_bin == b.tof_bin && a.weight == b.weight;
}

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ListModeFileTest, RoundTripsThroughBytesAndFiles) {
  const PetGeometry g = Geometry();
  const std::vector<ListModeEvent> events = RandomEvents(100003, 1);  // more than one read chunk
  const ListModeHeader header = ListModeHeaderFor(g);
  const std::string bytes = EncodeListMode(header, events);
  ASSERT_EQ(bytes.size(), 32u + 12u * events.size());
  auto decoded = DecodeListMode(bytes, &g);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) ASSERT_TRUE(Same(decoded->events[i], events[i])) << i;
  EXPECT_EQ(decoded->header.num_tof_bins, 5u);
  EXPECT_FLOAT_EQ(decoded->header.tof_bin_mm, 4.0f);
  EXPECT_FLOAT_EQ(decoded->header.tof_fwhm_mm, 7.0f);

  const std::string path = TmpPath("roundtrip.tslm");
  ASSERT_TRUE(WriteListModeFile(path, header, events).ok());
  auto read = ReadListModeFile(path, &g);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) ASSERT_TRUE(Same(read->events[i], events[i])) << i;
  std::ifstream in(path, std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, bytes);
}

TEST(ListModeFileTest, LayoutIsLittleEndianAsDocumented) {
  ListModeHeader h;
  h.num_tof_bins = 13;
  h.tof_bin_mm = 1.5f;  // 0x3fc00000
  h.tof_fwhm_mm = 2.0f;  // 0x40000000
  ListModeEvent e;
  e.view = 0x01020304;
  e.col = 0x0506;
  e.row = 0x0708;
  e.tof_bin = -2;  // 0xfffe
  e.weight = 1;
  const std::string b = EncodeListMode(h, {e});
  const std::string expected_header("TSLM\x01\0\0\0\x01\0\0\0\0\0\0\0\x0d\0\0\0\0\0\xc0\x3f\0\0\0\x40\0\0\0\0", 32);
  EXPECT_EQ(b.substr(0, 32), expected_header);
  EXPECT_EQ(b.substr(32), std::string("\x04\x03\x02\x01\x06\x05\x08\x07\xfe\xff\x01\x00", 12));
}

TEST(ListModeFileTest, NamesEveryCorruption) {
  const PetGeometry g = Geometry();
  const std::vector<ListModeEvent> events = RandomEvents(10, 2);
  const std::string good = EncodeListMode(ListModeHeaderFor(g), events);
  auto error = [&](const std::string& bytes, const PetGeometry* geometry = nullptr) {
    auto d = DecodeListMode(bytes, geometry);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(d.status().message());
  };
  std::string b = good;
  b[0] = 'X';
  EXPECT_THAT(error(b), HasSubstr("not a TSLM"));
  b = good;
  b[4] = 2;
  EXPECT_THAT(error(b), HasSubstr("version 2 is not supported"));
  b = good;
  b[30] = 1;
  EXPECT_THAT(error(b), HasSubstr("reserved"));
  b = good;
  b[16] = 0;  // num_tof_bins = 0
  EXPECT_THAT(error(b), HasSubstr("num_tof_bins"));
  EXPECT_THAT(error(good.substr(0, 20)), HasSubstr("shorter than the 32-byte header"));
  // Cut in the middle of event 7.
  EXPECT_THAT(error(good.substr(0, 32 + 12 * 7 + 5)), HasSubstr("truncated"));
  EXPECT_THAT(error(good.substr(0, 32 + 12 * 7 + 5)), HasSubstr("event 7 is incomplete"));
  EXPECT_THAT(error(good + "xyz"), HasSubstr("3 bytes after its 10 events"));

  // Indices out of the geometry's range, each named with its event number.
  std::vector<ListModeEvent> bad = events;
  bad[3].view = 16;
  EXPECT_THAT(error(EncodeListMode(ListModeHeaderFor(g), bad), &g), HasSubstr("event 3: view 16 out of range [0, 16)"));
  bad = events;
  bad[4].col = 20;
  EXPECT_THAT(error(EncodeListMode(ListModeHeaderFor(g), bad), &g), HasSubstr("event 4: col 20"));
  bad = events;
  bad[5].row = 99;
  EXPECT_THAT(error(EncodeListMode(ListModeHeaderFor(g), bad), &g), HasSubstr("event 5: row 99"));
  bad = events;
  bad[6].tof_bin = 3;  // K = 5: [-2, 3)
  EXPECT_THAT(error(EncodeListMode(ListModeHeaderFor(g), bad), &g),
              HasSubstr("event 6: tof_bin 3 out of range [-2, 3)"));
  // Without a geometry the format alone is checked.
  EXPECT_TRUE(DecodeListMode(EncodeListMode(ListModeHeaderFor(g), bad)).ok());

  ListModeHeader other = ListModeHeaderFor(g);
  other.tof_fwhm_mm = 9;
  EXPECT_THAT(error(EncodeListMode(other, events), &g), HasSubstr("tof_fwhm_mm 9 does not match"));
  other = ListModeHeaderFor(g);
  other.num_tof_bins = 7;
  EXPECT_THAT(error(EncodeListMode(other, events), &g), HasSubstr("num_tof_bins 7 does not match"));
}

TEST(ListModeFileTest, ReaderReportsTruncatedFilesAndMissingOnes) {
  const PetGeometry g = Geometry();
  const std::string good = EncodeListMode(ListModeHeaderFor(g), RandomEvents(1000, 3));
  const std::string path = TmpPath("truncated.tslm");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(good.data(), 32 + 12 * 600 + 11);
  }
  auto r = ReadListModeFile(path, &g);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("event 600 is incomplete"));
  EXPECT_THAT(r.status().message(), HasSubstr(path));

  std::vector<ListModeEvent> bad = RandomEvents(200000, 4);
  bad[150001].view = 1000;
  ASSERT_TRUE(WriteListModeFile(path, ListModeHeaderFor(g), bad).ok());
  EXPECT_THAT(ReadListModeFile(path, &g).status().message(), HasSubstr("event 150001: view 1000"));
  EXPECT_EQ(ReadListModeFile(TmpPath("missing.tslm")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera
