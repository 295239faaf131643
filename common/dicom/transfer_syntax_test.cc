// The transfer syntaxes DCMTK decodes for us: a series re-encoded (with
// DCMTK's encoders) as implicit/explicit/big-endian, deflated, RLE, JPEG
// lossless and JPEG-LS lossless reads back as the same volume and affine.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcrleerg.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djencode.h>
#include <dcmtk/dcmjpls/djencode.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"

namespace tessera::dicom {
namespace {

TEST(TransferSyntaxTest, EncodedSeriesReadBackEqual) {
  const std::string data = DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  DcmRLEEncoderRegistration::registerCodecs();
  DJEncoderRegistration::registerCodecs();
  DJLSEncoderRegistration::registerCodecs();
  const std::string src = data + "/known-geometry-24x38x3/image";
  auto reference = ReadDicomSeries({src});
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->info.files.size(), 3u);

  const std::vector<E_TransferSyntax> syntaxes = {
      EXS_LittleEndianImplicit, EXS_BigEndianExplicit, EXS_DeflatedLittleEndianExplicit,
      EXS_RLELossless,          EXS_JPEGProcess14SV1,  EXS_JPEGLSLossless};
  for (E_TransferSyntax xfer : syntaxes) {
    const DcmXfer x(xfer);
    SCOPED_TRACE(x.getXferName());
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/xfer_", static_cast<int>(xfer));
    ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str()), 0);
    int n = 0;
    for (const std::string& file : reference->info.files) {
      DcmFileFormat ff;
      ASSERT_TRUE(ff.loadFile(file.c_str()).good()) << file;
      ASSERT_TRUE(ff.getDataset()->chooseRepresentation(xfer, nullptr).good());
      ASSERT_TRUE(ff.getDataset()->canWriteXfer(xfer));
      const std::string out = absl::StrCat(dir, "/", n++, ".dcm");
      ASSERT_TRUE(ff.saveFile(out.c_str(), xfer).good()) << out;
    }
    auto got = ReadDicomSeries({dir});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->info.transfer_syntax, std::string(x.getXferID()));
    ASSERT_EQ(got->volume.data.shape(), reference->volume.data.shape());
    ASSERT_EQ(got->volume.data.dtype(), reference->volume.data.dtype());
    EXPECT_EQ(0, std::memcmp(got->volume.data.raw_data(), reference->volume.data.raw_data(),
                             reference->volume.data.nbytes()));
    const Mat4 a = got->volume.geometry.IndexToWorld(), b = reference->volume.geometry.IndexToWorld();
    for (int q = 0; q < 12; ++q) EXPECT_NEAR(a[q], b[q], 1e-9) << q;
  }
}

}  // namespace
}  // namespace tessera::dicom
