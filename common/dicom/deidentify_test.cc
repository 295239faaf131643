// De-identified outputs (dicom_writer.h, Deidentification): a series and a
// SEG written from the CT phantom with one salt carry none of the
// reference's identifying values in any byte, share the new study and frame
// of reference, differ under another salt, and stay valid (dciodvfy).
#include "common/dicom/deidentify.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/dicom_write_testing.h"
#include "common/dicom/dicom_writer.h"

namespace tessera::dicom {
namespace {

std::string Tag(const std::string& file, const DcmTagKey& key) {
  DcmFileFormat f;
  if (f.loadFile(file.c_str()).bad()) return "<unreadable>";
  OFString s;
  f.getDataset()->findAndGetOFStringArray(key, s);
  return s.c_str();
}

TEST(DeidentifyTest, KeyedUidsAndPseudonyms) {
  const std::string a = DeidentifiedUid("salt-1", "1.2.3.4");
  EXPECT_TRUE(absl::StartsWith(a, "2.25.")) << a;
  EXPECT_LE(a.size(), 64u);
  for (char c : a.substr(5)) EXPECT_TRUE(absl::ascii_isdigit(c)) << a;
  EXPECT_NE(a[5], '0');
  EXPECT_EQ(a, DeidentifiedUid("salt-1", "1.2.3.4"));
  EXPECT_NE(a, DeidentifiedUid("salt-2", "1.2.3.4"));
  EXPECT_NE(a, DeidentifiedUid("salt-1", "1.2.3.5"));
  const std::string p = PatientPseudonym("salt-1", "PLASTIC");
  EXPECT_EQ(p.size(), 13u);
  EXPECT_TRUE(absl::StartsWith(p, "ANON-")) << p;
  EXPECT_NE(p, PatientPseudonym("salt-2", "PLASTIC"));
  Deidentification no_salt;
  no_salt.enabled = true;
  EXPECT_EQ(CheckDeidentification(no_salt).code(), absl::StatusCode::kInvalidArgument);
}

struct Outputs {
  std::vector<std::string> files;  // the series' files, then the SEG
  std::string seg;
};

Outputs WriteBoth(const std::string& src, const DicomSeries& ct, const std::string& salt, const std::string& name) {
  Outputs out;
  DicomWriteOptions series_options;
  series_options.series_description = "deidentified series";
  series_options.reference = src;
  series_options.deidentify = {true, salt};
  const std::string dir = testing::TmpDir(name);
  auto series = WriteDicomSeries(ct.volume, dir + "/series", series_options);
  EXPECT_TRUE(series.ok()) << series.status();
  if (!series.ok()) return out;
  out.files = series->files;
  Volume labels;
  labels.geometry = ct.volume.geometry;
  labels.data = NDArray::Allocate(ct.volume.data.shape(), DType::kUInt8).value();
  const NDArray hu = ct.volume.data.AsType(DType::kFloat32).value();
  for (int64_t i = 0; i < hu.num_elements(); ++i) labels.data.data<uint8_t>()[i] = hu.data<float>()[i] > 0 ? 1 : 0;
  DicomSegWriteOptions seg_options;
  seg_options.series_description = "deidentified labels";
  seg_options.reference = src;
  seg_options.deidentify = {true, salt};
  out.seg = dir + "/labels.dcm";
  auto seg = WriteDicomSeg(labels, out.seg, seg_options);
  EXPECT_TRUE(seg.ok()) << seg.status();
  out.files.push_back(out.seg);
  return out;
}

TEST(DeidentifyTest, NoIdentifyingByteSurvivesAndOneSaltIsOneStudy) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom";
  const std::string src = data + "/ct-series-philips-phantom";
  auto ct = ReadDicomSeries({src});
  ASSERT_TRUE(ct.ok()) << ct.status();
  // The reference's identity: every value the profile removes or replaces.
  std::vector<std::string> secrets;
  const std::string first = ct->info.files.front();
  for (const DcmTagKey& key : {DCM_PatientName, DCM_PatientID, DCM_PatientBirthDate, DCM_StudyInstanceUID,
                               DCM_SeriesInstanceUID, DCM_StudyDate, DCM_FrameOfReferenceUID}) {
    const std::string v = std::string(absl::StripAsciiWhitespace(Tag(first, key)));
    if (!v.empty()) secrets.push_back(v);
  }
  for (const std::string& f : ct->info.files) secrets.push_back(Tag(f, DCM_SOPInstanceUID));
  secrets.push_back("ct-series-philips-phantom");  // no path of the source
  ASSERT_GE(secrets.size(), 12u);

  const Outputs one = WriteBoth(src, *ct, "job-salt-1", "deid_1");
  ASSERT_FALSE(one.files.empty());
  for (const std::string& file : one.files) {
    const std::string bytes = testing::ReadBytes(file);
    ASSERT_FALSE(bytes.empty()) << file;
    for (const std::string& secret : secrets) {
      EXPECT_EQ(bytes.find(secret), std::string::npos) << file << " contains '" << secret << "'";
    }
  }
  const std::string series_file = one.files.front();
  const std::string pseudonym = PatientPseudonym("job-salt-1", "PLASTIC");
  for (const std::string& file : {series_file, one.seg}) {
    EXPECT_EQ(Tag(file, DCM_PatientName), pseudonym) << file;
    EXPECT_EQ(Tag(file, DCM_PatientID), pseudonym) << file;
    EXPECT_EQ(Tag(file, DCM_PatientSex), "") << file;
    EXPECT_EQ(Tag(file, DCM_StudyID), "") << file;
    EXPECT_EQ(Tag(file, DCM_PatientIdentityRemoved), "YES") << file;
    DcmFileFormat f;
    ASSERT_TRUE(f.loadFile(file.c_str()).good());
    DcmItem* code = nullptr;
    ASSERT_TRUE(f.getDataset()->findAndGetSequenceItem(DCM_DeidentificationMethodCodeSequence, code, 0).good());
    OFString value;
    code->findAndGetOFString(DCM_CodeValue, value);
    EXPECT_EQ(value, "113100");
    EXPECT_FALSE(f.getDataset()->findAndGetSequenceItem(DCM_DeidentificationMethodCodeSequence, code, 1).good())
        << "only the basic profile (no 113107: dates are not kept)";
    const std::string report = testing::Dciodvfy(file);
    std::printf("DEID dciodvfy %s:\n%s\n", file.c_str(), report.c_str());
    EXPECT_EQ(report.find("Error"), std::string::npos) << report;
  }
  // One salt: one new study and frame of reference across the outputs.
  const std::string study = Tag(series_file, DCM_StudyInstanceUID);
  const std::string frame = Tag(series_file, DCM_FrameOfReferenceUID);
  EXPECT_EQ(study, DeidentifiedUid("job-salt-1", Tag(first, DCM_StudyInstanceUID)));
  EXPECT_EQ(Tag(one.seg, DCM_StudyInstanceUID), study);
  EXPECT_EQ(Tag(one.seg, DCM_FrameOfReferenceUID), frame);
  // Another salt: other UIDs.
  const Outputs two = WriteBoth(src, *ct, "job-salt-2", "deid_2");
  ASSERT_FALSE(two.files.empty());
  EXPECT_NE(Tag(two.seg, DCM_StudyInstanceUID), study);
  EXPECT_NE(Tag(two.seg, DCM_FrameOfReferenceUID), frame);
  EXPECT_NE(Tag(two.seg, DCM_PatientID), pseudonym);
  // The labels still read back on the CT's grid.
  auto back = ReadDicomSeg(one.seg);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels.data.shape(), ct->volume.data.shape());
}

}  // namespace
}  // namespace tessera::dicom
