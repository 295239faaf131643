// WriteDicomSeg / ReadDicomSeg: random multi-label round trips (oblique,
// both handedness, frames that do not start on a byte), dciodvfy, a SEG
// derived from the CT phantom series, the dcmqi SEG of
// ../shared/data/dicom/known-geometry-24x38x3 against its image series and
// NRRD labels, FRACTIONAL and overlapping segments, malformed files.
#include "common/dicom/dicom_seg.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/dicom_write_testing.h"
#include "common/dicom/volume_file.h"

namespace tessera::dicom {
namespace {

using testing::AffineDiff;
using testing::Dciodvfy;
using testing::Det;
using testing::ObliqueDirection;
using testing::ReverseK;
using testing::TmpDir;

// Random labels {0, 1, 5, 7, 300, big} on an oblique grid (big = 70000, or
// 2^30 to take the writer's sparse path for large values); label 5 only
// on slices 2..4, the first and last slices empty (the grid's extent must
// survive anyway). 23 x 17 = 391 pixels: frames do not start on a byte.
Volume RandomLabels(bool negative, uint32_t seed, int32_t big = 70000) {
  const int nx = 23, ny = 17, nz = 9;
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kInt32).value();
  std::mt19937 rng(seed);
  const int32_t values[] = {0, 1, 7, 300, big};
  int32_t* p = v.data.data<int32_t>();
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) {
        int32_t x = values[rng() % 5];
        if (k >= 2 && k <= 4 && rng() % 4 == 0) x = 5;
        if (k == 0 || k == nz - 1) x = 0;
        p[i + nx * (j + ny * k)] = x;
      }
  v.geometry.direction = ObliqueDirection(0.5, -0.3, negative);
  v.geometry.spacing = {0.8, 1.3, 2.2};
  v.geometry.origin = {-31.5, 17.25, 42};
  return v;
}

int64_t CountDiff(const NDArray& a, const NDArray& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) n += a.data<int32_t>()[i] != b.data<int32_t>()[i];
  return n;
}

void ExpectNoDciodvfyErrors(const std::string& file) {
  const std::string report = Dciodvfy(file);
  std::printf("SEG dciodvfy %s:\n%s\n", file.c_str(), report.c_str());
  EXPECT_EQ(report.find("Error"), std::string::npos) << report;
}

TEST(DicomSegTest, RandomLabelsRoundTripBothHandedness) {
  for (const bool negative : {true, false}) {
    const int32_t big = negative ? 70000 : (1 << 30);
    const Volume v = RandomLabels(negative, negative ? 7 : 11, big);
    ASSERT_EQ(Det(v.geometry) < 0, negative);
    const std::string file = TmpDir(negative ? "seg_neg" : "seg_pos") + "/labels.dcm";
    DicomSegWriteOptions opts;
    opts.series_description = "dicom_seg_test";
    opts.segment_names[7] = "seven";
    auto written = WriteDicomSeg(v, file, opts);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(written->sop_class_uid, UID_SegmentationStorage);
    ASSERT_EQ(written->files.size(), 1u);
    auto back = ReadDicomSeg(file);
    ASSERT_TRUE(back.ok()) << back.status();
    // A positive determinant reads back with k reversed, as for a series.
    const Volume expected = negative ? v : ReverseK(v);
    ASSERT_EQ(back->labels.data.shape(), v.data.shape());
    ASSERT_EQ(back->labels.data.dtype(), DType::kInt32);
    const double ad = AffineDiff(back->labels.geometry, expected.geometry);
    std::printf("SEG %s determinant: %lld differing labels, affine diff %g mm\n", negative ? "negative" : "positive",
                static_cast<long long>(CountDiff(back->labels.data, expected.data)), ad);
    EXPECT_EQ(CountDiff(back->labels.data, expected.data), 0);
    EXPECT_LE(ad, 1e-4);
    const std::map<int64_t, std::string> names = {
        {1, "label 1"}, {5, "label 5"}, {7, "seven"}, {300, "label 300"}, {big, absl::StrCat("label ", big)}};
    EXPECT_EQ(back->segment_names, names);
    EXPECT_EQ(back->series_instance_uid, written->series_instance_uid);
    EXPECT_FALSE(back->frame_of_reference_uid.empty());
    // Frames only where a segment is present (+ the empty first/last slices' one each).
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(file.c_str()).good());
    Sint32 frames = 0;
    f.getDataset()->findAndGetSint32(DCM_NumberOfFrames, frames);
    EXPECT_EQ(frames, 4 * 7 + 3 + 2);  // 4 labels on slices 1..7, label 5 on 2..4, slices 0 and 8
    // ReadVolumeFile takes a SEG as a label volume.
    std::string format;
    auto as_volume = ReadVolumeFile(file, &format);
    ASSERT_TRUE(as_volume.ok()) << as_volume.status();
    EXPECT_EQ(format, "DICOM SEG");
    EXPECT_EQ(CountDiff(as_volume->data, expected.data), 0);
    ExpectNoDciodvfyErrors(file);
  }
}

// A SEG drawn on the CT phantom's own grid: same frame of reference, every
// frame derived from the CT slice at its position.
TEST(DicomSegTest, DerivedFromReferenceSeries) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom";
  const std::string src = data + "/ct-series-philips-phantom";
  auto ct = ReadDicomSeries({src});
  ASSERT_TRUE(ct.ok()) << ct.status();
  Volume labels;
  labels.geometry = ct->volume.geometry;
  labels.data = NDArray::Allocate(ct->volume.data.shape(), DType::kUInt8).value();
  auto hu = ct->volume.data.AsType(DType::kFloat32).value();
  for (int64_t i = 0; i < hu.num_elements(); ++i) {
    const float v = hu.data<float>()[i];
    labels.data.data<uint8_t>()[i] = v > 200 ? 2 : (v > -200 ? 1 : 0);
  }
  const std::string file = TmpDir("seg_ct") + "/ct_labels.dcm";
  DicomSegWriteOptions opts;
  opts.series_description = "thresholds";
  opts.reference = src;
  auto written = WriteDicomSeg(labels, file, opts);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->study_instance_uid, ct->info.study_instance_uid);
  auto back = ReadDicomSeg(file);
  ASSERT_TRUE(back.ok()) << back.status();
  auto u8 = back->labels.data.AsType(DType::kUInt8).value();
  int64_t diff = 0;
  for (int64_t i = 0; i < u8.num_elements(); ++i) diff += u8.data<uint8_t>()[i] != labels.data.data<uint8_t>()[i];
  EXPECT_EQ(diff, 0);
  EXPECT_LE(AffineDiff(back->labels.geometry, labels.geometry), 1e-4);
  DcmFileFormat ref;
  ASSERT_TRUE(ref.loadFile(ct->info.files.front().c_str()).good());
  OFString ref_for;
  ref.getDataset()->findAndGetOFString(DCM_FrameOfReferenceUID, ref_for);
  EXPECT_EQ(back->frame_of_reference_uid, ref_for.c_str());
  // Each frame's DerivationImageSequence names the CT slice at its position.
  DcmFileFormat f;
  ASSERT_TRUE(f.loadFile(file.c_str()).good());
  DcmSequenceOfItems* per_frame = nullptr;
  ASSERT_TRUE(f.getDataset()->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame).good());
  std::set<std::string> ct_instances;
  for (const std::string& file_name : ct->info.files) {
    DcmFileFormat c;
    ASSERT_TRUE(c.loadFile(file_name.c_str()).good());
    OFString uid;
    c.getDataset()->findAndGetOFString(DCM_SOPInstanceUID, uid);
    ct_instances.insert(uid.c_str());
  }
  for (unsigned long i = 0; i < per_frame->card(); ++i) {
    DcmItem* derivation = nullptr;
    ASSERT_TRUE(per_frame->getItem(i)->findAndGetSequenceItem(DCM_DerivationImageSequence, derivation, 0).good())
        << "frame " << i + 1;
    DcmItem* source = nullptr;
    ASSERT_TRUE(derivation->findAndGetSequenceItem(DCM_SourceImageSequence, source, 0).good());
    OFString uid;
    source->findAndGetOFString(DCM_ReferencedSOPInstanceUID, uid);
    EXPECT_EQ(ct_instances.count(uid.c_str()), 1u) << uid;
  }
  ExpectNoDciodvfyErrors(file);
}

// The tiny NRRD of the dcmqi test data: header fields and gzip'd shorts.
struct Nrrd {
  std::vector<int> sizes;
  std::vector<int16_t> values;
};
Nrrd ReadNrrd(const std::string& path) {
  const std::string bytes = testing::ReadBytes(path);
  const size_t end = bytes.find("\n\n");
  Nrrd out;
  if (end == std::string::npos) return out;
  bool gzip = false;
  for (absl::string_view line : absl::StrSplit(absl::string_view(bytes).substr(0, end), '\n')) {
    if (absl::ConsumePrefix(&line, "sizes: ")) {
      for (absl::string_view s : absl::StrSplit(line, ' ')) {
        int v = 0;
        if (absl::SimpleAtoi(s, &v)) out.sizes.push_back(v);
      }
    }
    if (line == "encoding: gzip") gzip = true;
  }
  if (out.sizes.size() != 3 || !gzip) return out;
  out.values.resize(static_cast<size_t>(out.sizes[0]) * out.sizes[1] * out.sizes[2]);
  z_stream z{};
  inflateInit2(&z, 16 + MAX_WBITS);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + end + 2));
  z.avail_in = static_cast<uInt>(bytes.size() - end - 2);
  z.next_out = reinterpret_cast<Bytef*>(out.values.data());
  z.avail_out = static_cast<uInt>(out.values.size() * 2);
  inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (z.avail_out != 0) out.values.clear();
  return out;
}

TEST(DicomSegTest, ReadsDcmqiSegOnItsImageGrid) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom";
  const std::string base = data + "/known-geometry-24x38x3";
  auto seg = ReadDicomSeg(base + "/seg/label.seg");
  ASSERT_TRUE(seg.ok()) << seg.status();
  auto image = ReadDicomSeries({base + "/image"});
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(seg->labels.data.shape(), image->volume.data.shape());
  const double ad = AffineDiff(seg->labels.geometry, image->volume.geometry);
  std::printf("SEG dcmqi label.seg vs its image series: affine diff %g mm\n", ad);
  EXPECT_LE(ad, 1e-3);
  EXPECT_EQ(seg->segment_names, (std::map<int64_t, std::string>{{1, "Liver"}}));
  // The NRRD holds the same labels: NRRD (i, j, k) in LPS is our (i, ny-1-j, k).
  const Nrrd nrrd = ReadNrrd(base + "/nrrd/label.nrrd");
  ASSERT_EQ(nrrd.sizes, (std::vector<int>{24, 38, 3}));
  ASSERT_FALSE(nrrd.values.empty());
  const int nx = 24, ny = 38, nz = 3;
  int64_t diff = 0, on = 0;
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) {
        const bool a = nrrd.values[i + nx * (j + ny * k)] != 0;
        const bool b = seg->labels.data.data<int32_t>()[i + nx * ((ny - 1 - j) + ny * k)] == 1;
        diff += a != b;
        on += a;
      }
  std::printf("SEG dcmqi label.seg vs label.nrrd: %lld labelled voxels, %lld differ\n", static_cast<long long>(on),
              static_cast<long long>(diff));
  EXPECT_GT(on, 0);
  EXPECT_EQ(diff, 0);
}

// Two segments on one slice; the object is then edited: overlaps (the higher
// segment number wins) and a FRACTIONAL copy (at least half the maximum is in).
TEST(DicomSegTest, OverlapsAndFractional) {
  Volume v;
  v.data = NDArray::Allocate({5, 3, 1}, DType::kInt16).value();
  const int16_t pattern[15] = {1, 1, 0, 2, 2, 1, 0, 0, 2, 0, 1, 1, 2, 2, 0};
  std::copy(pattern, pattern + 15, v.data.data<int16_t>());
  const std::string file = TmpDir("seg_edit") + "/two.dcm";
  ASSERT_TRUE(WriteDicomSeg(v, file).ok());
  DcmFileFormat f;
  ASSERT_TRUE(f.loadFile(file.c_str()).good());
  DcmDataset* ds = f.getDataset();
  // Frame 1 = segment 1, frame 2 = segment 2 (15 bits each, back to back).
  auto bit = [](const Uint8* p, int b) { return (p[b >> 3] >> (b & 7)) & 1; };
  const Uint8* packed = nullptr;
  ASSERT_TRUE(ds->findAndGetUint8Array(DCM_PixelData, packed).good());
  std::vector<int> frame1(15), frame2(15);
  for (int q = 0; q < 15; ++q) {
    frame1[q] = bit(packed, q);
    frame2[q] = bit(packed, 15 + q);
  }
  // Overlap: segment 1's frame also covers all of segment 2's pixels and vice versa.
  std::vector<Uint8> both(4, 0);
  for (int q = 0; q < 15; ++q) {
    const int any = frame1[q] | frame2[q];
    both[q >> 3] |= static_cast<Uint8>(any << (q & 7));
    both[(15 + q) >> 3] |= static_cast<Uint8>(any << ((15 + q) & 7));
  }
  ds->putAndInsertUint8Array(DCM_PixelData, both.data(), 4);
  const std::string overlap = TmpDir("seg_overlap") + "/overlap.dcm";
  ASSERT_TRUE(f.saveFile(overlap.c_str(), EXS_LittleEndianExplicit).good());
  auto o = ReadDicomSeg(overlap);
  ASSERT_TRUE(o.ok()) << o.status();
  for (int q = 0; q < 15; ++q) {
    EXPECT_EQ(o->labels.data.data<int32_t>()[q], pattern[q] == 0 ? 0 : 2) << q;
  }
  // FRACTIONAL: 8 bits, MaximumFractionalValue 200; 99 is out, 100 in.
  std::vector<Uint8> fractional(30, 0);
  for (int q = 0; q < 15; ++q) {
    fractional[q] = frame1[q] ? (q % 2 ? 100 : 200) : 99 * (q % 3 == 0);
    fractional[15 + q] = frame2[q] ? 150 : 0;
  }
  ASSERT_TRUE(f.loadFile(file.c_str()).good());
  ds = f.getDataset();
  ds->putAndInsertString(DCM_SegmentationType, "FRACTIONAL");
  ds->putAndInsertString(DCM_SegmentationFractionalType, "PROBABILITY");
  ds->putAndInsertUint16(DCM_MaximumFractionalValue, 200);
  ds->putAndInsertUint16(DCM_BitsAllocated, 8);
  ds->putAndInsertUint16(DCM_BitsStored, 8);
  ds->putAndInsertUint16(DCM_HighBit, 7);
  ds->putAndInsertUint8Array(DCM_PixelData, fractional.data(), 30);
  const std::string frac = TmpDir("seg_fractional") + "/fractional.dcm";
  ASSERT_TRUE(f.saveFile(frac.c_str(), EXS_LittleEndianExplicit).good());
  auto fr = ReadDicomSeg(frac);
  ASSERT_TRUE(fr.ok()) << fr.status();
  for (int q = 0; q < 15; ++q) EXPECT_EQ(fr->labels.data.data<int32_t>()[q], pattern[q]) << q;
}

TEST(DicomSegTest, MalformedAndOtherFilesAreRefused) {
  const Volume v = RandomLabels(true, 3);
  const std::string dir = TmpDir("seg_bad");
  const std::string file = dir + "/ok.dcm";
  ASSERT_TRUE(WriteDicomSeg(v, file).ok());
  const std::string bytes = testing::ReadBytes(file);
  for (const size_t cut : {bytes.size() / 2, bytes.size() - 40, size_t{200}}) {
    const std::string truncated = absl::StrCat(dir, "/truncated_", cut, ".dcm");
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    auto r = ReadDicomSeg(truncated);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << cut << ": " << r.status();
    std::printf("SEG truncated at %zu of %zu bytes: %s\n", cut, bytes.size(), r.status().ToString().c_str());
  }
  std::ofstream(dir + "/text.txt") << "not DICOM at all";
  auto text = ReadDicomSeg(dir + "/text.txt");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << text.status();
  EXPECT_EQ(ReadDicomSeg(dir + "/missing.dcm").status().code(), absl::StatusCode::kNotFound);
  // Bounded: the file, and the labels its frames span (23x17x9 int32 = 14076 bytes).
  EXPECT_EQ(ReadDicomSeg(file, 1000).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadDicomSeg(file, 14000).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ReadDicomSeg(file, 20000).ok());
  EXPECT_FALSE(IsDicomSegFile(dir + "/text.txt"));
  EXPECT_TRUE(IsDicomSegFile(file));
  const std::string data = DicomTestDataDir();
  if (!data.empty()) {
    const std::string image = data + "/known-geometry-24x38x3/image/IMG0001.dcm";
    EXPECT_FALSE(IsDicomSegFile(image));
    auto r = ReadDicomSeg(image);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("not a DICOM Segmentation"), std::string::npos) << r.status();
  }

  // Writer refusals.
  Volume zero = v;
  zero.data = NDArray::Allocate(v.data.shape(), DType::kInt32).value();
  std::fill(zero.data.data<int32_t>(), zero.data.data<int32_t>() + zero.data.num_elements(), 0);
  EXPECT_EQ(WriteDicomSeg(zero, dir + "/z.dcm").status().code(), absl::StatusCode::kInvalidArgument);
  Volume negative = v;
  negative.data = NDArray::Allocate(v.data.shape(), DType::kInt32).value();
  std::fill(negative.data.data<int32_t>(), negative.data.data<int32_t>() + negative.data.num_elements(), -2);
  auto neg = WriteDicomSeg(negative, dir + "/n.dcm");
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(neg.status().message().find("[0, 2^31)"), std::string::npos) << neg.status();
  Volume fraction;
  fraction.data = NDArray::Allocate({2, 2, 1}, DType::kFloat32).value();
  std::fill(fraction.data.data<float>(), fraction.data.data<float>() + 4, 0.5f);
  EXPECT_EQ(WriteDicomSeg(fraction, dir + "/f.dcm").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::dicom
