// MCC fingerprint search on the GPU: LSS-R (and LSS) matches per second of
// one probe against a large device-resident gallery.
//
//   fingerprint_gpu_bench [--templates=N] [--probes=P] [--data=DIR]
//
// Gallery: the 320 real FVC2002 templates (../shared/data/fingerprint, or
// $TESSERA_FINGERPRINT_DATA; synthetic ones if absent) plus perturbed copies
// up to N (default 100000): each copy is a real template moved by a random
// rigid motion (rotation +-20 degrees, shift +-30 px), with 3 px / 5 degree
// jitter, ~10% of minutiae dropped and a few spurious ones added. Descriptors
// are built on the GPU (timed), the gallery uploaded once, then P probes (real
// DB1 impressions) are each scored against all N templates:
//   - matches/s = N * P / wall time of the P queries, for LSS-R and LSS: on
//     the device (probe upload + kernel into a preallocated score buffer) and
//     end to end through ScoreGallery (output allocation, scores to the host);
//   - parity: the first probe's scores against the first 5000 templates are
//     compared with the CPU matcher (expected bit-identical);
//   - search: rank of each probe's best mate among all N, leaving out the
//     probe's own unperturbed copy (mates: the finger's other 7 impressions
//     and every perturbed copy of the finger's 8, including of the probe).
// Anchor (TARGETS.md): GPU MCC > 35 M matches/s on 4 Tesla C2075; goal
// >= 50 M LSS-R matches/s on one H200.
// Without a GPU it prints why and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Base {
  std::vector<MinutiaPoint> points;
  int identity;  // db * 1000 + finger
};

std::vector<MinutiaPoint> Perturb(const std::vector<MinutiaPoint>& in, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float rot = 20.0f * static_cast<float>(M_PI / 180) * u(rng);
  const float tx = 30.0f * u(rng), ty = 30.0f * u(rng);
  const float c = std::cos(rot), s = std::sin(rot);
  std::vector<MinutiaPoint> out;
  for (const MinutiaPoint& m : in) {
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) continue;  // dropped
    // Rotation counterclockwise on screen about (150, 200): in y-down pixels
    // (dx, dy) -> (c dx + s dy, -s dx + c dy); the angle grows by rot.
    const float dx = m.x - 150.0f, dy = m.y - 200.0f;
    MinutiaPoint p;
    p.x = std::round(150.0f + c * dx + s * dy + tx + 3.0f * u(rng));
    p.y = std::round(200.0f - s * dx + c * dy + ty + 3.0f * u(rng));
    p.theta = m.theta + rot + 5.0f * static_cast<float>(M_PI / 180) * u(rng);
    out.push_back(p);
  }
  for (int k = std::uniform_int_distribution<int>(0, 3)(rng); k > 0; --k) {
    out.push_back({std::round(std::uniform_real_distribution<float>(0, 300)(rng)),
                   std::round(std::uniform_real_distribution<float>(0, 400)(rng)),
                   std::uniform_real_distribution<float>(0, 6.2831f)(rng)});
  }
  if (out.size() > static_cast<size_t>(kMccMaxMinutiae)) out.resize(kMccMaxMinutiae);
  return out;
}

int Main(int argc, char** argv) {
  long long n_templates = 100000;
  int n_probes = 16;
  std::string data_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--templates=", 12) == 0) {
      n_templates = std::max(400LL, std::atoll(argv[i] + 12));
    } else if (std::strncmp(argv[i], "--probes=", 9) == 0) {
      n_probes = std::max(1, std::atoi(argv[i] + 9));
    } else if (std::strncmp(argv[i], "--data=", 7) == 0) {
      data_dir = argv[i] + 7;
    } else {
      std::fprintf(stderr, "usage: %s [--templates=N] [--probes=P] [--data=DIR]\n", argv[0]);
      return 2;
    }
  }
  const DeviceRegistry& devices = DeviceRegistry::Get();
  if (!devices.cuda_available()) {
    std::printf("fingerprint_gpu_bench: no GPU (%s); nothing to measure\n", devices.cuda_unavailable_reason().c_str());
    return 0;
  }
  std::printf("fingerprint_gpu_bench on %s\n", devices.Describe().c_str());
  auto stream_or = Stream::Create(Backend::kCuda);
  if (!stream_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(stream_or.status().message()).c_str());
    return 1;
  }
  const Stream& stream = *stream_or;

  // Base templates: real FVC2002 (all four DBs) or synthetic.
  std::vector<Base> bases;
  std::vector<std::vector<MinutiaPoint>> probes;
  std::vector<int> probe_identity;
  if (data_dir.empty()) {
    auto found = FindFingerprintDataDir();
    if (found.ok()) data_dir = *found;
  }
  for (int db = 1; db <= 4 && !data_dir.empty(); ++db) {
    auto imps = LoadFvc2002(data_dir, db);
    if (!imps.ok()) break;
    for (const FvcImpression& imp : *imps) bases.push_back({ToMinutiaPoints(imp.view), db * 1000 + imp.finger});
  }
  std::mt19937 rng(20261130);
  if (bases.empty()) {
    std::printf("FVC2002 data not found: synthetic base templates\n");
    for (int i = 0; i < 320; ++i) {
      std::vector<MinutiaPoint> t;
      for (int k = 0; k < 35; ++k) {
        t.push_back({static_cast<float>(rng() % 260 + 20), static_cast<float>(rng() % 360 + 20),
                     static_cast<float>((rng() % 256) * (2 * M_PI / 256))});
      }
      bases.push_back({t, i / 8});
    }
  }
  for (int i = 0; i < n_probes; ++i) {
    const Base& b = bases[(i * 5) % bases.size()];
    probes.push_back(b.points);
    probe_identity.push_back(b.identity);
  }
  // The gallery: the bases, then perturbed copies.
  std::vector<int> identity;
  const MccParams mcc;
  MccGallery gallery;
  gallery.Reserve(n_templates, n_templates * 36);
  double build_seconds = 0;
  const size_t batch = 20000;
  std::vector<std::vector<MinutiaPoint>> pending;
  long long made = 0;
  auto flush = [&]() -> bool {
    if (pending.empty()) return true;
    const double t0 = NowSeconds();
    auto built = BuildMccTemplates(stream, pending, mcc);
    build_seconds += NowSeconds() - t0;
    if (!built.ok()) {
      std::fprintf(stderr, "descriptors: %s\n", std::string(built.status().message()).c_str());
      return false;
    }
    for (const MccTemplate& t : *built) gallery.Append(t, mcc);
    pending.clear();
    return true;
  };
  for (; made < n_templates; ++made) {
    const Base& b = bases[made % bases.size()];
    pending.push_back(made < static_cast<long long>(bases.size()) ? b.points : Perturb(b.points, rng));
    identity.push_back(b.identity);
    if (pending.size() == batch && !flush()) return 1;
  }
  if (!flush()) return 1;
  std::printf("gallery: %d templates, %d cylinders (%.1f per template), %.2f GB; descriptors on the GPU: %.2f s "
              "(%.0f templates/s, incl. host preparation and transfers)\n",
              gallery.num_templates(), gallery.num_cylinders(),
              static_cast<double>(gallery.num_cylinders()) / gallery.num_templates(), gallery.bytes() / 1e9,
              build_seconds, gallery.num_templates() / build_seconds);
  ResetDevicePeak(stream.ordinal());
  const double u0 = NowSeconds();
  auto device = MccDeviceGallery::Upload(gallery, stream);
  if (!device.ok()) {
    std::fprintf(stderr, "upload: %s\n", std::string(device.status().message()).c_str());
    return 1;
  }
  std::printf("uploaded in %.2f s; device memory %.2f GB (tracked peak %.2f GB)\n", NowSeconds() - u0, device->bytes() / 1e9,
              GetDeviceMemoryStats(stream.ordinal()).peak_bytes / 1e9);

  const LssConstants c = MakeLssConstants(LssParams(), mcc);
  std::vector<float> scores(gallery.num_templates());
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
    const char* name = kind == MccScore::kLssR ? "LSS-R" : "LSS";
    // Warm-up (module load, first allocations).
    const LssProbe warm = PrepareProbe(cpu::BuildMccTemplate(probes[0], mcc), mcc);
    if (auto s = ScoreGallery(stream, warm, *device, kind, c, scores.data()); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, std::string(s.message()).c_str());
      return 1;
    }
    int rank1 = 0;
    double seconds = 0, device_seconds = 0;
    auto device_scores = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * gallery.num_templates(), stream.ordinal());
    if (!device_scores.ok()) {
      std::fprintf(stderr, "%s\n", std::string(device_scores.status().message()).c_str());
      return 1;
    }
    for (int i = 0; i < n_probes; ++i) {
      const LssProbe probe = PrepareProbe(cpu::BuildMccTemplate(probes[i], mcc), mcc);
      // Device-side rate: probe upload + kernel into a preallocated score
      // buffer (what a batching service would pay per query).
      const double d0 = NowSeconds();
#if TESSERA_WITH_CUDA
      if (auto s = cuda::ScoreGalleryToDevice(stream, probe, *device, kind, c,
                                              static_cast<float*>((*device_scores)->data()));
          !s.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, std::string(s.message()).c_str());
        return 1;
      }
#endif
      device_seconds += NowSeconds() - d0;
      // End to end through the public API (allocates the output, copies the
      // scores back).
      const double t0 = NowSeconds();
      if (auto s = ScoreGallery(stream, probe, *device, kind, c, scores.data()); !s.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, std::string(s.message()).c_str());
        return 1;
      }
      seconds += NowSeconds() - t0;
      // Rank of the best mate other than the probe's own unperturbed copy.
      const int self = (i * 5) % static_cast<int>(bases.size());
      float best_mate = -1;
      for (int g = 0; g < gallery.num_templates(); ++g) {
        if (g != self && identity[g] == probe_identity[i]) best_mate = std::max(best_mate, scores[g]);
      }
      int rank = 1;
      for (int g = 0; g < gallery.num_templates(); ++g) {
        if (g != self && identity[g] != probe_identity[i] && scores[g] >= best_mate) ++rank;
      }
      rank1 += rank == 1;
      if (i == 0 && kind == MccScore::kLssR) {
        const int n = std::min(5000, gallery.num_templates());
        MccGallery head;
        for (int g = 0; g < n; ++g) head.Append(gallery.Get(g), mcc);
        std::vector<float> cpu_scores(n);
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        const double c0 = NowSeconds();
        cpu::ScoreGallery(probe, head, kind, c, cpu_scores.data(), static_cast<int>(threads));
        const double cpu_rate = n / (NowSeconds() - c0);
        int same = 0;
        for (int g = 0; g < n; ++g) same += cpu_scores[g] == scores[g];
        std::printf("parity: %d of %d scores bit-identical to the CPU matcher; CPU (%u threads, %s) %.0f K matches/s\n",
                    same, n, threads, cpu::PopcountPath(c), cpu_rate / 1e3);
      }
    }
    const double rate = static_cast<double>(gallery.num_templates()) * n_probes / seconds;
    const double device_rate = static_cast<double>(gallery.num_templates()) * n_probes / device_seconds;
    std::printf("%-5s: %d probes x %d templates: %.1f M matches/s on the device (%.2f ms per probe), %.1f M end to "
                "end with scores on the host (%.2f ms); rank-1 %d of %d\n",
                name, n_probes, gallery.num_templates(), device_rate / 1e6, 1e3 * device_seconds / n_probes,
                rate / 1e6, 1e3 * seconds / n_probes, rank1, n_probes);
  }
#if TESSERA_WITH_CUDA
  // The CUDA kernel variants side by side (issue 16): LSS-R device rate
  // (probe upload + kernel, as above) of each, timed on a second pass over
  // the probes (the first warms up and copies the scores back), and every
  // score of every probe compared with kBlock's.
  {
    auto out = Buffer::Allocate(MemoryKind::kDevice, sizeof(float) * gallery.num_templates(), stream.ordinal());
    if (!out.ok()) return 1;
    std::vector<LssProbe> prepared;
    for (const auto& p : probes) prepared.push_back(PrepareProbe(cpu::BuildMccTemplate(p, mcc), mcc));
    const size_t n = gallery.num_templates();
    std::vector<float> block_scores(n * prepared.size()), variant_scores(n * prepared.size());
    std::printf("\n| LSS-R kernel | %d probes x %zu templates: M matches/s (device) | vs block | scores = block's |\n"
                "|---|---:|---:|---:|\n",
                n_probes, n);
    double block_rate = 0;
    for (cuda::LssCudaKernel k : {cuda::LssCudaKernel::kBlock, cuda::LssCudaKernel::kWarpMma}) {
      std::vector<float>& dst = k == cuda::LssCudaKernel::kBlock ? block_scores : variant_scores;
      double best = 1e30;
      absl::Status status;
      for (int pass = 0; pass < 2 && status.ok(); ++pass) {
        const double t0 = NowSeconds();
        for (size_t i = 0; i < prepared.size() && status.ok(); ++i) {
          status = cuda::ScoreGalleryToDevice(stream, prepared[i], *device, MccScore::kLssR, c,
                                              static_cast<float*>((*out)->data()), k);
          if (status.ok() && pass == 0) {
            status = CopyBytes(dst.data() + i * n, MemoryKind::kHost, (*out)->data(), MemoryKind::kDevice,
                               sizeof(float) * n, stream);
            if (status.ok()) status = stream.Synchronize();
          }
        }
        if (pass == 1) best = NowSeconds() - t0;  // pass 0 warms up and copies the scores back
      }
      if (!status.ok()) {
        std::printf("| %s | error: %s | | |\n", cuda::LssCudaKernelName(k), std::string(status.message()).c_str());
        continue;
      }
      const double rate = static_cast<double>(n) * prepared.size() / best;
      if (k == cuda::LssCudaKernel::kBlock) block_rate = rate;
      size_t same = 0;
      for (size_t i = 0; i < dst.size(); ++i) same += dst[i] == block_scores[i];
      std::printf("| %s | %.1f | %.2fx | %zu / %zu |\n", cuda::LssCudaKernelName(k), rate / 1e6,
                  block_rate > 0 ? rate / block_rate : 0.0, same, dst.size());
    }
    std::printf("\n");
  }
#endif
  std::printf("anchor: GPU MCC > 35 M matches/s on 4 Tesla C2075; goal >= 50 M LSS-R matches/s on one H200\n");
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) { return tessera::fingerprint::Main(argc, argv); }
