// Throughput of the whole image-to-template path - decode (TIFF) + resample
// to 500 ppi + extract + ISO 19794-2 serialization - on the 320 FVC2002
// set-B images repeated to a batch of N, with the batched CUDA extractor
// (extract_cuda.h: dense stages on the GPU, the minutiae on all host threads)
// and with the CPU reference on all host threads; then the GPU-vs-CPU parity
// on the 320 images, stage by stage (extract_parity.h).
//   fingerprint_extract_gpu_bench [--data=DIR] [--batch=N] [--chunk=C] [--repeat=R] [--cpu_images=K]
// --data: the directory holding fvc2002/DB{1..4}_B/*.tif (default: found as
// FindFingerprintDataDir finds it); --batch: images per timed run (default
// 4096); --chunk: images per GPU call (default 1024); --repeat: timed runs,
// the best is reported (default 3); --cpu_images: images of the CPU run
// (default 640).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/fingerprint_data.h"
#include "common/device.h"
#include "common/parallel.h"
#include "services/fingerprint/extract/extract_cuda.h"
#include "services/fingerprint/extract/extract_parity.h"
#include "services/fingerprint/extract/extractor.h"
#include "services/fingerprint/formats/template_iso19794.h"
#include "services/fingerprint/image/image_decode.h"

namespace {

using namespace tessera;
using namespace tessera::fingerprint;

// FVC2002 set B scanners (SOURCES-images.txt): DB2's FX2000 is 569 ppi.
constexpr double kDbPpi[5] = {0, 500, 569, 500, 500};

struct Input {
  std::string name;
  std::string bytes;
  double ppi = 500;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Flag(int argc, char** argv, const char* name, const std::string& fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::exit(1);
}

// Decode + resample `inputs[first .. first + n)` (indices mod inputs.size()) on all threads.
std::vector<GrayImage> Decode(const std::vector<Input>& inputs, int64_t first, int64_t n) {
  std::vector<GrayImage> images(n);
  std::atomic<bool> failed{false};
  ParallelForDynamic(n, 8, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const Input& in = inputs[(first + i) % inputs.size()];
      DecodeOptions d;
      d.ppi = in.ppi;
      absl::StatusOr<GrayImage> img = DecodeGrayImage(in.bytes, d);
      if (img.ok()) img = ResampleTo500Ppi(*img);
      if (!img.ok()) {
        std::fprintf(stderr, "%s: %s\n", in.name.c_str(), std::string(img.status().message()).c_str());
        failed = true;
        continue;
      }
      images[i] = std::move(*img);
    }
  });
  if (failed) Die("decoding failed");
  return images;
}

// ISO 19794-2 records of the extractions on all threads; returns the bytes written.
int64_t Serialize(const std::vector<Extraction>& ex) {
  std::atomic<int64_t> bytes{0};
  ParallelForDynamic(static_cast<int64_t>(ex.size()), 16, [&](int64_t begin, int64_t end, int) {
    int64_t mine = 0;
    for (int64_t i = begin; i < end; ++i) {
      absl::StatusOr<std::vector<uint8_t>> rec = WriteIso19794({ex[i].view});
      if (!rec.ok()) Die(std::string(rec.status().message()));
      mine += static_cast<int64_t>(rec->size());
    }
    bytes += mine;
  });
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string data = FingerprintDataDirOrExit(Flag(argc, argv, "data", ""));
  const int64_t batch = std::atoll(Flag(argc, argv, "batch", "4096").c_str());
  const int64_t chunk = std::max<int64_t>(1, std::atoll(Flag(argc, argv, "chunk", "1024").c_str()));
  const int repeat = std::max(1, std::atoi(Flag(argc, argv, "repeat", "3").c_str()));
  const int64_t cpu_images = std::atoll(Flag(argc, argv, "cpu_images", "640").c_str());

  std::vector<Input> inputs;
  for (int db = 1; db <= 4; ++db) {
    for (int finger = 101; finger <= 110; ++finger) {
      for (int imp = 1; imp <= 8; ++imp) {
        Input in;
        in.name = data + "/fvc2002/DB" + std::to_string(db) + "_B/" + std::to_string(finger) + "_" +
                  std::to_string(imp) + ".tif";
        in.bytes = ReadFile(in.name);
        if (in.bytes.empty()) Die("cannot read " + in.name);
        in.ppi = kDbPpi[db];
        inputs.push_back(std::move(in));
      }
    }
  }
  std::printf("%s\n", DeviceRegistry::Get().Describe().c_str());
  std::printf("inputs: %zu FVC2002 set-B TIFFs; batch %lld, GPU chunk %lld, best of %d; host threads %d\n",
              inputs.size(), static_cast<long long>(batch), static_cast<long long>(chunk), repeat, CpuThreads());
  const ExtractOptions options;

  // ---- GPU path: per chunk decode -> GPU dense + CPU minutiae -> ISO ----------
  absl::StatusOr<std::unique_ptr<ExtractCudaPlan>> plan = ExtractCudaPlan::Create();
  if (!plan.ok()) Die(std::string(plan.status().message()));
  ExtractBatchSettings lean;
  lean.return_enhanced = false;  // the template path needs no Gabor response on the host
  {  // warm-up: sizes the plan, loads the kernels
    std::vector<GrayImage> warm = Decode(inputs, 0, std::min<int64_t>(chunk, batch));
    if (!ExtractMinutiaeBatchCuda(warm, options, **plan, lean).ok()) Die("warm-up failed");
  }
  double best_gpu = 1e30, best_dec = 0, best_ext = 0, best_ser = 0;
  int64_t minutiae_gpu = 0;
  for (int r = 0; r < repeat; ++r) {
    double t_dec = 0, t_ext = 0, t_ser = 0;
    int64_t minutiae = 0;
    const auto t0 = bench::Clock::now();
    for (int64_t first = 0; first < batch; first += chunk) {
      const int64_t n = std::min(chunk, batch - first);
      auto t = bench::Clock::now();
      std::vector<GrayImage> images = Decode(inputs, first, n);
      t_dec += bench::SecondsSince(t);
      t = bench::Clock::now();
      absl::StatusOr<std::vector<Extraction>> ex = ExtractMinutiaeBatchCuda(images, options, **plan, lean);
      if (!ex.ok()) Die(std::string(ex.status().message()));
      t_ext += bench::SecondsSince(t);
      t = bench::Clock::now();
      Serialize(*ex);
      t_ser += bench::SecondsSince(t);
      for (const Extraction& e : *ex) minutiae += static_cast<int64_t>(e.view.minutiae.size());
    }
    const double total = bench::SecondsSince(t0);
    if (total < best_gpu) best_gpu = total, best_dec = t_dec, best_ext = t_ext, best_ser = t_ser;
    minutiae_gpu = minutiae;
  }
  const double gpu_ips = batch / best_gpu;
  std::printf("GPU path: %lld images in %.3f s = %.0f images/s (decode %.3f s, extract %.3f s [GPU dense + CPU "
              "minutiae], ISO %.3f s); %.1f minutiae/image\n",
              static_cast<long long>(batch), best_gpu, gpu_ips, best_dec, best_ext, best_ser,
              static_cast<double>(minutiae_gpu) / batch);

  // ---- CPU path: decode + ExtractMinutiae + ISO, all threads ----------------
  std::vector<Extraction> cpu_ex(inputs.size());
  {
    const int64_t n = std::max<int64_t>(1, cpu_images);
    const auto t0 = bench::Clock::now();
    std::vector<GrayImage> images = Decode(inputs, 0, n);
    std::vector<Extraction> ex(n);
    ParallelForDynamic(n, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) {
        absl::StatusOr<Extraction> e = ExtractMinutiae(images[i], options);
        if (!e.ok()) Die(std::string(e.status().message()));
        ex[i] = std::move(*e);
      }
    });
    Serialize(ex);
    const double total = bench::SecondsSince(t0);
    const double cpu_ips = n / total;
    std::printf("CPU path: %lld images in %.3f s = %.1f images/s (%d threads)\n", static_cast<long long>(n), total,
                cpu_ips, CpuThreads());
    std::printf("GPU/CPU: %.1fx\n", gpu_ips / cpu_ips);
    for (size_t i = 0; i < inputs.size() && i < ex.size(); ++i) cpu_ex[i] = std::move(ex[i]);
  }

  // ---- Parity on the 320 images ----------------------------------------------
  std::vector<GrayImage> images = Decode(inputs, 0, static_cast<int64_t>(inputs.size()));
  ParallelForDynamic(static_cast<int64_t>(inputs.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      if (!cpu_ex[i].skeleton.empty()) continue;
      absl::StatusOr<Extraction> e = ExtractMinutiae(images[i], options);
      if (!e.ok()) Die(std::string(e.status().message()));
      cpu_ex[i] = std::move(*e);
    }
  });
  absl::StatusOr<std::vector<Extraction>> gpu_ex = ExtractMinutiaeBatchCuda(images, options, **plan);
  if (!gpu_ex.ok()) Die(std::string(gpu_ex.status().message()));
  ExtractParity total;
  int violations = 0, identical_minutiae = 0;
  for (int db = 1; db <= 4; ++db) {
    ExtractParity per_db;
    for (size_t i = (db - 1) * 80; i < static_cast<size_t>(db) * 80; ++i) {
      const ExtractParity p = CompareExtractions((*gpu_ex)[i], cpu_ex[i]);
      const std::string why = ParityViolations(p);
      if (!why.empty()) {
        ++violations;
        std::printf("  beyond tolerance: %s: %s\n", inputs[i].name.c_str(), why.c_str());
      }
      identical_minutiae += (*gpu_ex)[i].view.minutiae == cpu_ex[i].view.minutiae;
      per_db.Add(p);
    }
    std::printf("parity DB%d: %s\n", db, per_db.Describe().c_str());
    total.Add(per_db);
  }
  std::printf("parity all: %s\n", total.Describe().c_str());
  std::printf("parity: %d of %zu images beyond the tolerances; %d with identical minutiae lists\n", violations,
              inputs.size(), identical_minutiae);
  return violations == 0 ? 0 : 2;
}
