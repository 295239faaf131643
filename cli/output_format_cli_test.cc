// Issue 34: --output-format, --deidentify, --reference-series and
// --series-description of `tessera register` and `tessera recon` (the flags
// `tessera job submit register|recon` shares): a register from a DICOM fixed
// series writing DICOM only (warped_dicom/, warped_labels_seg.dcm, the
// transforms, no warped NIfTI), a recon writing both (V.nii.gz, V_dicom/) and
// dicom only (V_dicom/ alone), and usage errors naming the flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/testing/run_tessera.h"
#include "common/dicom/dicom_writer.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;
using testing::RunTessera;
using testing::TestTmp;

int CountFiles(const std::string& dir) {
  if (!fs::is_directory(dir)) return 0;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

TEST(OutputFormatCli, RegisterFromADicomSeriesWritesDicomOnly) {
  registration::Phantom p = registration::MakePhantom(20).value();
  registration::SyntheticOptions synth;
  synth.seed = 3;
  registration::SyntheticPair pair = registration::MakeSyntheticPair(p.image, &p.labels, synth).value();
  const std::string fixed = TestTmp("fixed_dicom"), moving = TestTmp("moving.nii.gz");
  const std::string labels = TestTmp("moving_labels.nii.gz"), out = TestTmp("register_out");
  ASSERT_TRUE(dicom::WriteDicomSeries(p.image, fixed).ok());
  ASSERT_TRUE(WriteNifti(pair.moving, moving).ok());
  ASSERT_TRUE(WriteNifti(*pair.moving_labels, labels).ok());
  const std::vector<std::string> base = {"register", "--fixed", fixed, "--moving", moving, "--moving-labels", labels,
                                         "--metric", "mse", "--stages", "rigid,affine", "--scales", "1",
                                         "--device", "cpu", "--quiet", "--out", out};
  std::vector<std::string> args = base;
  for (const char* a : {"--output-format", "dicom", "--deidentify", "--series-description", "cli test"}) {
    args.push_back(a);
  }
  testing::CliResult r = RunTessera(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(CountFiles(out + "/warped_dicom"), 20);
  EXPECT_TRUE(fs::exists(out + "/warped_labels_seg.dcm"));
  EXPECT_TRUE(fs::exists(out + "/0GenericAffine.mat"));
  EXPECT_FALSE(fs::exists(out + "/warped.nii.gz"));
  EXPECT_FALSE(fs::exists(out + "/warped_labels.nii.gz"));
  EXPECT_NE(r.out.find("warped_dicom/: 20 slices, Secondary Capture Image Storage"), std::string::npos) << r.out;
  absl::StatusOr<Volume> warped = ReadVolumeFile(out + "/warped_dicom");
  ASSERT_TRUE(warped.ok()) << warped.status();
  EXPECT_EQ(warped->data.shape(), (Shape{20, 20, 20}));

  // DICOM-only flags without DICOM output, and an unknown format: usage errors.
  args = base;
  args.push_back("--deidentify");
  r = RunTessera(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--deidentify applies to DICOM outputs only"), std::string::npos) << r.err;
  args = base;
  args.insert(args.end(), {"--output-format", "dcm"});
  r = RunTessera(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--output-format 'dcm'"), std::string::npos) << r.err;
  // A reference that is not a DICOM series is refused before the run.
  args = base;
  args.insert(args.end(), {"--output-format", "both", "--reference-series", moving});
  r = RunTessera(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("output.reference_series"), std::string::npos) << r.err;
}

TEST(OutputFormatCli, ReconWritesTheSeriesBesideOrInsteadOfTheNifti) {
  ASSERT_EQ(RunTessera({"phantom", "geometry", "--type", "cone", "--size", "16", "--out", TestTmp("g.json")}).code, 0);
  testing::CliResult r =
      RunTessera({"phantom", "ct", "--geometry", TestTmp("g.json"), "--sinogram-out", TestTmp("s.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> base = {"recon", "ct", "--geometry", TestTmp("g.json"), "--sinogram",
                                         TestTmp("s.nii.gz"), "--quiet"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--output-format", "both", "--out", TestTmp("both.nii.gz")});
  r = RunTessera(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(TestTmp("both.nii.gz")));
  EXPECT_EQ(CountFiles(TestTmp("both_dicom")), 16);

  args = base;
  args.insert(args.end(), {"--output-format", "dicom", "--out", TestTmp("only.nii.gz")});
  r = RunTessera(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(TestTmp("only.nii.gz")));
  EXPECT_EQ(CountFiles(TestTmp("only_dicom")), 16);
  EXPECT_NE(r.out.find("only_dicom"), std::string::npos) << r.out;
  absl::StatusOr<Volume> series = ReadVolumeFile(TestTmp("only_dicom"));
  absl::StatusOr<Volume> nifti = ReadNifti(TestTmp("both.nii.gz"));
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_TRUE(nifti.ok()) << nifti.status();
  EXPECT_EQ(series->data.shape(), nifti->data.shape());

  args = base;
  args.insert(args.end(), {"--series-description", "x", "--out", TestTmp("bad.nii.gz")});
  r = RunTessera(args);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--series-description applies to DICOM outputs only"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera::cli
