// PET on the GPU: TOF list-mode forward+back passes, naive (one thread per
// event, atomicAdd scatter) against bucketed (events sorted once by (subset,
// TOF bin, view, row, col) on the GPU, duplicates merged, sparse forward into
// a dense ratio TOF sinogram, then the sinogram back projection), and
// sinogram back projections and OSEM iterations, each with the three back
// projections side by side in one run: default (float atomic scatter),
// deterministic fixed-point scatter (64-bit integer atomics) and
// deterministic gather (voxel-driven, the previous deterministic path).
//
//   recon_pet_bench [--configs=cone,fan] [--nx=200] [--nz=200] [--voxel_mm=2] [--views=120]
//                   [--cols=240] [--rows=240] [--tof_bins=13] [--tof_bin_mm=46.8] [--tof_fwhm_mm=83]
//                   [--events=40000000] [--subsets=1] [--osem_subsets=10] [--reps=3] [--small]
//                   [--device=cuda|cpu]
//
// Configs: "cone" is a 3-D cone-beam geometry (nx x nx x nz voxels, views x
// rows x cols detector); "fan" a 2-D fan-beam slice (nx x nx, views x cols).
// TOF defaults are those of a clinical scanner (13 bins of 312 ps = 46.8 mm,
// 555 ps = 83 mm FWHM). Events: Poisson counts of the forward projection
// (TOF, water attenuation) of a cylinder with a hot sphere, scaled to
// --events, one record per count, shuffled (acquisition order).
// List-mode table, per method (naive; bucketed with the float scatter, the
// fixed-point scatter or the gather): setup (sensitivities), the one-time
// preparation (upload; sort and merge), the time of one forward+back pass over
// all events (all subsets; median of --reps after a warm-up), events/s, the
// speed-up over the first row (naive) and over bucketed default, the pass's
// back projection compared with the first row's (relative L2), and whether
// the last timed pass reproduced the warm-up's output bit for bit.
// Sinogram table, per back projection: one full forward projection, one full
// back projection and its cost relative to default, one OSEM iteration
// (--osem_subsets subsets) and its cost relative to default, the OSEM image
// after 2 iterations compared with default's, and whether repeated back
// projections were bit-identical. --small: a quick run (also what
// --device=cpu is for). Without a GPU (and without --device=cpu) it prints
// why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/pet/listmode_file.h"
#include "kernels/reconstruction/pet/listmode_osem.h"
#include "kernels/reconstruction/pet/osem.h"
#include "kernels/reconstruction/pet/pet_geometry.h"
#include "kernels/reconstruction/pet/projector.h"

ABSL_FLAG(std::string, configs, "cone,fan", "comma-separated: cone (3-D), fan (2-D)");
ABSL_FLAG(int64_t, nx, 200, "volume edge in x and y (voxels)");
ABSL_FLAG(int64_t, nz, 200, "volume slices (cone)");
ABSL_FLAG(double, voxel_mm, 2.0, "voxel size (mm)");
ABSL_FLAG(int64_t, views, 120, "views over 2 pi");
ABSL_FLAG(int64_t, cols, 240, "detector columns");
ABSL_FLAG(int64_t, rows, 240, "detector rows (cone)");
ABSL_FLAG(int, tof_bins, 13, "TOF bins (1: no TOF)");
ABSL_FLAG(double, tof_bin_mm, 46.8, "TOF bin width (mm)");
ABSL_FLAG(double, tof_fwhm_mm, 83.0, "TOF kernel FWHM (mm)");
ABSL_FLAG(int64_t, events, 40000000, "list-mode events (prompt counts)");
ABSL_FLAG(int, subsets, 1, "list-mode subsets (a pass covers all of them)");
ABSL_FLAG(int, osem_subsets, 10, "sinogram OSEM subsets");
ABSL_FLAG(int, reps, 3, "timed repetitions (median reported)");
ABSL_FLAG(bool, small, false, "small sizes: cone 48^2 x 32, fan 64^2, 2e5 events");
ABSL_FLAG(std::string, device, "cuda", "cuda or cpu");

namespace tessera {
namespace recon {
namespace pet {
namespace {

using bench::Clock;
using bench::MsSince;
using bench::Median;
using bench::RelL2;

struct Sizes {
  int64_t nx, nz, views, cols, rows, events;
};

PetGeometry MakeGeometry(const std::string& config, const Sizes& s, double voxel) {
  PetGeometry g;
  TofSpec tof{absl::GetFlag(FLAGS_tof_bins), absl::GetFlag(FLAGS_tof_bin_mm), absl::GetFlag(FLAGS_tof_fwhm_mm)};
  g.tof = tof;
  const bool cone = config == "cone";
  VolumeGeometry v = CenteredVolume(s.nx, s.nx, cone ? s.nz : 1);
  for (double* e : {&v.min_x, &v.max_x, &v.min_y, &v.max_y}) *e *= voxel;
  if (cone) {
    v.min_z *= voxel;
    v.max_z *= voxel;
  }
  g.ct.volume = v;
  // Source and detector on a ring 10% outside the volume's bounding sphere;
  // the detector sees the volume's diagonal (cols) and height (rows).
  const double half_xy = 0.5 * s.nx * voxel * std::sqrt(2.0), half_z = cone ? 0.5 * s.nz * voxel : 0.0;
  const double radius = 1.1 * std::sqrt(half_xy * half_xy + half_z * half_z);
  const double magnification = 2.0;
  const double du = magnification * 2.1 * half_xy / static_cast<double>(s.cols);
  const std::vector<double> angles = EvenAngles(s.views, 2 * M_PI);
  if (cone) {
    const double dv = magnification * 2.2 * std::max(half_z, 1.0) / static_cast<double>(s.rows);
    g.ct.projection = ConeBeam(angles, du, dv, s.rows, s.cols, radius, radius);
  } else {
    g.ct.projection = FanBeam2D(angles, du, s.cols, radius, radius);
  }
  return g;
}

// Activity (a cylinder of 1 with a hot sphere of 4) or mu (water in the cylinder).
std::vector<float> Phantom(const VolumeGeometry& v, bool mu) {
  std::vector<float> x(v.size(), 0.0f);
  const double r = 0.4 * (v.max_x - v.min_x), hz = 0.4 * (v.max_z - v.min_z);
  const bool flat = v.nz == 1;
  ParallelFor(v.nz * v.ny, [&](int64_t b, int64_t e, int) {
    for (int64_t jk = b; jk < e; ++jk) {
      const int64_t j = jk % v.ny, k = jk / v.ny;
      for (int64_t i = 0; i < v.nx; ++i) {
        const Vec3 c = v.VoxelCenter(i, j, k);
        float value = 0;
        if (c.x * c.x + c.y * c.y < r * r && (flat || std::fabs(c.z) < hz)) value = mu ? 0.0096f : 1.0f;
        const double dx = c.x - 0.4 * r, dy = c.y + 0.2 * r, dz = flat ? 0.0 : c.z;
        if (!mu && dx * dx + dy * dy + dz * dz < 0.09 * r * r) value = 4.0f;
        x[i + v.nx * jk] = value;
      }
    }
  });
  return x;
}

struct Array {
  std::shared_ptr<Buffer> buffer;
  float* data() const { return static_cast<float*>(buffer->data()); }
};

Array Alloc(const Stream& s, int64_t n) {
  auto b = Buffer::Allocate(MemoryKindFor(s), std::max<int64_t>(n, 1) * sizeof(float), s.ordinal());
  if (!b.ok()) {
    std::fprintf(stderr, "allocation of %lld floats: %s\n", static_cast<long long>(n), b.status().ToString().c_str());
    std::exit(1);
  }
  return Array{*b};
}

Array Upload(const Stream& s, const std::vector<float>& host) {
  Array a = Alloc(s, host.size());
  (void)CopyBytes(a.data(), MemoryKindFor(s), host.data(), MemoryKind::kHost, host.size() * sizeof(float), s);
  (void)s.Synchronize();
  return a;
}

std::vector<float> Download(const Stream& s, const Array& a, int64_t n) {
  std::vector<float> host(n);
  (void)s.Synchronize();
  (void)CopyBytes(host.data(), MemoryKind::kHost, a.data(), MemoryKindFor(s), n * sizeof(float), s);
  return host;
}

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

// Poisson counts of `mean` scaled to about `events` in total, then one record
// per count, shuffled. Threads draw with their own seeds.
std::vector<ListModeEvent> MakeEvents(const PetGeometry& g, const std::vector<float>& mean, int64_t events,
                                      std::vector<float>* counts) {
  double total = 0;
  for (float m : mean) total += m;
  const double scale = total > 0 ? static_cast<double>(events) / total : 0.0;
  counts->assign(mean.size(), 0.0f);
  const int64_t n = static_cast<int64_t>(mean.size());
  const int chunks = ParallelChunks(n, 1 << 16);
  std::vector<std::vector<ListModeEvent>> parts(chunks);
  const int64_t cols = g.cols(), rows = g.rows(), bins = g.tof.num_bins;
  ParallelFor(
      n,
      [&](int64_t b, int64_t e, int chunk) {
        std::mt19937 rng(1234 + chunk);
        for (int64_t i = b; i < e; ++i) {
          const double m = mean[i] * scale;
          if (m <= 0) continue;
          std::poisson_distribution<int> d(m);
          const int c = d(rng);
          (*counts)[i] = static_cast<float>(c);
          ListModeEvent ev;
          ev.col = static_cast<uint16_t>(i % cols);
          ev.row = static_cast<uint16_t>((i / cols) % rows);
          ev.tof_bin = static_cast<int16_t>((i / (cols * rows)) % bins - bins / 2);
          ev.view = static_cast<uint32_t>(i / (cols * rows * bins));
          for (int k = 0; k < c; ++k) parts[chunk].push_back(ev);
        }
      },
      1 << 16);
  std::vector<ListModeEvent> all;
  size_t size = 0;
  for (const auto& p : parts) size += p.size();
  all.reserve(size);
  for (auto& p : parts) {
    all.insert(all.end(), p.begin(), p.end());
    std::vector<ListModeEvent>().swap(p);
  }
  std::mt19937_64 rng(99);
  std::shuffle(all.begin(), all.end(), rng);
  return all;
}

// The back projection a (mode, deterministic_back) pair runs, for the tables.
std::string BackName(ExecutionMode mode, DeterministicBack back) {
  if (mode == ExecutionMode::kDefault) return "default (float scatter)";
  return absl::StrFormat("deterministic (%s)", DeterministicBackName(back));
}

struct ListModeRow {
  std::string method;
  int64_t events = 0, unique = 0;
  double create_ms = 0, prepare_ms = 0, pass_ms = 0, rel_l2 = 0;
  bool repeat_identical = false;
  std::vector<float> back;  // subset 0's data term
};

ListModeRow TimeListMode(const PetGeometry& g, const Stream& stream, const Array& mu,
                         const std::vector<ListModeEvent>& events, ListModeMethod method, ExecutionMode mode,
                         DeterministicBack back, bool cpu, int subsets, int reps) {
  ListModeRow row;
  row.method = cpu ? "cpu reference"
                   : (method == ListModeMethod::kNaive ? "naive (atomic per event)"
                                                       : "bucketed, " + BackName(mode, back));
  Clock::time_point t = Clock::now();
  ListModeOptions options{subsets, method, mu.data(), mode};
  options.deterministic_back = back;
  auto lm = ListModeReconstructor::Create(g, stream, options);
  Check(lm.status(), "list-mode create");
  row.create_ms = MsSince(t);
  t = Clock::now();
  Check((*lm)->SetEvents(events.data(), events.size()), "list-mode events");
  row.prepare_ms = MsSince(t);
  row.events = (*lm)->num_events();
  row.unique = (*lm)->num_unique();
  const int64_t n = g.ct.volume.size();
  Array image = Upload(stream, std::vector<float>(n, 1.0f));
  Array out = Alloc(stream, n);
  auto pass = [&]() {
    for (int s = subsets - 1; s >= 0; --s) Check((*lm)->DataTerm(image.data(), out.data(), s).status(), "data term");
    Check(stream.Synchronize(), "sync");
  };
  pass();  // warm-up; leaves subset 0's result in out
  row.back = Download(stream, out, n);
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    t = Clock::now();
    pass();
    ms.push_back(MsSince(t));
  }
  row.pass_ms = Median(ms);
  row.repeat_identical = Download(stream, out, n) == row.back;
  return row;
}

struct SinogramRow {
  std::string name;
  double forward_ms = 0, back_ms = 0, iteration_ms = 0, rel_l2 = 0;
  bool repeat_identical = true;
  std::vector<float> image;
};

SinogramRow TimeSinogram(const PetGeometry& g, const Stream& stream, const Array& mu, const Array& counts,
                         ExecutionMode mode, DeterministicBack back_kind, int subsets, int reps) {
  SinogramRow row;
  row.name = BackName(mode, back_kind);
  auto A = PetProjector::Create(g, stream, {subsets, mode, mu.data(), back_kind});
  Check(A.status(), "projector");
  const int64_t n = g.ct.volume.size();
  Array x = Upload(stream, std::vector<float>(n, 1.0f));
  Array y = Alloc(stream, g.sinogram_size());
  Array back = Alloc(stream, n);
  std::vector<double> fwd_ms, back_ms;
  std::vector<float> first;
  for (int r = 0; r <= reps; ++r) {
    Clock::time_point t = Clock::now();
    Check((*A)->Forward(x.data(), y.data()), "forward");
    Check(stream.Synchronize(), "sync");
    if (r > 0) fwd_ms.push_back(MsSince(t));
    t = Clock::now();
    Check((*A)->Back(y.data(), back.data()), "back");
    Check(stream.Synchronize(), "sync");
    if (r > 0) back_ms.push_back(MsSince(t));
    // The forward is deterministic (one thread per bin), so y repeats too.
    if (r == 0) {
      first = Download(stream, back, n);
    } else if (r == reps) {
      row.repeat_identical = Download(stream, back, n) == first;
    }
  }
  row.forward_ms = Median(fwd_ms);
  row.back_ms = Median(back_ms);
  // OSEM: 2 iterations; the second one's time from the progress callbacks.
  std::vector<Clock::time_point> stamps;
  OsemOptions options;
  options.iterations = 2;
  options.progress = [&stamps](int, int, double) {
    stamps.push_back(Clock::now());
    return absl::OkStatus();
  };
  Check(Osem(**A, counts.data(), x.data(), options), "osem");
  row.iteration_ms = std::chrono::duration<double, std::milli>(stamps[2 * subsets - 1] - stamps[subsets - 1]).count();
  row.image = Download(stream, x, n);
  return row;
}

void RunConfig(const std::string& config, const Sizes& sizes, double voxel, const Stream& stream, bool cpu) {
  const PetGeometry g = MakeGeometry(config, sizes, voxel);
  if (absl::Status s = Validate(g); !s.ok()) Check(s, "geometry");
  const int subsets = std::max(1, absl::GetFlag(FLAGS_subsets));
  const int osem_subsets = std::max(1, absl::GetFlag(FLAGS_osem_subsets));
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  std::printf("\n## %s: %s\n\n", config.c_str(), Describe(g).c_str());
  std::fflush(stdout);

  // The data: TOF forward projection of the phantom with attenuation, Poisson, events.
  Clock::time_point t = Clock::now();
  Array mu = Upload(stream, Phantom(g.ct.volume, true));
  std::vector<float> mean;
  {
    auto A = PetProjector::Create(g, stream, {1, ExecutionMode::kDefault, mu.data()});
    Check(A.status(), "projector");
    Array x = Upload(stream, Phantom(g.ct.volume, false));
    Array y = Alloc(stream, g.sinogram_size());
    Check((*A)->Forward(x.data(), y.data()), "phantom forward");
    mean = Download(stream, y, g.sinogram_size());
  }
  std::vector<float> counts;
  const std::vector<ListModeEvent> events = MakeEvents(g, mean, sizes.events, &counts);
  std::vector<float>().swap(mean);
  std::printf("data: %lld events in %lld TOF sinogram bins (%.2f per bin), made in %.1f s\n\n",
              static_cast<long long>(events.size()), static_cast<long long>(g.sinogram_size()),
              static_cast<double>(events.size()) / g.sinogram_size(), MsSince(t) / 1000);
  std::fflush(stdout);

  // List-mode passes.
  // Back projections compared: (mode, deterministic_back).
  const std::vector<std::pair<ExecutionMode, DeterministicBack>> backs = {
      {ExecutionMode::kDefault, DeterministicBack::kAuto},
      {ExecutionMode::kDeterministic, DeterministicBack::kFixedPoint},
      {ExecutionMode::kDeterministic, DeterministicBack::kGather}};
  std::vector<ListModeRow> lm_rows;
  if (cpu) {
    lm_rows.push_back(TimeListMode(g, stream, mu, events, ListModeMethod::kBucketed, ExecutionMode::kDeterministic,
                                   DeterministicBack::kAuto, true, subsets, reps));
  } else {
    lm_rows.push_back(TimeListMode(g, stream, mu, events, ListModeMethod::kNaive, ExecutionMode::kDefault,
                                   DeterministicBack::kAuto, false, subsets, reps));
    for (const auto& [mode, back] : backs) {
      lm_rows.push_back(
          TimeListMode(g, stream, mu, events, ListModeMethod::kBucketed, mode, back, false, subsets, reps));
    }
  }
  // "vs bucketed default": the cost of determinism (time / bucketed float scatter's).
  const double bucketed_default_ms = lm_rows.size() > 1 ? lm_rows[1].pass_ms : lm_rows[0].pass_ms;
  std::printf("| list-mode (%d subsets) | events | unique LOR-bins | setup ms | prepare ms | pass ms | M events/s "
              "| speed-up vs first | time vs bucketed default | rel L2 vs first | repeat bit-identical |\n",
              subsets);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (ListModeRow& r : lm_rows) {
    r.rel_l2 = RelL2(r.back, lm_rows[0].back);
    std::printf("| %s | %lld | %lld | %.1f | %.1f | %.2f | %.1f | %.2fx | %.2fx | %.2e | %s |\n", r.method.c_str(),
                static_cast<long long>(r.events), static_cast<long long>(r.unique), r.create_ms, r.prepare_ms,
                r.pass_ms, r.events / (r.pass_ms * 1e3), lm_rows[0].pass_ms / r.pass_ms,
                r.pass_ms / bucketed_default_ms, r.rel_l2, r.repeat_identical ? "yes" : "no");
  }
  std::printf("\n");
  std::fflush(stdout);

  // Sinogram projector and OSEM.
  Array d_counts = Upload(stream, counts);
  std::vector<float>().swap(counts);
  std::vector<SinogramRow> rows;
  for (const auto& [mode, back] : backs) {
    rows.push_back(TimeSinogram(g, stream, mu, d_counts, mode, back, osem_subsets, reps));
  }
  std::printf("| sinogram (%lld bins) | forward ms | back ms | back vs default | OSEM iteration ms (%d subsets) | "
              "iteration vs default | rel L2 vs default (2 it.) | back repeat bit-identical |\n",
              static_cast<long long>(g.sinogram_size()), osem_subsets);
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (SinogramRow& r : rows) {
    r.rel_l2 = RelL2(r.image, rows[0].image);
    std::printf("| %s | %.2f | %.2f | %.2fx | %.2f | %.2fx | %.2e | %s |\n", r.name.c_str(), r.forward_ms,
                r.back_ms, r.back_ms / rows[0].back_ms, r.iteration_ms, r.iteration_ms / rows[0].iteration_ms,
                r.rel_l2, r.repeat_identical ? "yes" : "no");
  }
  std::fflush(stdout);
}

int Main() {
  const bool small = absl::GetFlag(FLAGS_small);
  const bool cpu = absl::GetFlag(FLAGS_device) == "cpu";
  if (!cpu && !DeviceRegistry::Get().cuda_available()) {
    std::printf("recon_pet_bench: no GPU (%s); use --device=cpu --small for the CPU backend\n",
                DeviceRegistry::Get().cuda_unavailable_reason().c_str());
    return 0;
  }
  auto stream = cpu ? absl::StatusOr<Stream>(Stream::Cpu()) : Stream::Create(Backend::kCuda);
  Check(stream.status(), "stream");
  std::printf("# recon_pet_bench\n\ndevice: %s; %d CPU threads; %d reps (median)\n",
              cpu ? "cpu" : DeviceRegistry::Get().Describe().c_str(), CpuThreads(), absl::GetFlag(FLAGS_reps));
  std::printf("Targets: parallelproj (Titan XP) TOF list-mode 4e6 events forward 0.15 s + back 0.39 s = 7.4 M events/s "
              "per forward+back pass; goal >= 10x (74 M events/s); bucketed >= 3x naive.\n");
  const std::vector<std::string> configs = absl::StrSplit(absl::GetFlag(FLAGS_configs), ',', absl::SkipEmpty());
  for (const std::string& config : configs) {
    if (config != "cone" && config != "fan") {
      std::fprintf(stderr, "unknown config %s (cone or fan)\n", config.c_str());
      return 2;
    }
    Sizes s{absl::GetFlag(FLAGS_nx),   absl::GetFlag(FLAGS_nz),   absl::GetFlag(FLAGS_views),
            absl::GetFlag(FLAGS_cols), absl::GetFlag(FLAGS_rows), absl::GetFlag(FLAGS_events)};
    if (small) s = config == "cone" ? Sizes{48, 32, 24, 64, 48, 200000} : Sizes{64, 1, 60, 96, 1, 200000};
    if (config == "fan") s.nz = s.rows = 1;
    RunConfig(config, s, small ? 4.0 : absl::GetFlag(FLAGS_voxel_mm), *stream, cpu);
  }
  return 0;
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::recon::pet::Main();
}
