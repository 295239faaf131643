// apply_transforms: chain semantics against ApplyAntsTransformsCpu and an
// independent point-wise computation, each interpolation against a plain
// reference, point sets, and the exactness that matters: a registration's own
// written files reproduce its warped image and labels bit for bit (CPU).
#include "kernels/registration/pipeline/apply_transforms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "common/nifti_io.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/outputs.h"
#include "kernels/registration/pipeline/testing/random_affine.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

using P3 = std::array<double, 3>;

std::string Tmp(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

P3 Apply(const Mat4& m, const P3& p) {
  return {m[0] * p[0] + m[1] * p[1] + m[2] * p[2] + m[3], m[4] * p[0] + m[5] * p[1] + m[6] * p[2] + m[7],
          m[8] * p[0] + m[9] * p[1] + m[10] * p[2] + m[11]};
}

Volume RandomVolume(std::array<int64_t, 3> n, Geometry g, uint32_t seed, bool smooth) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(10, 200);
  Volume v{NDArray::Allocate({n[0], n[1], n[2]}, DType::kFloat32).value(), g, ""};
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        v.data.data<float>()[i + n[0] * (j + n[1] * k)] =
            smooth ? static_cast<float>(100 + 50 * std::sin(0.4 * i) * std::cos(0.3 * j) + 20 * std::sin(0.5 * k))
                   : u(rng);
      }
    }
  }
  return v;
}

// A smooth, non-zero random field (RAS mm) on `g`.
Volume RandomField(std::array<int64_t, 3> n, Geometry g, uint32_t seed, double amplitude) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  double phase[9];
  for (double& p : phase) p = 3 * u(rng);
  Volume f{NDArray::Allocate({n[0], n[1], n[2], 3}, DType::kFloat32).value(), g, ""};
  const int64_t voxels = n[0] * n[1] * n[2];
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        for (int c = 0; c < 3; ++c) {
          f.data.data<float>()[c * voxels + i + n[0] * (j + n[1] * k)] = static_cast<float>(
              amplitude * std::sin(0.3 * i + phase[3 * c]) * std::cos(0.25 * j + phase[3 * c + 1]) *
              std::cos(0.2 * k + phase[3 * c + 2]));
        }
      }
    }
  }
  return f;
}

Mat4 RandomAffine(std::mt19937& rng, double shift) { return testing::RandomAffine(rng, 0.05, shift); }

Geometry Grid(std::array<double, 3> spacing, std::array<double, 3> origin) {
  Geometry g;
  g.spacing = spacing;
  g.origin = origin;
  return g;
}

// An independent mapping: the chain's transforms one by one, fields sampled
// by ITK's rule (zero outside [-0.5, n - 0.5), clamped corners inside).
P3 ReferenceMap(const TransformChain& chain, P3 p) {
  for (const ChainTransform& t : chain) {
    if (!t.is_field()) {
      p = Apply(t.affine, p);
      continue;
    }
    const Mat4 to_index = InvertAffine(t.field.geometry.IndexToWorld()).value();
    const P3 c = Apply(to_index, p);
    const int64_t n[3] = {t.field.data.dim(0), t.field.data.dim(1), t.field.data.dim(2)};
    bool inside = true;
    for (int a = 0; a < 3; ++a) inside = inside && c[a] >= -0.5 && c[a] < n[a] - 0.5;
    if (!inside) continue;
    const int64_t voxels = n[0] * n[1] * n[2];
    P3 d = {0, 0, 0};
    for (int dz = 0; dz < 2; ++dz) {
      for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
          const int off[3] = {dx, dy, dz};
          double w = 1;
          int64_t q[3];
          for (int a = 0; a < 3; ++a) {
            const double f = std::floor(c[a]);
            w *= off[a] ? c[a] - f : 1 - (c[a] - f);
            q[a] = std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(f) + off[a], 0), n[a] - 1);
          }
          for (int k = 0; k < 3; ++k) d[k] += w * t.field.data.data<float>()[k * voxels + q[0] + n[0] * (q[1] + n[1] * q[2])];
        }
      }
    }
    for (int a = 0; a < 3; ++a) p[a] += d[a];
  }
  return p;
}

// Trilinear with zeros outside (the grid sampler's padding), continuous index.
double ZeroPaddedTrilinear(const Volume& v, const P3& c) {
  const int64_t n[3] = {v.data.dim(0), v.data.dim(1), v.data.dim(2)};
  double s = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double w = 1;
    int64_t q[3];
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
      const int bit = (corner >> a) & 1;
      const double f = std::floor(c[a]);
      w *= bit ? c[a] - f : 1 - (c[a] - f);
      q[a] = static_cast<int64_t>(f) + bit;
      inside = inside && q[a] >= 0 && q[a] < n[a];
    }
    if (inside) s += w * v.data.data<float>()[q[0] + n[0] * (q[1] + n[1] * q[2])];
  }
  return s;
}

double MaxAbsDiff(const NDArray& a, const NDArray& b) {
  NDArray fa = a.AsType(DType::kFloat64).value(), fb = b.AsType(DType::kFloat64).value();
  double worst = 0;
  for (int64_t i = 0; i < fa.num_elements(); ++i) worst = std::max(worst, std::fabs(fa.data<double>()[i] - fb.data<double>()[i]));
  return worst;
}

bool SameBytes(const NDArray& a, const NDArray& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

ApplyTransformsOptions Cpu(ApplyInterpolation interpolation) {
  ApplyTransformsOptions o;
  o.interpolation = interpolation;
  o.device = "cpu";
  return o;
}

struct Case {
  Volume input;
  GridSpace reference;
  Mat4 affine;
  Volume field;  // on the reference grid
};

Case MakeCase(uint32_t seed) {
  std::mt19937 rng(seed);
  Case c;
  c.input = RandomVolume({20, 18, 16}, Grid({2, 2.2, 2.5}, {-20, -18, -20}), seed, /*smooth=*/true);
  c.reference.dims = {17, 19, 14};
  c.reference.geometry = Grid({2.1, 1.9, 2.4}, {-17, -17, -16});
  c.affine = RandomAffine(rng, 3);
  c.field = RandomField({17, 19, 14}, c.reference.geometry, seed + 1, 2.5);
  return c;
}

// [field on the reference grid, affine]: ANTs' composition, as the plain
// reference of outputs.h computes it (double positions; the sampler's float
// normalized coordinates stay within 1e-3 of the 10..200 intensities).
TEST(ApplyTransforms, RegistrationFormMatchesApplyAntsTransformsCpu) {
  Case c = MakeCase(3);
  const TransformChain chain = {{"warp", {}, c.field}, {"affine", c.affine, {}}};
  const AppliedVolume out = ApplyTransformsToVolume(c.input, c.reference, chain, Cpu(ApplyInterpolation::kLinear)).value();
  Volume like{NDArray::Allocate({17, 19, 14}, DType::kFloat32).value(), c.reference.geometry, ""};
  const NDArray want = ApplyAntsTransformsCpu(c.input, like, c.affine, c.field.data).value();
  EXPECT_LT(MaxAbsDiff(out.volume.data, want), 2e-3);
  EXPECT_EQ(out.backend, "cpu");
  EXPECT_NE(out.log.front().find("registration's sampling"), std::string::npos);
}

// A general chain (affine, a field on its own coarser grid, an inverted
// affine): the dense route against the independent mapping and a zero-padded
// trilinear sample. Tolerance: the dense field is stored as float mm.
TEST(ApplyTransforms, GeneralChainMatchesPointwiseReference) {
  Case c = MakeCase(5);
  std::mt19937 rng(9);
  const Mat4 a1 = RandomAffine(rng, 2), a2 = RandomAffine(rng, 2);
  const Volume coarse = RandomField({9, 10, 8}, Grid({4, 4, 4.5}, {-19, -20, -18}), 21, 3.0);
  TransformChain chain = {{"a1", a1, {}}, {"coarse", {}, coarse}, {"[a2,1]", InvertAffine(a2).value(), {}}};
  const AppliedVolume out = ApplyTransformsToVolume(c.input, c.reference, chain, Cpu(ApplyInterpolation::kLinear)).value();
  EXPECT_NE(out.log.front().find("composed on the CPU"), std::string::npos);
  const Mat4 ref_to_world = c.reference.geometry.IndexToWorld();
  const Mat4 in_to_index = InvertAffine(c.input.geometry.IndexToWorld()).value();
  double worst = 0, worst_point = 0;
  int64_t moved = 0;
  for (int64_t k = 0; k < 14; ++k) {
    for (int64_t j = 0; j < 19; ++j) {
      for (int64_t i = 0; i < 17; ++i) {
        const P3 p = Apply(ref_to_world, {double(i), double(j), double(k)});
        const P3 q = ReferenceMap(chain, p);
        const P3 got = MapPoint(chain, p);
        for (int a = 0; a < 3; ++a) worst_point = std::max(worst_point, std::fabs(got[a] - q[a]));
        const double want = ZeroPaddedTrilinear(c.input, Apply(in_to_index, q));
        worst = std::max(worst, std::fabs(out.volume.data.data<float>()[i + 17 * (j + 19 * k)] - want));
        moved += std::fabs(q[0] - Apply(a2, Apply(a1, p))[0]) > 1e-3;  // the field acted
      }
    }
  }
  EXPECT_GT(moved, 1000);
  EXPECT_LT(worst_point, 1e-9);
  EXPECT_LT(worst, 2e-3);
}

TEST(ApplyTransforms, PointsCsvRoundTripAndMapping) {
  Case c = MakeCase(7);
  const TransformChain chain = {{"warp", {}, c.field}, {"affine", c.affine, {}}};
  // Voxel centres of the reference (LPS), with extra columns kept.
  const Mat4 to_world = c.reference.geometry.IndexToWorld();
  std::ostringstream csv;
  csv << "label,X,y,z,comment\n";
  std::vector<P3> ras;
  for (int64_t i = 0; i < 17; i += 4) {
    const P3 p = Apply(to_world, {double(i), 3.0, 5.0});
    ras.push_back(p);
    csv << i << "," << -p[0] << "," << -p[1] << "," << p[2] << ",pt" << i << "\n";
  }
  const AppliedPoints out = ApplyTransformsToPoints(csv.str(), "pts.csv", chain).value();
  EXPECT_EQ(out.points, static_cast<int64_t>(ras.size()));
  std::istringstream lines(out.csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "label,X,y,z,comment");
  const int64_t voxels = 17 * 19 * 14;
  for (size_t r = 0; r < ras.size(); ++r) {
    ASSERT_TRUE(std::getline(lines, line));
    double x, y, z;
    int label;
    char comment[16];
    ASSERT_EQ(std::sscanf(line.c_str(), "%d,%lf,%lf,%lf,%15s", &label, &x, &y, &z, comment), 5) << line;
    EXPECT_EQ(std::string(comment), "pt" + std::to_string(label));
    // At a voxel centre the field is its own sample: T(p + v(voxel)).
    const int64_t at = label + 17 * (3 + 19 * 5);
    P3 p = ras[r];
    for (int a = 0; a < 3; ++a) p[a] += c.field.data.data<float>()[a * voxels + at];
    const P3 want = Apply(c.affine, p);
    EXPECT_NEAR(-x, want[0], 1e-6);
    EXPECT_NEAR(-y, want[1], 1e-6);
    EXPECT_NEAR(z, want[2], 1e-6);
  }
  // Malformed CSVs name the line and column.
  for (const std::string& bad : {std::string("x,y,z\n1,2\n"), std::string("x,y,z\n1,two,3\n"), std::string("")}) {
    const auto r = ApplyTransformsToPoints(bad, "bad.csv", chain);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(r.status().message()).find("bad.csv"), std::string::npos) << r.status();
  }
}

Volume BlockLabels(std::array<int64_t, 3> n, Geometry g) {
  Volume v{NDArray::Allocate({n[0], n[1], n[2]}, DType::kInt16).value(), g, ""};
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        v.data.data<int16_t>()[i + n[0] * (j + n[1] * k)] = static_cast<int16_t>((i / 4) % 3 + 3 * ((j / 5) % 2) + (k > 8 ? 10 : 0));
      }
    }
  }
  return v;
}

// Nearest on labels is WarpLabels (the registration's warped_labels) bit for bit.
TEST(ApplyTransforms, NearestLabelsEqualWarpLabels) {
  Case c = MakeCase(11);
  const Volume labels = BlockLabels({20, 18, 16}, c.input.geometry);
  const TransformChain chain = {{"warp", {}, c.field}, {"affine", c.affine, {}}};
  const AppliedVolume out = ApplyTransformsToVolume(labels, c.reference, chain, Cpu(ApplyInterpolation::kNearest)).value();
  RegistrationResult r;
  r.affine_ras = c.affine;
  r.displacement_ras = c.field.data;
  Volume like{NDArray::Allocate({17, 19, 14}, DType::kFloat32).value(), c.reference.geometry, ""};
  const NDArray want = WarpLabels(labels, like, r, "cpu").value();
  EXPECT_TRUE(SameBytes(out.volume.data, want));
}

TEST(ApplyTransforms, LabelInterpolationsKeepLabels) {
  const Geometry g = Grid({1.5, 1.5, 2}, {0, 0, 0});
  const Volume labels = BlockLabels({20, 18, 16}, g);
  GridSpace same;
  same.dims = {20, 18, 16};
  same.geometry = g;
  const TransformChain identity = {{"identity", {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {}}};
  const NDArray want = labels.data.AsType(DType::kInt32).value();
  for (ApplyInterpolation interp : {ApplyInterpolation::kLabel, ApplyInterpolation::kGenericLabel, ApplyInterpolation::kNearest}) {
    const AppliedVolume out = ApplyTransformsToVolume(labels, same, identity, Cpu(interp)).value();
    EXPECT_TRUE(SameBytes(out.volume.data, want)) << ApplyInterpolationName(interp);
  }
  // A smooth sub-voxel shift: generic-label equals nearest wherever the 8
  // neighbours agree, and both give only the input's labels.
  const TransformChain shift = {{"shift", {1, 0, 0, 0.4, 0, 1, 0, -0.3, 0, 0, 1, 0.45, 0, 0, 0, 1}, {}}};
  const NDArray nearest = ApplyTransformsToVolume(labels, same, shift, Cpu(ApplyInterpolation::kNearest)).value().volume.data;
  const NDArray generic = ApplyTransformsToVolume(labels, same, shift, Cpu(ApplyInterpolation::kGenericLabel)).value().volume.data;
  const NDArray gauss = ApplyTransformsToVolume(labels, same, shift, Cpu(ApplyInterpolation::kLabel)).value().volume.data;
  int64_t agree = 0;
  for (int64_t i = 0; i < generic.num_elements(); ++i) {
    agree += generic.data<int32_t>()[i] == nearest.data<int32_t>()[i];
    for (const NDArray* a : {&generic, &gauss}) {
      const int32_t l = a->data<int32_t>()[i];
      EXPECT_TRUE(l == 0 || (l % 10) < 6) << l;
    }
  }
  EXPECT_GT(agree, generic.num_elements() * 8 / 10);
  // Intensities are refused by label interpolations.
  const Volume image = RandomVolume({6, 6, 6}, g, 3, false);
  EXPECT_EQ(ApplyTransformsToVolume(image, same, identity, Cpu(ApplyInterpolation::kLabel)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ApplyTransforms, BsplineInterpolatesAndDefaultsOutside) {
  const Geometry g = Grid({2, 2, 2}, {0, 0, 0});
  const Volume image = RandomVolume({12, 11, 10}, g, 4, false);
  GridSpace same;
  same.dims = {12, 11, 10};
  same.geometry = g;
  const TransformChain identity = {{"identity", {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {}}};
  const AppliedVolume out = ApplyTransformsToVolume(image, same, identity, Cpu(ApplyInterpolation::kBspline)).value();
  EXPECT_LT(MaxAbsDiff(out.volume.data, image.data), 2e-3);  // values 10..200
  // Shifted by 6 voxels in x: the first 6 columns lie beyond the input.
  ApplyTransformsOptions o = Cpu(ApplyInterpolation::kBspline);
  o.default_value = -5;
  const TransformChain shift = {{"shift", {1, 0, 0, -12, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {}}};
  const NDArray shifted = ApplyTransformsToVolume(image, same, shift, o).value().volume.data;
  EXPECT_EQ(shifted.data<float>()[0], -5.0f);
  EXPECT_NEAR(shifted.data<float>()[8], image.data.data<float>()[2], 2e-3);
  // Linear with the same default: outside is -5 too.
  o.interpolation = ApplyInterpolation::kLinear;
  const NDArray linear = ApplyTransformsToVolume(image, same, shift, o).value().volume.data;
  EXPECT_NEAR(linear.data<float>()[0], -5.0f, 1e-5);
  EXPECT_NEAR(linear.data<float>()[8], image.data.data<float>()[2], 1e-3);
}

TEST(ApplyTransforms, RefusesBadChains) {
  Case c = MakeCase(2);
  EXPECT_EQ(ApplyTransformsToVolume(c.input, c.reference, {}, Cpu(ApplyInterpolation::kLinear)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const TransformChain singular = {{"flat", {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {}}};
  EXPECT_EQ(ApplyTransformsToVolume(c.input, c.reference, singular, Cpu(ApplyInterpolation::kLinear)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteAntsWarp(Tmp("w.nii.gz"), c.field.data, c.reference.geometry).ok());
  EXPECT_EQ(LoadTransformFile(Tmp("w.nii.gz"), /*inverse=*/true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTransformFile(Tmp("missing.mat"), false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseApplyInterpolation("cubic").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseApplyInterpolation("MultiLabel").value(), ApplyInterpolation::kLabel);
  EXPECT_EQ(ParseAntsTransformArg("[0GenericAffine.mat,1]").value(), std::make_pair(std::string("0GenericAffine.mat"), true));
  EXPECT_EQ(ParseAntsTransformArg("0Warp.nii.gz").value(), std::make_pair(std::string("0Warp.nii.gz"), false));
  EXPECT_FALSE(ParseAntsTransformArg("[a.mat,2]").ok());
  EXPECT_FALSE(ParseAntsTransformArg("[a.mat,1").ok());
}

// The exactness the issue asks for: a registration (CPU, few iterations,
// deformable, with labels) writes its files; apply-transforms with
// [0Warp.nii.gz, 0GenericAffine.mat] on the fixed grid gives warped.nii.gz
// (linear) and warped_labels.nii.gz (nearest) bit for bit.
TEST(ApplyTransforms, ReproducesARegistrationsOwnOutputsExactly) {
  const ColinProblem p = MakeColinProblem(IntensityChange::kGamma, 7, 3);
  RegistrationOptions o = QuickColinOptions(Metric::kMse, {6, 3});
  o.rigid_iterations = {6, 3};
  o.affine_iterations = {6, 3};
  const RegistrationResult r = Register(p.fixed, p.pair.moving, o).value();
  ASSERT_FALSE(r.displacement_ras.empty());
  const NDArray labels = WarpLabels(*p.pair.moving_labels, p.fixed, r, "cpu").value();
  const std::string dir = Tmp("registration");
  const OutputFiles files = WriteRegistrationOutputs(r, p.fixed, dir, &labels, /*inverse_warp=*/true).value();
  const TransformChain chain = {LoadTransformFile(files.warp, false).value(),
                                LoadTransformFile(files.affine, false).value()};
  // The reference grid as the registration had the fixed image (a job reads
  // the same file again; here the fixture's in-memory geometry, which a
  // float32 NIfTI header would round).
  const GridSpace reference = SpaceOf(p.fixed);
  // Why the image can be exact: the .mat reads back within an ulp of the
  // translation (ITK's centre algebra, itk_affine_text_test), below the
  // float32 precision of the sampler's [A | t], which is the same.
  const Affine12 from_file = SamplerAffineFromPhysical(chain[1].affine, reference, SpaceOf(p.pair.moving)).value();
  const Affine12 own = SamplerAffineFromPhysical(r.affine_ras, reference, SpaceOf(p.pair.moving)).value();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(static_cast<float>(from_file[i]), static_cast<float>(own[i])) << i;
  EXPECT_TRUE(SameBytes(chain[0].field.data, r.displacement_ras));
  const Volume warped = ReadNifti(files.warped).value();
  const Volume warped_labels = ReadNifti(files.warped_labels).value();
  const AppliedVolume image = ApplyTransformsToVolume(p.pair.moving, reference, chain, Cpu(ApplyInterpolation::kLinear)).value();
  EXPECT_NE(image.log.front().find("registration's sampling"), std::string::npos) << image.log.front();
  EXPECT_TRUE(SameBytes(image.volume.data, warped.data)) << "max |diff| " << MaxAbsDiff(image.volume.data, warped.data);
  EXPECT_TRUE(SameBytes(image.volume.data, r.warped.data));
  const AppliedVolume applied_labels =
      ApplyTransformsToVolume(*p.pair.moving_labels, reference, chain, Cpu(ApplyInterpolation::kNearest)).value();
  EXPECT_TRUE(SameBytes(applied_labels.volume.data, warped_labels.data.AsType(DType::kInt32).value()))
      << "max |diff| " << MaxAbsDiff(applied_labels.volume.data, warped_labels.data);
  // The inverse chain takes the fixed image's points back near the moving
  // ones: A^-1 then the inverse warp, then forward again is close to identity.
  const TransformChain inverse = {LoadTransformFile(files.affine, true).value(),
                                  LoadTransformFile(files.inverse_warp, false).value()};
  const P3 x = Apply(reference.geometry.IndexToWorld(), {20, 25, 20});
  const P3 y = MapPoint(chain, x);
  const P3 back = MapPoint(inverse, y);
  for (int a = 0; a < 3; ++a) EXPECT_NEAR(back[a], x[a], 0.3) << a;
}

}  // namespace
}  // namespace tessera::registration
