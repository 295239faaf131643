// `tessera phantom`: reconstruction test data with a known answer, computed
// from exact line integrals of analytic phantoms (never with our projectors):
//   phantom ct       a CT sinogram (+ the phantom on the reconstruction grid)
//   phantom pet      PET counts (+ activity and attenuation maps)
//   phantom geometry a ready-made ASTRA geometry JSON
//   phantom us       ultrasound channel data of point targets or a cyst (PICMUS HDF5)
//   phantom mri      multi-coil k-space of a head phantom (radial or Cartesian), BART .cfl
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/formats/ultrasound_h5.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/mri_phantom.h"
#include "services/reconstruction/phantoms/pet_phantom.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/phantoms/rasterize.h"
#include "services/reconstruction/phantoms/ultrasound_phantom.h"

namespace tessera::cli {
namespace {

namespace formats = recon::formats;
namespace phantoms = recon::phantoms;

constexpr char kUsage[] =
    "usage: tessera phantom <ct|pet|geometry|us|mri> [flags]   (tessera phantom SUB --help for its flags)\n"
    "  ct        CT sinogram of an analytic phantom for an ASTRA geometry JSON (+ the phantom as a volume)\n"
    "  pet       PET counts (Poisson) of an activity + attenuation phantom (+ both maps as volumes; optional\n"
    "            randoms, scatter and detection efficiencies simulated into the counts)\n"
    "  geometry  write a ready-made ASTRA geometry JSON (parallel, fanflat, cone)\n"
    "  us        ultrasound channel data (linear array, plane waves) of point targets or a cyst, PICMUS HDF5\n"
    "  mri       exact multi-coil k-space of a Shepp-Logan head (radial or Cartesian), coil maps, truth: BART .cfl\n";

// Flag parsing and messages of one subcommand.
class Sub {
 public:
  Sub(const char* name, std::vector<FlagSpec> specs) : name_(name), specs_(std::move(specs)) {}

  // False when the caller should return *code (help or a parse error).
  bool Parse(int argc, char** argv, int* code) {
    auto args = Args::Parse(specs_, argc, argv, 1);
    if (args.ok() && !args->help() && args->positional().empty()) {
      args_ = *std::move(args);
      return true;
    }
    if (!args.ok()) {
      Error(std::string(args.status().message()));
    } else if (!args->help()) {
      Error(absl::StrCat("unexpected argument '", args->positional()[0], "'"));
    }
    const bool help = args.ok() && args->help();
    std::fprintf(help ? stdout : stderr, "usage: tessera phantom %s [flags]\n%s", name_, FlagsHelp(specs_).c_str());
    *code = help ? 0 : 2;
    return false;
  }
  std::string Get(const std::string& flag) const { return args_.Get(flag); }
  int Error(const std::string& message, int code = 2) const {
    std::fprintf(stderr, "tessera phantom %s: %s\n", name_, message.c_str());
    return code;
  }
  bool Require(const std::string& flag) const {
    if (!Get(flag).empty()) return true;
    Error(absl::StrCat("--", flag, " is required"));
    return false;
  }
  // A number in [lo, hi]; false (after a message) otherwise.
  bool Number(const std::string& flag, double lo, double hi, double* out) const {
    if (absl::SimpleAtod(Get(flag), out) && *out >= lo && *out <= hi) return true;
    Error(absl::StrFormat("--%s must be a number in [%g, %g], got '%s'", flag, lo, hi, Get(flag)));
    return false;
  }
  bool Integer(const std::string& flag, int64_t lo, int64_t hi, int64_t* out) const {
    if (absl::SimpleAtoi(Get(flag), out) && *out >= lo && *out <= hi) return true;
    Error(absl::StrFormat("--%s must be an integer in [%d, %d], got '%s'", flag, lo, hi, Get(flag)));
    return false;
  }

 private:
  const char* name_;
  std::vector<FlagSpec> specs_;
  Args args_;
};

// The phantom's field of view: the volume's extent (the smaller of x and y),
// centred on the volume.
struct Fit {
  double fov, fov_z;
  recon::Vec3 center;
};
Fit FitVolume(const recon::VolumeGeometry& v) {
  return {std::min(v.max_x - v.min_x, v.max_y - v.min_y), v.max_z - v.min_z,
          {0.5 * (v.min_x + v.max_x), 0.5 * (v.min_y + v.max_y), 0.5 * (v.min_z + v.max_z)}};
}

std::string ShapeText(const NDArray& a) { return ShapeToString(a.shape()); }

int Ct(int argc, char** argv) {
  Sub sub("ct", {
                    {"geometry", "", "ASTRA geometry JSON (vol_geom + proj_geom)"},
                    {"phantom", "shepp-logan", "shepp-logan (Toft's modified, 2-D or 3-D) or disc"},
                    {"supersample", "1", "rays per detector pixel side, averaged (1 = pixel centre)"},
                    {"sinogram-out", "", "sinogram NIfTI to write (.nii or .nii.gz)"},
                    {"volume-out", "", "also write the phantom on the vol_geom grid (ground truth)"},
                    {"volume-supersample", "0", "samples per voxel side for --volume-out (0: 4 in 2-D, 2 in 3-D)"},
                });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("geometry") || !sub.Require("sinogram-out")) return 2;
  int64_t supersample = 0, volume_supersample = 0;
  if (!sub.Integer("supersample", 1, 64, &supersample) || !sub.Integer("volume-supersample", 0, 16, &volume_supersample)) {
    return 2;
  }
  const std::string kind = sub.Get("phantom");
  if (kind != "shepp-logan" && kind != "disc") return sub.Error("--phantom must be shepp-logan or disc");
  absl::StatusOr<recon::CtGeometry> g = formats::ReadGeometryJson(sub.Get("geometry"));
  if (!g.ok()) return sub.Error(std::string(g.status().message()), 1);
  const bool is_2d = g->projection.is_2d;
  const Fit fit = FitVolume(g->volume);
  const phantoms::Phantom phantom =
      kind == "disc" ? phantoms::Disc(0.4 * fit.fov, 1.0, is_2d, fit.center)
      : is_2d        ? phantoms::SheppLogan2D(fit.fov, fit.center)
                     : phantoms::SheppLogan3D(fit.fov, fit.fov_z, fit.center);

  absl::StatusOr<NDArray> sino = phantoms::AnalyticSinogram(phantom, *g, static_cast<int>(supersample));
  absl::Status s = sino.ok() ? formats::WriteSinogram(*sino, g->projection, sub.Get("sinogram-out"), 0,
                                                      "tessera phantom ct: " + kind)
                             : sino.status();
  if (!s.ok()) return sub.Error(std::string(s.message()), 1);
  std::printf("%s: sinogram %s (cols x rows x views) of %s, %s, %lld ray(s) per pixel\n",
              sub.Get("sinogram-out").c_str(), ShapeText(*sino).c_str(), kind.c_str(),
              recon::Describe(*g).c_str(), static_cast<long long>(supersample * (is_2d ? 1 : supersample)));
  if (!sub.Get("volume-out").empty()) {
    const int per_side = volume_supersample > 0 ? static_cast<int>(volume_supersample) : (is_2d ? 4 : 2);
    absl::StatusOr<NDArray> volume = phantoms::Rasterize(phantom, g->volume, per_side);
    s = volume.ok() ? formats::WriteVolume(*volume, g->volume, sub.Get("volume-out"), "tessera phantom ct: " + kind)
                    : volume.status();
    if (!s.ok()) return sub.Error(std::string(s.message()), 1);
    std::printf("%s: phantom volume %s, %d samples per voxel side\n", sub.Get("volume-out").c_str(),
                ShapeText(*volume).c_str(), per_side);
  }
  return 0;
}

int Pet(int argc, char** argv) {
  Sub sub("pet", {
                     {"geometry", "", "ASTRA geometry JSON: its rays are the lines of response"},
                     {"counts", "1e6", "expected total counts (the sum of the noise-free sinogram)"},
                     {"noise", "poisson", "poisson or none (expected counts)"},
                     {"seed", "1", "Poisson random seed (same seed, same counts)"},
                     {"supersample", "1", "rays per detector pixel side, averaged"},
                     {"sinogram-out", "", "counts sinogram NIfTI to write"},
                     {"activity-out", "", "also write the activity phantom on the vol_geom grid"},
                     {"attenuation-out", "", "also write the attenuation map (1/mm) on the vol_geom grid"},
                     {"factors-out", "", "also write the attenuation factors exp(-line integral of mu), a sinogram"},
                     {"randoms-out", "", "simulate randoms (a near-uniform floor) into the counts and write them, a sinogram"},
                     {"scatter-out", "", "simulate scatter (the trues blurred widely) into the counts and write it, a sinogram"},
                     {"normalization-out", "",
                      "simulate detection efficiencies (0.7..1.3, block pattern) into the counts and write them, a sinogram"},
                     {"randoms-fraction", "0.3", "with --randoms-out: randoms total / trues total"},
                     {"scatter-fraction", "0.3", "with --scatter-out: scatter total / trues total"},
                     {"volume-supersample", "0", "samples per voxel side for the maps (0: 4 in 2-D, 2 in 3-D)"},
                 });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("geometry") || !sub.Require("sinogram-out")) return 2;
  phantoms::PetSimulationOptions options;
  int64_t seed = 0, supersample = 0, volume_supersample = 0;
  if (!sub.Number("counts", 1, 1e15, &options.total_counts) || !sub.Integer("seed", 0, INT64_MAX, &seed) ||
      !sub.Integer("supersample", 1, 64, &supersample) ||
      !sub.Integer("volume-supersample", 0, 16, &volume_supersample) ||
      !sub.Number("randoms-fraction", 0, 100, &options.randoms_fraction) ||
      !sub.Number("scatter-fraction", 0, 100, &options.scatter_fraction)) {
    return 2;
  }
  // Corrections are simulated only when they are written (the counts then
  // follow expected = normalization * trues + randoms + scatter).
  if (sub.Get("randoms-out").empty()) {
    options.randoms_fraction = 0;
  } else if (!(options.randoms_fraction > 0)) {
    return sub.Error("--randoms-fraction must be > 0 with --randoms-out");
  }
  if (sub.Get("scatter-out").empty()) {
    options.scatter_fraction = 0;
  } else if (!(options.scatter_fraction > 0)) {
    return sub.Error("--scatter-fraction must be > 0 with --scatter-out");
  }
  options.normalization = !sub.Get("normalization-out").empty();
  const std::string noise = sub.Get("noise");
  if (noise != "poisson" && noise != "none") return sub.Error("--noise must be poisson or none");
  options.poisson = noise == "poisson";
  options.seed = static_cast<uint64_t>(seed);
  options.supersample = static_cast<int>(supersample);
  absl::StatusOr<recon::CtGeometry> g = formats::ReadGeometryJson(sub.Get("geometry"));
  if (!g.ok()) return sub.Error(std::string(g.status().message()), 1);
  const bool is_2d = g->projection.is_2d;
  const Fit fit = FitVolume(g->volume);
  const phantoms::PetPhantom phantom = phantoms::MakePetPhantom(fit.fov, is_2d, fit.fov_z, fit.center);

  absl::StatusOr<phantoms::PetSinogram> sim = phantoms::SimulatePetSinogram(phantom, *g, options);
  absl::Status s = sim.ok() ? formats::WriteSinogram(sim->counts, g->projection, sub.Get("sinogram-out"), 0,
                                                     "tessera phantom pet: counts")
                            : sim.status();
  if (!s.ok()) return sub.Error(std::string(s.message()), 1);
  double total = 0;
  for (int64_t i = 0; i < sim->counts.num_elements(); ++i) total += sim->counts.data<float>()[i];
  std::printf("%s: counts %s (cols x rows x views), %.0f counts (%s, expected %.6g), %s\n",
              sub.Get("sinogram-out").c_str(), ShapeText(sim->counts).c_str(), total,
              options.poisson ? absl::StrCat("Poisson, seed ", seed).c_str() : "no noise", options.total_counts,
              recon::Describe(*g).c_str());
  // What activity 1 reconstructs as (counts per mm of line), for comparing a
  // reconstruction with the --activity-out map.
  std::printf("activity scale %.9g\n", sim->scale);
  if (!sub.Get("factors-out").empty()) {
    s = formats::WriteSinogram(sim->attenuation_factors, g->projection, sub.Get("factors-out"), 0,
                               "tessera phantom pet: attenuation factors");
    if (!s.ok()) return sub.Error(std::string(s.message()), 1);
    std::printf("%s: attenuation factors %s\n", sub.Get("factors-out").c_str(),
                ShapeText(sim->attenuation_factors).c_str());
  }
  const struct {
    const char* flag;
    const NDArray* data;
    const char* what;
  } corrections[] = {{"randoms-out", &sim->randoms, "randoms"},
                     {"scatter-out", &sim->scatter, "scatter"},
                     {"normalization-out", &sim->normalization, "normalization (detection efficiencies)"}};
  for (const auto& c : corrections) {
    if (sub.Get(c.flag).empty()) continue;
    s = formats::WriteSinogram(*c.data, g->projection, sub.Get(c.flag), 0,
                               absl::StrCat("tessera phantom pet: ", c.what));
    if (!s.ok()) return sub.Error(std::string(s.message()), 1);
    double sum = 0;
    for (int64_t i = 0; i < c.data->num_elements(); ++i) sum += c.data->data<float>()[i];
    std::printf("%s: %s %s, sum %.6g\n", sub.Get(c.flag).c_str(), c.what, ShapeText(*c.data).c_str(), sum);
  }
  const int per_side = volume_supersample > 0 ? static_cast<int>(volume_supersample) : (is_2d ? 4 : 2);
  const struct {
    const char* flag;
    const phantoms::Phantom* phantom;
    const char* what;
  } maps[] = {{"activity-out", &phantom.activity, "activity"}, {"attenuation-out", &phantom.attenuation, "mu (1/mm)"}};
  for (const auto& m : maps) {
    if (sub.Get(m.flag).empty()) continue;
    absl::StatusOr<NDArray> volume = phantoms::Rasterize(*m.phantom, g->volume, per_side);
    s = volume.ok() ? formats::WriteVolume(*volume, g->volume, sub.Get(m.flag),
                                           absl::StrCat("tessera phantom pet: ", m.what))
                    : volume.status();
    if (!s.ok()) return sub.Error(std::string(s.message()), 1);
    std::printf("%s: %s map %s\n", sub.Get(m.flag).c_str(), m.what, ShapeText(*volume).c_str());
  }
  return 0;
}

int Geometry(int argc, char** argv) {
  Sub sub("geometry", {
                          {"type", "parallel", "parallel, fanflat or cone"},
                          {"size", "256", "volume N x N (cone: N x N x N) of 1 mm voxels"},
                          {"views", "0", "projections (0: pi/2 N for parallel, pi N for fanflat and cone)"},
                          {"out", "", "geometry JSON to write"},
                      });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("out")) return 2;
  int64_t size = 0, views = 0;
  if (!sub.Integer("size", 4, 4096, &size) || !sub.Integer("views", 0, 100000, &views)) return 2;
  absl::StatusOr<std::string> json = formats::ExampleGeometryJson(sub.Get("type"), size, views);
  if (!json.ok()) return sub.Error(std::string(json.status().message()));
  absl::StatusOr<recon::CtGeometry> g = formats::ParseGeometryJson(*json);
  if (!g.ok()) return sub.Error(std::string(g.status().message()), 1);  // a bug: the example must parse
  const std::string out = sub.Get("out");
  FILE* f = std::fopen(out.c_str(), "wb");
  const bool written = f != nullptr && std::fwrite(json->data(), 1, json->size(), f) == json->size();
  if (f == nullptr || std::fclose(f) != 0 || !written) return sub.Error(absl::StrCat(out, ": cannot write"), 1);
  std::printf("%s: %s geometry, %s\n", out.c_str(), sub.Get("type").c_str(), recon::Describe(*g).c_str());
  return 0;
}

int Ultrasound(int argc, char** argv) {
  Sub sub("us", {
                    {"kind", "points", "points (five targets, 12-32 mm) or cyst (3 mm anechoic cyst in speckle)"},
                    {"channels", "128", "elements of the linear array (0.3 mm pitch, 5 MHz)"},
                    {"transmits", "11", "plane waves over +-10 degrees"},
                    {"synthetic-aperture", "", "every element fires once instead of plane waves", true},
                    {"rf", "", "RF samples instead of IQ", true},
                    {"noise", "0.001", "white noise relative to the largest sample"},
                    {"seed", "1", "noise and speckle seed"},
                    {"out", "", "channel data to write (.h5 or .uff, PICMUS layout)"},
                });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("out")) return 2;
  recon::phantoms::UltrasoundPhantomOptions o;
  int64_t channels = 0, transmits = 0, seed = 0;
  if (!sub.Integer("channels", 2, 1024, &channels) || !sub.Integer("transmits", 1, 128, &transmits) ||
      !sub.Number("noise", 0, 1, &o.noise) || !sub.Integer("seed", 0, 1 << 30, &seed)) {
    return 2;
  }
  o.kind = sub.Get("kind");
  o.channels = static_cast<int>(channels);
  o.transmits = static_cast<int>(transmits);
  o.synthetic_aperture = !sub.Get("synthetic-aperture").empty();
  o.iq = sub.Get("rf").empty();
  o.seed = static_cast<uint32_t>(seed);
  absl::StatusOr<recon::phantoms::UltrasoundPhantom> p = recon::phantoms::MakeUltrasoundPhantom(o);
  if (!p.ok()) return sub.Error(std::string(p.status().message()));
  const std::string out = sub.Get("out");
  if (absl::Status s = formats::WriteUltrasoundH5(p->acquisition, out); !s.ok()) {
    return sub.Error(std::string(s.message()), 1);
  }
  const recon::ultrasound::ChannelData& d = p->acquisition.data;
  std::printf("%s: %s phantom, %d channels x %d transmits x %lld %s samples; targets (mm):", out.c_str(),
              o.kind.c_str(), d.channels, d.transmits, static_cast<long long>(d.samples), o.iq ? "IQ" : "RF");
  for (const auto& t : p->targets) std::printf(" (%.2f, %.2f)", t.x * 1e3, t.z * 1e3);
  std::printf("\n");
  return 0;
}

int Mri(int argc, char** argv) {
  Sub sub("mri", {
                     {"kind", "radial", "radial (golden angle, 2n samples per spoke) or cartesian (every R-th line)"},
                     {"size", "128", "image n x n"},
                     {"spokes", "0", "radial spokes (0: n / 2)"},
                     {"coils", "8", "birdcage coils"},
                     {"acceleration", "2", "cartesian: keep every R-th phase-encoding line"},
                     {"out-dir", "", "directory for kspace, traj, coils and truth (.cfl/.hdr)"},
                 });
  int code = 0;
  if (!sub.Parse(argc, argv, &code)) return code;
  if (!sub.Require("out-dir")) return 2;
  recon::phantoms::MriPhantomOptions o;
  int64_t coils = 0, acceleration = 0;
  if (!sub.Integer("size", 8, 1024, &o.size) || !sub.Integer("spokes", 0, 16384, &o.spokes) ||
      !sub.Integer("coils", 1, 32, &coils) || !sub.Integer("acceleration", 1, 8, &acceleration)) {
    return 2;
  }
  o.kind = sub.Get("kind");
  o.coils = static_cast<int>(coils);
  o.acceleration = static_cast<int>(acceleration);
  absl::StatusOr<recon::phantoms::MriPhantom> p = recon::phantoms::MakeMriPhantom(o);
  if (!p.ok()) return sub.Error(std::string(p.status().message()));
  const std::string dir = sub.Get("out-dir");
  if (absl::Status s = recon::phantoms::WriteMriPhantom(*p, dir); !s.ok()) {
    return sub.Error(std::string(s.message()), 1);
  }
  std::printf("%s: %s Shepp-Logan %lld x %lld, %d coils: kspace%s, coils, truth (.cfl/.hdr)\n", dir.c_str(),
              o.kind.c_str(), static_cast<long long>(o.size), static_cast<long long>(o.size), o.coils,
              o.kind == "radial" ? ", traj" : "");
  return 0;
}

}  // namespace

int RunPhantom(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub == "ct") return Ct(argc - 1, argv + 1);
  if (sub == "pet") return Pet(argc - 1, argv + 1);
  if (sub == "geometry") return Geometry(argc - 1, argv + 1);
  if (sub == "us") return Ultrasound(argc - 1, argv + 1);
  if (sub == "mri") return Mri(argc - 1, argv + 1);
  std::fprintf(stderr, "tessera phantom: unknown subcommand '%s'\n%s", sub.c_str(), kUsage);
  return 2;
}

}  // namespace tessera::cli
