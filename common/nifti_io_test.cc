#include "common/nifti_io.h"

#include <gtest/gtest.h>
#include <nifti2_io.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera {
namespace {

const char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";
const char kAal[] = "/usr/share/mricron/templates/aal.nii.gz";

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string TmpPath(const std::string& name) { return absl::StrCat(TmpDir(), "/", name); }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

// Random, never-zero values of the array's dtype.
void FillRandom(NDArray* a, uint32_t seed) {
  std::mt19937 rng(seed);
  VisitDType(a->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = a->data<T>();
    for (int64_t i = 0; i < a->num_elements(); ++i) {
      if constexpr (std::is_floating_point<T>::value) {
        T v = std::uniform_real_distribution<T>(-1000, 1000)(rng);
        p[i] = v == 0 ? T(1) : v;
      } else {
        int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
        int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
        p[i] = static_cast<T>(v == 0 ? 1 : v);
      }
    }
  });
}

Volume RandomVolume(const Shape& shape, DType dtype, uint32_t seed) {
  Volume v;
  v.data = *NDArray::Allocate(shape, dtype);
  FillRandom(&v.data, seed);
  v.description = "tessera test volume";
  return v;
}

// A rotation by `angle` about a (normalised) axis, row-major.
std::array<double, 9> Rotation(double ax, double ay, double az, double angle) {
  const double n = std::sqrt(ax * ax + ay * ay + az * az);
  ax /= n, ay /= n, az /= n;
  const double c = std::cos(angle), s = std::sin(angle), t = 1 - c;
  return {t * ax * ax + c,      t * ax * ay - s * az, t * ax * az + s * ay,
          t * ax * ay + s * az, t * ay * ay + c,      t * ay * az - s * ax,
          t * ax * az - s * ay, t * ay * az + s * ax, t * az * az + c};
}

Geometry ObliqueGeometry(bool left_handed) {
  Geometry g;
  g.spacing = {0.9, 1.2, 2.5};
  g.origin = {-71.25, 53.5, -12.125};
  g.direction = Rotation(0.3, -0.5, 0.8, 0.61);
  if (left_handed) {
    for (int r = 0; r < 3; ++r) g.direction[r * 3] = -g.direction[r * 3];  // flip the i axis
  }
  return g;
}

void ExpectAffineNear(const Geometry& a, const Geometry& b, double tol) {
  const Mat4 ma = a.IndexToWorld(), mb = b.IndexToWorld();
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(ma[i], mb[i], tol) << "affine element " << i;
}

void ExpectSameData(const NDArray& a, const NDArray& b) {
  ASSERT_EQ(ShapeToString(a.shape()), ShapeToString(b.shape()));
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "voxel values differ";
}

Mat4 ToMat4(const nifti_dmat44& m) {
  Mat4 out{};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) out[r * 4 + c] = m.m[r][c];
  }
  return out;
}

// Checks a file we wrote with nifti_clib's own reader (an independent tool).
void ExpectNiftiLibReads(const std::string& path, const Volume& expected, int ndim, int intent_code) {
  nifti_image* nim = nifti_image_read(path.c_str(), 1);
  ASSERT_NE(nim, nullptr) << path;
  EXPECT_EQ(nim->ndim, ndim);
  EXPECT_EQ(nim->nx, expected.data.dim(0));
  EXPECT_EQ(nim->ny, expected.data.dim(1));
  EXPECT_EQ(nim->nz, expected.data.dim(2));
  EXPECT_EQ(nim->intent_code, intent_code);
  EXPECT_EQ(nim->nvox, expected.data.num_elements());
  EXPECT_EQ(static_cast<size_t>(nim->nvox) * nim->nbyper, expected.data.nbytes());
  EXPECT_EQ(std::memcmp(nim->data, expected.data.raw_data(), expected.data.nbytes()), 0);
  const Mat4 want = expected.geometry.IndexToWorld();
  const Mat4 sform = ToMat4(nim->sto_xyz), qform = ToMat4(nim->qto_xyz);
  EXPECT_GT(nim->sform_code, 0);
  EXPECT_GT(nim->qform_code, 0);
  for (int i = 0; i < 12; ++i) {
    const double tol = 1e-5 * std::max(1.0, std::abs(want[i]));
    EXPECT_NEAR(sform[i], want[i], tol) << "sform element " << i;
    EXPECT_NEAR(qform[i], want[i], tol) << "qform element " << i;
  }
  nifti_image_free(nim);
}

void ExpectErrorMentions(const absl::Status& s, absl::StatusCode code, const std::string& path,
                         const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(path), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find(fragment), absl::string_view::npos) << s;
}

// ---------------------------------------------------------------- real volumes

void RoundTripRealVolume(const std::string& source, const std::string& stem) {
  struct stat st;
  ASSERT_EQ(stat(source.c_str(), &st), 0) << source << " missing: install mricron-data";
  NiftiInfo info;
  absl::StatusOr<Volume> original = ReadNifti(source, &info);
  ASSERT_TRUE(original.ok()) << original.status();
  EXPECT_EQ(info.version, 1);
  EXPECT_EQ(original->data.rank(), 3);

  // Our reader agrees with nifti_clib's on the original file.
  nifti_image* nim = nifti_image_read(source.c_str(), 1);
  ASSERT_NE(nim, nullptr);
  ASSERT_EQ(static_cast<size_t>(nim->nvox) * nim->nbyper, original->data.nbytes());
  EXPECT_EQ(std::memcmp(nim->data, original->data.raw_data(), original->data.nbytes()), 0);
  const Mat4 lib_affine = ToMat4(nim->sform_code > 0 ? nim->sto_xyz : nim->qto_xyz);
  const Mat4 ours = original->geometry.IndexToWorld();
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(ours[i], lib_affine[i], 1e-5) << i;
  nifti_image_free(nim);

  for (const char* ext : {".nii.gz", ".nii"}) {
    const std::string path = TmpPath(stem + ext);
    ASSERT_TRUE(WriteNifti(*original, path).ok());
    NiftiInfo back_info;
    absl::StatusOr<Volume> back = ReadNifti(path, &back_info);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameData(original->data, back->data);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(back->geometry.spacing[i], original->geometry.spacing[i], 1e-6);
    ExpectAffineNear(original->geometry, back->geometry, 1e-5);
    EXPECT_EQ(back_info.version, 1);
    EXPECT_EQ(back_info.sform_code, 1);
    EXPECT_EQ(back_info.qform_code, 1);
    EXPECT_EQ(back_info.on_disk_dtype, info.on_disk_dtype);
    EXPECT_EQ(back_info.dims, info.dims);
    EXPECT_EQ(back->description, original->description);
    ExpectNiftiLibReads(path, *original, 3, 0);
  }
  // .nii.gz is really compressed, .nii is not.
  EXPECT_LT(ReadBytes(TmpPath(stem + ".nii.gz")).size(), original->data.nbytes());
  EXPECT_EQ(ReadBytes(TmpPath(stem + ".nii")).size(), 352 + original->data.nbytes());
}

TEST(NiftiIoTest, Ch2RoundTripsThroughNiiGzAndNii) {
  NiftiInfo info;
  absl::StatusOr<Volume> ch2 = ReadNifti(kCh2, &info);
  ASSERT_TRUE(ch2.ok()) << ch2.status();
  EXPECT_EQ(ShapeToString(ch2->data.shape()), "181x217x181");
  EXPECT_EQ(ch2->data.dtype(), DType::kUInt8);
  EXPECT_EQ(ch2->geometry.AxisCodes(), "RAS");
  for (double s : ch2->geometry.spacing) EXPECT_NEAR(s, 1.0, 1e-6);
  RoundTripRealVolume(kCh2, "ch2_copy");
}

TEST(NiftiIoTest, AalRoundTripsThroughNiiGzAndNii) { RoundTripRealVolume(kAal, "aal_copy"); }

// ---------------------------------------------------------------- synthetic volumes

TEST(NiftiIoTest, EveryDtypeRoundTrips) {
  const DType types[] = {DType::kUInt8, DType::kInt8,    DType::kUInt16, DType::kInt16,
                         DType::kInt32, DType::kFloat32, DType::kFloat64};
  uint32_t seed = 1;
  for (DType t : types) {
    Volume v = RandomVolume({9, 7, 5}, t, seed++);
    v.geometry = ObliqueGeometry(false);
    const std::string path = TmpPath(absl::StrCat("dtype_", DTypeName(t), ".nii.gz"));
    ASSERT_TRUE(WriteNifti(v, path).ok()) << DTypeName(t);
    absl::StatusOr<Volume> back = ReadNifti(path);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameData(v.data, back->data);
    EXPECT_EQ(back->description, "tessera test volume");
  }
}

TEST(NiftiIoTest, Nifti2RoundTripKeepsDoublePrecisionGeometry) {
  Volume v = RandomVolume({11, 13, 6}, DType::kFloat32, 7);
  v.geometry = ObliqueGeometry(false);
  NiftiWriteOptions options;
  options.version = 2;
  options.sform_code = NIFTI_XFORM_MNI_152;
  const std::string path = TmpPath("n2.nii.gz");
  ASSERT_TRUE(WriteNifti(v, path, options).ok());
  NiftiInfo info;
  absl::StatusOr<Volume> back = ReadNifti(path, &info);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(info.version, 2);
  EXPECT_EQ(info.sform_code, NIFTI_XFORM_MNI_152);
  ExpectSameData(v.data, back->data);
  ExpectAffineNear(v.geometry, back->geometry, 1e-9);  // NIfTI-2 stores doubles
  // The header really is NIfTI-2 on disk.
  const std::string raw = Gunzip(path);
  int32_t sizeof_hdr;
  std::memcpy(&sizeof_hdr, raw.data(), 4);
  EXPECT_EQ(sizeof_hdr, 540);
  ExpectNiftiLibReads(path, v, 3, 0);
}

TEST(NiftiIoTest, LargeDimensionSwitchesToNifti2) {
  Volume v = RandomVolume({40000, 2, 1}, DType::kUInt8, 3);
  const std::string path = TmpPath("wide.nii");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  NiftiInfo info;
  absl::StatusOr<Volume> back = ReadNifti(path, &info);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(info.version, 2);
  ExpectSameData(v.data, back->data);
}

TEST(NiftiIoTest, VectorField5DRoundTripsWithIntent) {
  Volume v = RandomVolume({7, 6, 5, 3}, DType::kFloat32, 11);
  v.geometry = ObliqueGeometry(true);
  NiftiWriteOptions options;
  options.intent_code = NIFTI_INTENT_VECTOR;
  for (const char* ext : {".nii.gz", ".nii"}) {
    const std::string path = TmpPath(absl::StrCat("warp", ext));
    ASSERT_TRUE(WriteNifti(v, path, options).ok());
    NiftiInfo info;
    absl::StatusOr<Volume> back = ReadNifti(path, &info);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(info.intent_code, NIFTI_INTENT_VECTOR);
    EXPECT_EQ(info.dims, (std::vector<int64_t>{7, 6, 5, 1, 3}));
    ExpectSameData(v.data, back->data);  // shape (7, 6, 5, 3)
    ExpectAffineNear(v.geometry, back->geometry, 1e-5);
    ExpectNiftiLibReads(path, v, 5, NIFTI_INTENT_VECTOR);
    nifti_image* nim = nifti_image_read(path.c_str(), 0);
    ASSERT_NE(nim, nullptr);
    EXPECT_EQ(nim->nt, 1);
    EXPECT_EQ(nim->nu, 3);
    nifti_image_free(nim);
  }
}

TEST(NiftiIoTest, FourDimensionalSeriesStays4D) {
  Volume v = RandomVolume({5, 4, 3, 6}, DType::kInt16, 5);
  const std::string path = TmpPath("series.nii.gz");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  NiftiInfo info;
  absl::StatusOr<Volume> back = ReadNifti(path, &info);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(info.dims, (std::vector<int64_t>{5, 4, 3, 6}));
  ExpectSameData(v.data, back->data);
}

TEST(NiftiIoTest, NonFiniteFloatsAreKept) {
  Volume v = RandomVolume({4, 4, 4}, DType::kFloat32, 9);
  float* p = v.data.data<float>();
  p[3] = std::numeric_limits<float>::quiet_NaN();
  p[10] = std::numeric_limits<float>::infinity();
  const std::string path = TmpPath("nan.nii.gz");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  absl::StatusOr<Volume> back = ReadNifti(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(std::isnan(back->data.data<float>()[3]));
  EXPECT_TRUE(std::isinf(back->data.data<float>()[10]));
  ExpectSameData(v.data, back->data);
}

// ---------------------------------------------------------------- geometry

TEST(NiftiIoTest, ObliqueGeometryRoundTripsThroughSformAndQform) {
  for (bool left_handed : {false, true}) {
    Volume v = RandomVolume({8, 9, 10}, DType::kInt16, 21);
    v.geometry = ObliqueGeometry(left_handed);
    // Both forms, then the qform alone (read back through the quaternion).
    for (int sform_code : {1, 0}) {
      NiftiWriteOptions options;
      options.sform_code = sform_code;
      const std::string path = TmpPath(absl::StrCat("oblique_", left_handed, "_", sform_code, ".nii.gz"));
      ASSERT_TRUE(WriteNifti(v, path, options).ok());
      NiftiInfo info;
      absl::StatusOr<Volume> back = ReadNifti(path, &info);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(info.sform_code, sform_code);
      EXPECT_EQ(info.qform_code, 1);
      ExpectAffineNear(v.geometry, back->geometry, 1e-5);
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(back->geometry.spacing[i], v.geometry.spacing[i], 1e-6);
    }
  }
}

TEST(NiftiIoTest, WithoutQformOrSformPixdimScalingIsUsed) {
  Volume v = RandomVolume({4, 5, 6}, DType::kUInt8, 2);
  v.geometry = ObliqueGeometry(false);
  NiftiWriteOptions options;
  options.qform_code = 0;
  options.sform_code = 0;
  const std::string path = TmpPath("pixdim_only.nii");
  ASSERT_TRUE(WriteNifti(v, path, options).ok());
  absl::StatusOr<Volume> back = ReadNifti(path);
  ASSERT_TRUE(back.ok()) << back.status();
  Geometry expected;
  expected.spacing = v.geometry.spacing;
  ExpectAffineNear(expected, back->geometry, 1e-6);
}

TEST(NiftiIoTest, ToLpsFlipsTheFirstTwoRows) {
  const Geometry g = ObliqueGeometry(false);
  const Mat4 ras = g.IndexToWorld(), lps = g.ToLps().IndexToWorld();
  for (int c = 0; c < 4; ++c) {
    EXPECT_DOUBLE_EQ(lps[c], -ras[c]);
    EXPECT_DOUBLE_EQ(lps[4 + c], -ras[4 + c]);
    EXPECT_DOUBLE_EQ(lps[8 + c], ras[8 + c]);
    EXPECT_DOUBLE_EQ(lps[12 + c], ras[12 + c]);
  }
  ExpectAffineNear(g.ToLps().FromLps(), g, 0);
}

TEST(NiftiIoTest, MetreUnitsAreConvertedToMillimetres) {
  Volume v = RandomVolume({3, 3, 3}, DType::kUInt8, 4);
  v.geometry.spacing = {0.001, 0.002, 0.003};
  v.geometry.origin = {0.01, -0.02, 0.03};
  const std::string path = TmpPath("metres.nii");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  std::string bytes = ReadBytes(path);
  bytes[123] = NIFTI_UNITS_METER;  // xyzt_units
  WriteBytes(path, bytes);
  absl::StatusOr<Volume> back = ReadNifti(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_NEAR(back->geometry.spacing[2], 3.0, 1e-5);
  EXPECT_NEAR(back->geometry.origin[1], -20.0, 1e-4);
}

// ---------------------------------------------------------------- files from nifti_clib

// Writes a file with nifti_clib's own writer.
void WriteWithNiftiLib(const std::string& path, int datatype, const std::vector<int64_t>& dims, double slope,
                       double inter, const void* data) {
  int64_t dim8[8] = {static_cast<int64_t>(dims.size()), 1, 1, 1, 1, 1, 1, 1};
  for (size_t i = 0; i < dims.size(); ++i) dim8[i + 1] = dims[i];
  nifti_image* nim = nifti_make_new_nim(dim8, datatype, 1);
  ASSERT_NE(nim, nullptr);
  if (data != nullptr) std::memcpy(nim->data, data, static_cast<size_t>(nim->nvox) * nim->nbyper);
  nim->scl_slope = slope;
  nim->scl_inter = inter;
  ASSERT_EQ(nifti_set_filenames(nim, path.c_str(), 0, 1), 0);
  nifti_image_write(nim);
  nifti_image_free(nim);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
}

TEST(NiftiIoTest, ScaledDataIsReturnedAsFloat32) {
  std::vector<int16_t> raw(4 * 3 * 2);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<int16_t>(i * 7 - 50);
  const std::string path = TmpPath("scaled.nii.gz");
  WriteWithNiftiLib(path, DT_INT16, {4, 3, 2}, 2.5, -3.0, raw.data());
  NiftiInfo info;
  absl::StatusOr<Volume> v = ReadNifti(path, &info);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(info.on_disk_dtype, DT_INT16);
  EXPECT_EQ(info.scl_slope, 2.5);
  ASSERT_EQ(v->data.dtype(), DType::kFloat32);
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_FLOAT_EQ(v->data.data<float>()[i], raw[i] * 2.5f - 3.0f);

  // The identity scaling leaves the type alone.
  const std::string plain = TmpPath("unscaled.nii.gz");
  WriteWithNiftiLib(plain, DT_INT16, {4, 3, 2}, 1.0, 0.0, raw.data());
  absl::StatusOr<Volume> u = ReadNifti(plain);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->data.dtype(), DType::kInt16);
  EXPECT_EQ(std::memcmp(u->data.raw_data(), raw.data(), raw.size() * 2), 0);
}

TEST(NiftiIoTest, UnsupportedDatatypesAreInvalidArgument) {
  const struct {
    int code;
    const char* name;
  } cases[] = {{DT_RGB24, "RGB24"}, {DT_INT64, "INT64"}, {DT_COMPLEX64, "COMPLEX64"}, {DT_UINT32, "UINT32"}};
  for (const auto& c : cases) {
    const std::string path = TmpPath(absl::StrCat("unsupported_", c.name, ".nii.gz"));
    WriteWithNiftiLib(path, c.code, {3, 2, 2}, 0, 0, nullptr);
    absl::StatusOr<Volume> v = ReadNifti(path);
    ExpectErrorMentions(v.status(), absl::StatusCode::kInvalidArgument, path, c.name);
  }
}

TEST(NiftiIoTest, BigEndianFilesAreSwapped) {
  Volume v = RandomVolume({5, 4, 3}, DType::kInt16, 8);
  v.geometry = ObliqueGeometry(false);
  const std::string little = TmpPath("little.nii");
  ASSERT_TRUE(WriteNifti(v, little).ok());
  std::string bytes = ReadBytes(little);
  nifti_1_header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  swap_nifti_header(&h, 1);
  std::memcpy(&bytes[0], &h, sizeof(h));
  nifti_swap_2bytes(v.data.num_elements(), &bytes[352]);
  const std::string big = TmpPath("big.nii");
  WriteBytes(big, bytes);
  absl::StatusOr<Volume> back = ReadNifti(big);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameData(v.data, back->data);
  ExpectAffineNear(v.geometry, back->geometry, 1e-5);
}

// ---------------------------------------------------------------- bad input

TEST(NiftiIoTest, MissingFileIsNotFound) {
  const std::string path = TmpPath("does_not_exist.nii.gz");
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kNotFound, path, "no such file");
  // nifti_clib would silently substitute x.nii.gz for a missing x.nii; we do not.
  const std::string gz = TmpPath("only_gz.nii.gz");
  ASSERT_TRUE(WriteNifti(RandomVolume({2, 2, 2}, DType::kUInt8, 1), gz).ok());
  ExpectErrorMentions(ReadNifti(TmpPath("only_gz.nii")).status(), absl::StatusCode::kNotFound,
                      TmpPath("only_gz.nii"), "no such file");
}

TEST(NiftiIoTest, RandomBytesAreInvalidArgument) {
  std::mt19937 rng(42);
  std::string junk(100000, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  const std::string path = TmpPath("random.nii.gz");
  WriteBytes(path, junk);
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kInvalidArgument, path, "not a NIfTI file");
  const std::string plain = TmpPath("random.nii");
  WriteBytes(plain, junk);
  ExpectErrorMentions(ReadNifti(plain).status(), absl::StatusCode::kInvalidArgument, plain, "not a NIfTI file");
}

TEST(NiftiIoTest, ValidGzipOfGarbageIsInvalidArgument) {
  std::mt19937 rng(43);
  std::string junk(50000, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  const std::string path = TmpPath("gzip_garbage.nii.gz");
  WriteGzip(path, junk);
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kInvalidArgument, path, "sizeof_hdr");
}

TEST(NiftiIoTest, EmptyFileAndDirectoryAreInvalidArgument) {
  const std::string path = TmpPath("empty.nii");
  WriteBytes(path, "");
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kInvalidArgument, path, "empty");
  ExpectErrorMentions(ReadNifti(TmpDir()).status(), absl::StatusCode::kInvalidArgument, TmpDir(), "directory");
}

TEST(NiftiIoTest, TruncatedGzipIsDataLoss) {
  const std::string bytes = ReadBytes(kCh2);
  ASSERT_GT(bytes.size(), 1000u);
  const std::string half = TmpPath("ch2_half.nii.gz");
  WriteBytes(half, bytes.substr(0, bytes.size() / 2));
  ExpectErrorMentions(ReadNifti(half).status(), absl::StatusCode::kDataLoss, half,
                      "data truncated: expected 7109137 bytes of voxel data");

  const std::string tiny = TmpPath("ch2_200.nii.gz");
  WriteBytes(tiny, bytes.substr(0, 200));
  absl::Status s = ReadNifti(tiny).status();
  ExpectErrorMentions(s, absl::StatusCode::kDataLoss, tiny, "truncated");

  for (size_t cut : {size_t{5}, size_t{12}, size_t{30}}) {
    const std::string path = TmpPath(absl::StrCat("ch2_", cut, ".nii.gz"));
    WriteBytes(path, bytes.substr(0, cut));
    absl::Status st = ReadNifti(path).status();
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(path), absl::string_view::npos) << st;
  }

  // Only the 8-byte gzip trailer (CRC and length) missing: the voxels all
  // decompress, but the stream is incomplete.
  const std::string no_trailer = TmpPath("ch2_no_trailer.nii.gz");
  WriteBytes(no_trailer, bytes.substr(0, bytes.size() - 8));
  ExpectErrorMentions(ReadNifti(no_trailer).status(), absl::StatusCode::kDataLoss, no_trailer, "gzip");
}

TEST(NiftiIoTest, CorruptGzipIsDataLoss) {
  std::string bytes = ReadBytes(kCh2);
  std::mt19937 rng(5);
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i) bytes[i] = static_cast<char>(rng());
  const std::string path = TmpPath("ch2_corrupt.nii.gz");
  WriteBytes(path, bytes);
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kDataLoss, path, "gzip");

  // A flipped bit in the stored CRC-32.
  std::string crc = ReadBytes(kCh2);
  crc[crc.size() - 6] ^= 0x10;
  const std::string crc_path = TmpPath("ch2_bad_crc.nii.gz");
  WriteBytes(crc_path, crc);
  ExpectErrorMentions(ReadNifti(crc_path).status(), absl::StatusCode::kDataLoss, crc_path, "gzip");
}

TEST(NiftiIoTest, TruncatedNiiIsDataLoss) {
  const std::string full = TmpPath("ch2_full.nii");
  absl::StatusOr<Volume> ch2 = ReadNifti(kCh2);
  ASSERT_TRUE(ch2.ok());
  ASSERT_TRUE(WriteNifti(*ch2, full).ok());
  const std::string bytes = ReadBytes(full);

  const std::string half = TmpPath("ch2_half.nii");
  WriteBytes(half, bytes.substr(0, bytes.size() / 2));
  ExpectErrorMentions(ReadNifti(half).status(), absl::StatusCode::kDataLoss, half,
                      "data truncated: expected 7109137 bytes of voxel data");

  const std::string one_short = TmpPath("ch2_one_short.nii");
  WriteBytes(one_short, bytes.substr(0, bytes.size() - 1));
  ExpectErrorMentions(ReadNifti(one_short).status(), absl::StatusCode::kDataLoss, one_short, "truncated");

  const std::string header_only = TmpPath("ch2_header.nii");
  WriteBytes(header_only, bytes.substr(0, 200));
  ExpectErrorMentions(ReadNifti(header_only).status(), absl::StatusCode::kDataLoss, header_only,
                      "truncated NIfTI-1 header: got 200 of 348 bytes");
}

// Patches a field of a freshly written NIfTI-1 .nii and expects the reader to refuse it.
template <typename T>
absl::Status ReadPatched(const std::string& name, size_t offset, T value, std::string* path_out) {
  Volume v = RandomVolume({6, 5, 4}, DType::kInt16, 31);
  const std::string path = TmpPath(name);
  absl::Status w = WriteNifti(v, path);
  if (!w.ok()) return w;
  std::string bytes = ReadBytes(path);
  std::memcpy(&bytes[offset], &value, sizeof(T));
  WriteBytes(path, bytes);
  *path_out = path;
  return ReadNifti(path).status();
}

TEST(NiftiIoTest, BadHeadersAreInvalidArgument) {
  std::string path;
  absl::Status s = ReadPatched<int16_t>("bad_dim0.nii", 40, 9, &path);
  // dim[0] = 9 also fails the byte-order test; either way it is refused.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  s = ReadPatched<int16_t>("bad_dim1.nii", 42, -5, &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, "dim[1] = -5");

  s = ReadPatched<int16_t>("zero_dim3.nii", 46, 0, &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, "dim[3] = 0");

  s = ReadPatched<int16_t>("bad_bitpix.nii", 72, 8, &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, "bitpix");

  s = ReadPatched<float>("bad_offset.nii", 108, std::numeric_limits<float>::quiet_NaN(), &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, "vox_offset");

  s = ReadPatched<char>("two_file.nii", 345, 'i', &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, ".hdr/.img");

  s = ReadPatched<int32_t>("analyze.nii", 344, 0, &path);
  ExpectErrorMentions(s, absl::StatusCode::kInvalidArgument, path, "ANALYZE");
}

TEST(NiftiIoTest, HugeDimensionsAreRefusedWithoutAllocating) {
  // 32767^3 float64 voxels claimed by a tiny file: refused before allocation.
  std::string path;
  Volume v = RandomVolume({6, 5, 4}, DType::kFloat64, 31);
  path = TmpPath("huge.nii.gz");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  std::string bytes = Gunzip(path);
  const int16_t big = 32767;
  for (int i = 1; i <= 3; ++i) std::memcpy(&bytes[40 + 2 * i], &big, 2);
  WriteGzip(path, bytes);
  absl::Status s = ReadNifti(path).status();
  EXPECT_TRUE(s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(path), absl::string_view::npos) << s;

  // Big enough to pass the element limit, far too big for the file.
  const int16_t dims[3] = {2000, 2000, 1000};
  for (int i = 0; i < 3; ++i) std::memcpy(&bytes[42 + 2 * i], &dims[i], 2);
  WriteGzip(path, bytes);
  ExpectErrorMentions(ReadNifti(path).status(), absl::StatusCode::kDataLoss, path, "data truncated");
  const std::string plain = TmpPath("huge.nii");
  WriteBytes(plain, bytes);
  ExpectErrorMentions(ReadNifti(plain).status(), absl::StatusCode::kDataLoss, plain, "data truncated");
}

// Random damage to headers, data and compressed streams: every read must
// return (never crash, hang or over-read), and errors must name the file.
TEST(NiftiIoTest, RandomDamageNeverCrashes) {
  std::mt19937 rng(2024);
  Volume v = RandomVolume({6, 5, 4, 2}, DType::kFloat32, 77);
  int failures = 0;
  for (const char* ext : {".nii", ".nii.gz"}) {
    const std::string good = TmpPath(absl::StrCat("fuzz_source", ext));
    NiftiWriteOptions options;
    options.version = ext[4] == 0 ? 1 : 2;  // NIfTI-1 .nii, NIfTI-2 .nii.gz
    ASSERT_TRUE(WriteNifti(v, good, options).ok());
    const std::string bytes = ReadBytes(good);
    const std::string path = TmpPath(absl::StrCat("fuzz", ext));
    for (int iter = 0; iter < 400; ++iter) {
      std::string damaged = bytes;
      const int flips = 1 + static_cast<int>(rng() % 8);
      const size_t span = iter % 2 == 0 ? std::min<size_t>(damaged.size(), 560) : damaged.size();
      for (int f = 0; f < flips; ++f) damaged[rng() % span] = static_cast<char>(rng());
      if (iter % 5 == 0) damaged.resize(rng() % damaged.size());
      WriteBytes(path, damaged);
      NiftiInfo info;
      absl::StatusOr<Volume> r = ReadNifti(path, &info);
      if (!r.ok()) {
        ++failures;
        EXPECT_NE(r.status().message().find(path), absl::string_view::npos) << r.status();
        EXPECT_TRUE(r.status().code() == absl::StatusCode::kInvalidArgument ||
                    r.status().code() == absl::StatusCode::kDataLoss)
            << r.status();
      } else {
        EXPECT_GT(r->data.num_elements(), 0);
      }
    }
  }
  EXPECT_GT(failures, 100);  // most damage is detected
}

// ---------------------------------------------------------------- write errors

TEST(NiftiIoTest, WriteErrors) {
  Volume v = RandomVolume({3, 3, 3}, DType::kUInt8, 1);
  const std::string no_dir = TmpPath("no/such/dir/x.nii.gz");
  ExpectErrorMentions(WriteNifti(v, no_dir), absl::StatusCode::kNotFound, no_dir, "cannot create");
  const std::string bad_ext = TmpPath("x.png");
  ExpectErrorMentions(WriteNifti(v, bad_ext), absl::StatusCode::kInvalidArgument, bad_ext, ".nii");
  const std::string empty = TmpPath("empty_volume.nii");
  ExpectErrorMentions(WriteNifti(Volume{}, empty), absl::StatusCode::kInvalidArgument, empty, "no data");
  Volume bad = v;
  bad.geometry.spacing[1] = 0;
  ExpectErrorMentions(WriteNifti(bad, empty), absl::StatusCode::kInvalidArgument, empty, "geometry");
  NiftiWriteOptions options;
  options.version = 3;
  ExpectErrorMentions(WriteNifti(v, empty, options), absl::StatusCode::kInvalidArgument, empty, "version");
  struct stat st;
  EXPECT_NE(stat(empty.c_str(), &st), 0) << "a failed write left a file behind";
}

}  // namespace
}  // namespace tessera

// ------------------------------------------------- libdeflate writer and reader

namespace tessera {
namespace {

// Smooth values with noise in the low mantissa bits, like a real image or field.
Volume SmoothVolume(const Shape& shape, DType dtype, uint32_t seed) {
  Volume v = RandomVolume(shape, dtype, seed);
  VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = v.data.data<T>();
    for (int64_t i = 0; i < v.data.num_elements(); ++i) {
      const double smooth = 100 * std::sin(0.001 * static_cast<double>(i)) + 120;
      p[i] = static_cast<T>(smooth + static_cast<double>(p[i]) * (std::is_floating_point<T>::value ? 1e-3 : 0));
    }
  });
  return v;
}

bool HasOurMemberTag(const std::string& path) {
  const std::string b = ReadBytes(path);
  return b.size() > 20 && (b[3] & 0x04) && b[12] == 'T' && b[13] == 'Z';
}

TEST(NiftiIoTest, LibdeflateAndZlibWritersReadBackIdentically) {
  struct Case {
    const char* name;
    Shape shape;
    DType dtype;
    int intent, ndim;
  };
  const Case cases[] = {{"float3d", {33, 41, 37}, DType::kFloat32, 0, 3},
                        {"int3d", {40, 30, 20}, DType::kInt32, 0, 3},
                        {"series4d", {20, 18, 16, 5}, DType::kInt16, 0, 4},
                        {"field5d", {31, 29, 27, 3}, DType::kFloat32, NIFTI_INTENT_VECTOR, 5}};
  for (const Case& c : cases) {
    Volume v = SmoothVolume(c.shape, c.dtype, 21);
    v.geometry = ObliqueGeometry(false);
    for (const char* ext : {".nii.gz", ".nii"}) {
      NiftiWriteOptions old_writer, new_writer;
      old_writer.intent_code = new_writer.intent_code = c.intent;
      old_writer.gzip_writer = NiftiGzipWriter::kZlib;
      old_writer.gzip_level = 6;
      new_writer.gzip_member_bytes = 1 << 16;  // many members even for a small volume
      const std::string old_path = TmpPath(absl::StrCat(c.name, "_zlib", ext));
      const std::string new_path = TmpPath(absl::StrCat(c.name, "_deflate", ext));
      ASSERT_TRUE(WriteNifti(v, old_path, old_writer).ok());
      ASSERT_TRUE(WriteNifti(v, new_path, new_writer).ok());
      if (std::string(ext) == ".nii") {
        EXPECT_EQ(ReadBytes(old_path), ReadBytes(new_path)) << c.name;  // uncompressed: byte-identical
      } else {
        EXPECT_TRUE(HasOurMemberTag(new_path)) << c.name;
        EXPECT_EQ(Gunzip(old_path), Gunzip(new_path)) << c.name << ": same NIfTI bytes inside the gzip";
        EXPECT_EQ(std::system(absl::StrCat("gzip -t ", new_path).c_str()), 0) << new_path;
      }
      for (const std::string& path : {old_path, new_path}) {
        for (bool libdeflate : {true, false}) {
          NiftiReadOptions read;
          read.libdeflate = libdeflate;
          absl::StatusOr<Volume> back = ReadNifti(path, read);
          ASSERT_TRUE(back.ok()) << back.status();
          ExpectSameData(v.data, back->data);
          ExpectAffineNear(v.geometry, back->geometry, 1e-5);
        }
      }
      ExpectNiftiLibReads(new_path, v, c.ndim, c.intent);
    }
  }
}

TEST(NiftiIoTest, ForeignGzipReadsTheSameWithAndWithoutLibdeflate) {
  NiftiReadOptions zlib_only;
  zlib_only.libdeflate = false;
  absl::StatusOr<Volume> fast = ReadNifti(kCh2), slow = ReadNifti(kCh2, zlib_only);
  ASSERT_TRUE(fast.ok() && slow.ok());
  ExpectSameData(fast->data, slow->data);
}

TEST(NiftiIoTest, DamagedMultiMemberGzipIsDataLoss) {
  Volume v = SmoothVolume({50, 40, 30}, DType::kFloat32, 8);
  NiftiWriteOptions options;
  options.gzip_member_bytes = 1 << 16;
  const std::string good = TmpPath("members.nii.gz");
  ASSERT_TRUE(WriteNifti(v, good, options).ok());
  const std::string bytes = ReadBytes(good);
  const std::string half = TmpPath("members_half.nii.gz");
  WriteBytes(half, bytes.substr(0, bytes.size() / 2));
  ExpectErrorMentions(ReadNifti(half).status(), absl::StatusCode::kDataLoss, half, "data truncated");
  const std::string no_trailer = TmpPath("members_no_trailer.nii.gz");
  WriteBytes(no_trailer, bytes.substr(0, bytes.size() - 8));
  ExpectErrorMentions(ReadNifti(no_trailer).status(), absl::StatusCode::kDataLoss, no_trailer, "gzip");
  std::string corrupt = bytes;
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) corrupt[i] ^= 0x3c;
  const std::string corrupt_path = TmpPath("members_corrupt.nii.gz");
  WriteBytes(corrupt_path, corrupt);
  ExpectErrorMentions(ReadNifti(corrupt_path).status(), absl::StatusCode::kDataLoss, corrupt_path, "gzip");
  std::string crc = bytes;
  crc[crc.size() - 6] ^= 0x10;
  const std::string crc_path = TmpPath("members_bad_crc.nii.gz");
  WriteBytes(crc_path, crc);
  ExpectErrorMentions(ReadNifti(crc_path).status(), absl::StatusCode::kDataLoss, crc_path, "gzip");
}

TEST(NiftiIoTest, GzipLevelIsChosenPerOutputAndChecked) {
  Volume field = SmoothVolume({20, 20, 20, 3}, DType::kFloat32, 3);
  NiftiWriteOptions fast, automatic;
  fast.intent_code = automatic.intent_code = NIFTI_INTENT_VECTOR;
  fast.gzip_level = kNiftiFieldGzipLevel;
  const std::string a = TmpPath("auto_field.nii.gz"), b = TmpPath("fast_field.nii.gz");
  ASSERT_TRUE(WriteNifti(field, a, automatic).ok());
  ASSERT_TRUE(WriteNifti(field, b, fast).ok());
  EXPECT_EQ(ReadBytes(a), ReadBytes(b)) << "displacement fields default to kNiftiFieldGzipLevel";

  Volume image = SmoothVolume({20, 20, 20}, DType::kFloat32, 3);
  NiftiWriteOptions six;
  six.gzip_level = kNiftiImageGzipLevel;
  const std::string c = TmpPath("auto_image.nii.gz"), d = TmpPath("six_image.nii.gz");
  ASSERT_TRUE(WriteNifti(image, c).ok());
  ASSERT_TRUE(WriteNifti(image, d, six).ok());
  EXPECT_EQ(ReadBytes(c), ReadBytes(d)) << "images default to kNiftiImageGzipLevel";

  NiftiWriteOptions bad;
  bad.gzip_level = 13;
  const std::string e = TmpPath("bad_level.nii.gz");
  ExpectErrorMentions(WriteNifti(image, e, bad), absl::StatusCode::kInvalidArgument, e, "gzip_level");
  bad.gzip_level = 10;
  bad.gzip_writer = NiftiGzipWriter::kZlib;
  ExpectErrorMentions(WriteNifti(image, e, bad), absl::StatusCode::kInvalidArgument, e, "gzip_level");
  struct stat st;
  EXPECT_NE(stat(e.c_str(), &st), 0) << "no file after a refused write";
}

}  // namespace
}  // namespace tessera
