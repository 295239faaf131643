// WriteDicomSeries: round trips through our reader (the CT phantom series of
// ../shared/data/dicom, a synthetic oblique float volume), through Debian's
// dcm2niix when on PATH, dciodvfy (dicom3tools) when on PATH, refusals.
#include "common/dicom/dicom_writer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/dicom_write_testing.h"
#include "common/nifti_io.h"

namespace tessera::dicom {
namespace {

using testing::AffineDiff;
using testing::Det;
using testing::Have;
using testing::ObliqueDirection;
using testing::ReverseK;
using testing::TmpDir;

// Every voxel as a double (NDArray::AsType), for comparing volumes of any type.
std::vector<double> Values(const NDArray& a) {
  absl::StatusOr<NDArray> d = a.AsType(DType::kFloat64);
  if (!d.ok()) return std::vector<double>(a.num_elements(), NAN);
  return std::vector<double>(d->data<double>(), d->data<double>() + d->num_elements());
}

double MaxVoxelDiff(const NDArray& a, const NDArray& b) {
  double d = 0;
  const std::vector<double> va = Values(a), vb = Values(b);
  for (int64_t i = 0; i < a.num_elements(); ++i) d = std::max(d, std::abs(va[i] - vb[i]));
  return d;
}

std::string Tag(const std::string& file, const DcmTagKey& key) {
  DcmFileFormat f;
  if (f.loadFile(file.c_str()).bad()) return "<unreadable>";
  OFString s;
  f.getDataset()->findAndGetOFStringArray(key, s);
  return s.c_str();
}

// dcm2niix on a written series equals our reader's volume (when on PATH).
void CompareWithDcm2niix(const std::string& dir, const Volume& ours, const std::string& name) {
  if (!Have("dcm2niix")) {
    std::printf("WRITER dcm2niix not on PATH: comparison skipped\n");
    return;
  }
  const std::string out = TmpDir("dcm2niix_" + name);
  const std::string cmd =
      absl::StrCat("dcm2niix -z n -b n -f out -o '", out, "' '", dir, "' > '", out, ".log' 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto ref = ReadNifti(out + "/out.nii");
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->data.shape(), ours.data.shape());
  double rel = 0;
  const std::vector<double> ours_values = Values(ours.data), ref_values = Values(ref->data);
  for (int64_t i = 0; i < ref->data.num_elements(); ++i) {
    const double a = ours_values[i], b = ref_values[i];
    rel = std::max(rel, std::abs(a - b) / std::max(1.0, std::abs(b)));
  }
  const double affine = AffineDiff(ours.geometry, ref->geometry);
  std::printf("WRITER dcm2niix %s: max relative voxel diff %g, affine diff %g mm\n", name.c_str(), rel, affine);
  EXPECT_LE(rel, 1e-5);
  EXPECT_LE(affine, 1e-3);
}

// dciodvfy (dicom3tools) on one written file: no "Error" lines (when on PATH).
void Dciodvfy(const std::string& file) {
  const std::string report = testing::Dciodvfy(file);
  std::printf("WRITER dciodvfy %s:\n%s\n", file.c_str(), report.c_str());
  EXPECT_EQ(report.find("Error"), std::string::npos) << report;
}

TEST(DicomWriterTest, CtPhantomRoundTrip) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  const std::string src = data + "/ct-series-philips-phantom";
  auto in = ReadDicomSeries({src});
  ASSERT_TRUE(in.ok()) << in.status();
  const std::string dir = TmpDir("ct_out");
  DicomWriteOptions opts;
  opts.series_description = "tessera dicom_writer_test";
  opts.reference = src;
  opts.values_are_hounsfield = true;
  const auto t0 = std::chrono::steady_clock::now();
  auto written = WriteDicomSeries(in->volume, dir, opts);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->sop_class_uid, UID_CTImageStorage);
  EXPECT_EQ(written->max_abs_error, 0);
  auto back = ReadDicomSeries({dir});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->volume.data.shape(), in->volume.data.shape());
  EXPECT_EQ(back->volume.data.dtype(), in->volume.data.dtype());
  const double vd = MaxVoxelDiff(back->volume.data, in->volume.data);
  const double ad = AffineDiff(back->volume.geometry, in->volume.geometry);
  std::printf("WRITER ct phantom %s %s: write (with reference read) %.3f s, max voxel diff %g, affine diff %g mm\n",
              ShapeToString(in->volume.data.shape()).c_str(), std::string(DTypeName(in->volume.data.dtype())).c_str(),
              secs, vd, ad);
  EXPECT_EQ(vd, 0);
  EXPECT_LE(ad, 1e-4);
  // Identity: patient and study copied; series and instances new.
  const std::string a = in->info.files.front(), b = back->info.files.front();
  for (const DcmTagKey& key : {DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate, DCM_PatientSex,
                               DCM_StudyInstanceUID, DCM_StudyDate, DCM_StudyTime, DCM_AccessionNumber,
                               DCM_StudyID, DCM_ReferringPhysicianName, DCM_FrameOfReferenceUID, DCM_Modality}) {
    EXPECT_EQ(Tag(b, key), Tag(a, key)) << DcmTag(key).getTagName();
  }
  EXPECT_EQ(back->info.study_instance_uid, in->info.study_instance_uid);
  EXPECT_NE(back->info.series_instance_uid, in->info.series_instance_uid);
  EXPECT_EQ(back->info.series_instance_uid, written->series_instance_uid);
  EXPECT_EQ(back->info.series_description, "tessera dicom_writer_test");
  EXPECT_NE(Tag(b, DCM_SOPInstanceUID), Tag(a, DCM_SOPInstanceUID));
  EXPECT_NE(Tag(b, DCM_SOPInstanceUID), Tag(back->info.files.back(), DCM_SOPInstanceUID));
  // ReferencedSeriesSequence names the reference.
  DcmFileFormat f;
  ASSERT_TRUE(f.loadFile(b.c_str()).good());
  DcmItem* item = nullptr;
  ASSERT_TRUE(f.getDataset()->findAndGetSequenceItem(DCM_ReferencedSeriesSequence, item, 0).good());
  OFString ref_uid;
  item->findAndGetOFString(DCM_SeriesInstanceUID, ref_uid);
  EXPECT_EQ(ref_uid.c_str(), in->info.series_instance_uid);
  CompareWithDcm2niix(dir, back->volume, "ct");
  Dciodvfy(b);
}

// Values not stated to be HU (a reconstruction's 1/mm, an MR resampled onto
// a CT) are Secondary Capture even with a CT reference: CT Image Storage
// would claim RescaleType HU.
TEST(DicomWriterTest, CtReferenceWithoutHounsfieldIsSecondaryCapture) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  const std::string src = data + "/ct-series-philips-phantom";
  auto in = ReadDicomSeries({src});
  ASSERT_TRUE(in.ok()) << in.status();
  DicomWriteOptions opts;
  opts.reference = src;
  auto written = WriteDicomSeries(in->volume, TmpDir("ct_not_hu"), opts);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->sop_class_uid, UID_SecondaryCaptureImageStorage);
  EXPECT_EQ(Tag(written->files.front(), DCM_RescaleType), "US");
  EXPECT_EQ(Tag(written->files.front(), DCM_StudyInstanceUID), in->info.study_instance_uid);
}

// negative: an index frame of negative determinant (what DICOM reads as).
Volume Synthetic(int nx, int ny, int nz, bool negative = true) {
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kFloat32).value();
  float* p = v.data.data<float>();
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i)
        p[i + nx * (j + ny * k)] = static_cast<float>(100 * std::sin(0.3 * i) * std::cos(0.2 * j) + 7.25 * k - 3.1);
  // Oblique: rotation about a tilted axis, anisotropic spacing.
  v.geometry.direction = ObliqueDirection(0.4, 0.25, negative);
  v.geometry.spacing = {0.9, 1.1, 2.5};
  v.geometry.origin = {-40.5, 12.25, 30};
  return v;
}

TEST(DicomWriterTest, ObliqueFloatRoundTrip) {
  const Volume v = Synthetic(40, 30, 12);
  const std::string dir = TmpDir("oblique_out");
  DicomWriteOptions opts;
  opts.series_description = "synthetic";
  auto written = WriteDicomSeries(v, dir, opts);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->sop_class_uid, UID_SecondaryCaptureImageStorage);
  EXPECT_EQ(written->files.size(), 12u);
  // Stated tolerance: half the slope (range / 131070), plus float rounding.
  const double tol = written->rescale_slope / 2 + 1e-4;
  EXPECT_LE(written->max_abs_error, tol);
  auto back = ReadDicomSeries({dir});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->volume.data.shape(), v.data.shape());
  const double vd = MaxVoxelDiff(back->volume.data, v.data);
  const double ad = AffineDiff(back->volume.geometry, v.geometry);
  std::printf("WRITER oblique float: slope %g, max voxel diff %g (tolerance %g), affine diff %g mm\n",
              written->rescale_slope, vd, tol, ad);
  EXPECT_LE(vd, tol);
  EXPECT_LE(ad, 1e-4);
  // New study, anonymous patient.
  EXPECT_EQ(Tag(written->files[0], DCM_PatientName), "");
  EXPECT_EQ(Tag(written->files[0], DCM_StudyInstanceUID), written->study_instance_uid);
  CompareWithDcm2niix(dir, back->volume, "oblique");
  Dciodvfy(written->files[0]);

  // The same volume with a positive determinant reads back with k reversed.
  const Volume pos = Synthetic(40, 30, 12, /*negative=*/false);
  ASSERT_GT(Det(pos.geometry), 0);
  const std::string dir2 = TmpDir("oblique_pos_out");
  auto written2 = WriteDicomSeries(pos, dir2, opts);
  ASSERT_TRUE(written2.ok()) << written2.status();
  auto back2 = ReadDicomSeries({dir2});
  ASSERT_TRUE(back2.ok()) << back2.status();
  const Volume expected = ReverseK(pos);
  EXPECT_LE(MaxVoxelDiff(back2->volume.data, expected.data), tol);
  EXPECT_LE(AffineDiff(back2->volume.geometry, expected.geometry), 1e-4);
}

TEST(DicomWriterTest, IntegerVolumeExactAndTiming) {
  Volume v;
  v.data = NDArray::Allocate({181, 217, 181}, DType::kFloat32).value();
  float* p = v.data.data<float>();
  for (int64_t i = 0; i < v.data.num_elements(); ++i) p[i] = static_cast<float>((i * 37) % 4001 - 1000);
  v.geometry.spacing = {1, 1, 1};
  v.geometry.origin = {-90, -126, -72};
  const std::string dir = TmpDir("big_out");
  const auto t0 = std::chrono::steady_clock::now();
  auto written = WriteDicomSeries(v, dir, {});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->max_abs_error, 0);
  std::printf("WRITER 181x217x181 float32 (integral values): write %.3f s\n", secs);
  auto back = ReadDicomSeries({dir});
  ASSERT_TRUE(back.ok()) << back.status();
  // A RAS volume (positive determinant): k comes back reversed.
  const Volume expected = ReverseK(v);
  EXPECT_EQ(MaxVoxelDiff(back->volume.data, expected.data), 0);
  EXPECT_LE(AffineDiff(back->volume.geometry, expected.geometry), 1e-4);
}

TEST(DicomWriterTest, BadVolumesAreRefused) {
  const std::string dir = TmpDir("bad_out");
  Volume v = Synthetic(4, 4, 2);
  v.geometry.direction = {1, 0.3, 0, 0, 0.95393920141, 0, 0, 0, 1};  // unit but not orthogonal columns
  auto r = WriteDicomSeries(v, dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("orthonormal"), std::string::npos) << r.status();

  Volume four;
  four.data = NDArray::Allocate({4, 4, 2, 3}, DType::kFloat32).value();
  EXPECT_EQ(WriteDicomSeries(four, dir).status().code(), absl::StatusCode::kInvalidArgument);

  Volume empty;
  EXPECT_EQ(WriteDicomSeries(empty, dir).status().code(), absl::StatusCode::kInvalidArgument);

  Volume nan = Synthetic(4, 4, 2);
  nan.data.data<float>()[3] = NAN;
  EXPECT_EQ(WriteDicomSeries(nan, dir).status().code(), absl::StatusCode::kInvalidArgument);

  const Volume ok = Synthetic(4, 4, 2);
  auto bad_dir = WriteDicomSeries(ok, "/proc/no_such_dir/out");
  EXPECT_EQ(bad_dir.status().code(), absl::StatusCode::kInternal) << bad_dir.status();
  EXPECT_NE(bad_dir.status().message().find("/proc/no_such_dir"), std::string::npos) << bad_dir.status();
}

}  // namespace
}  // namespace tessera::dicom
