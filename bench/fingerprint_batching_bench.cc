// Load test of FingerprintService.Search with and without dynamic batching
// (services/fingerprint/search/search_batcher.h), over real gRPC on loopback.
//
//   fingerprint_batching_bench [--gallery=10000] [--clients=1,8,64] [--seconds=10]
//       [--device=auto|cpu|cuda] [--matcher=lssr|dmc] [--top_k=10] [--max_batch_size=64]
//       [--max_queue_delay_ms=2] [--max_queued=1024] [--gallery_dir=DIR] [--setup=bulk|enroll]
//       [--data=DIR] [--seed=S]
//
// A synthetic gallery (services/fingerprint/eval/synthetic_gallery.h: perturbed
// impressions of the FVC2002 templates, or of random bases without the data)
// is enrolled once into a durable gallery directory (--gallery_dir keeps and
// reuses it across runs; default a temporary one) and compacted, so each
// service start reloads it with its cylinders. --setup=bulk (the default)
// writes an empty directory directly (bench/fingerprint_gallery_prebuild.h:
// records parsed as an enrollment parses them, cylinders on the GPU with
// --device=auto|cuda, large group commits, one compaction; 10^6 templates
// took 104 s through the service); --setup=enroll enrolls through the
// service's EnrollBatch. The last column compares the first answer to each
// probe in the unbatched and batched rows (ids and scores): batching must
// not change results. For every client count the
// service is started unbatched (max_batch_size 1) and then batched, and N
// client threads, each with its own channel (own TCP connection), send
// single-latent Search calls (crops of 12-30 minutiae, latent_eval.h) in a
// loop for --seconds. Per row: completed calls per second, p50 / p99
// latency, the deepest the batching queue got, the mean batch size, the
// calls that failed, this process's CPU time per call (server and clients:
// a measure of work per search that other processes on a shared machine
// disturb far less than throughput) and the load average; then the
// batched / unbatched ratios.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "bench/fingerprint_bases.h"
#include "bench/fingerprint_gallery_prebuild.h"
#include "common/parallel.h"
#include "common/status.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::Clock;

struct Config {
  int64_t gallery = 10000;
  std::vector<int> clients = {1, 8, 64};
  double seconds = 10;
  std::string device = "auto";
  std::string matcher = "lssr";
  int top_k = 10;
  int max_batch_size = 64;
  double max_queue_delay_ms = 2;
  int max_queued = 1024;
  std::string gallery_dir;
  std::string data_dir;
  uint64_t seed = 20261201;
  // bulk: an empty gallery directory is written directly (WriteGalleryInBulk);
  // enroll: every template through the service's EnrollBatch (the old set-up).
  std::string setup = "bulk";
};

struct Row {
  bool batched = false;
  int clients = 0;
  int64_t ok = 0;
  std::map<std::string, int64_t> errors;  // by status code name
  double wall = 0;
  double p50_ms = 0, p99_ms = 0;
  int max_queue_depth = 0;
  double mean_batch = 1;
  double cpu_seconds = 0;  // this process (server and clients) during the row
  // The first answer to each probe (by index): candidate ids and scores, to
  // compare batched with unbatched results.
  std::map<size_t, std::string> answers;
  double load = 0;         // 1-minute load average at the end (other processes compete on a shared machine)
  double throughput() const { return wall > 0 ? ok / wall : 0; }
  double cpu_ms_per_call() const { return ok > 0 ? 1e3 * cpu_seconds / ok : 0; }
  int64_t error_count() const {
    int64_t n = 0;
    for (const auto& [code, count] : errors) n += count;
    return n;
  }
};

using bench::LoadAverage;
using bench::ProcessCpuSeconds;

std::string XytRecord(const std::vector<MinutiaPoint>& points) {
  std::string text;
  for (const MinutiaPoint& m : points) {
    int deg = static_cast<int>(std::lround(m.theta * 180.0 / M_PI)) % 360;
    if (deg < 0) deg += 360;
    absl::StrAppend(&text, static_cast<int>(std::lround(m.x)), " ", static_cast<int>(std::lround(m.y)), " ", deg,
                    " 60\n");
  }
  return text;
}

FingerprintServiceOptions ServiceOptions(const Config& cfg, bool batched) {
  FingerprintServiceOptions o;
  o.gallery_dir = cfg.gallery_dir;
  o.device = cfg.device;
  o.matcher = cfg.matcher;
  o.max_batch_size = batched ? cfg.max_batch_size : 1;
  o.max_queue_delay = absl::Microseconds(static_cast<int64_t>(cfg.max_queue_delay_ms * 1000));
  o.max_queued_searches = cfg.max_queued;
  o.compact_log_bytes = int64_t{1} << 40;  // the bench compacts itself
  o.metrics_registry = std::make_shared<prometheus::Registry>();
  return o;
}

// --setup=bulk into an empty directory: the same gallery written directly
// (bench/fingerprint_gallery_prebuild.h: the same parse, cylinders on the GPU
// when --device allows, large group commits, one compaction).
absl::Status WriteGalleryInBulk(const Config& cfg, const SyntheticGallery& synth) {
  std::unique_ptr<Stream> gpu;
  if (cfg.device != "cpu" && DeviceRegistry::Get().cuda_available()) {
    auto s = Stream::Create(Backend::kCuda);
    if (!s.ok()) return s.status();
    gpu = std::make_unique<Stream>(std::move(*s));
  }
  const Stream cpu = Stream::Cpu();
  PrebuiltGalleryStats st;
  const auto t0 = Clock::now();
  TESSERA_RETURN_IF_ERROR(WritePrebuiltGallery(
      cfg.gallery_dir, cfg.gallery, [](int64_t i) { return absl::StrCat("s", i); },
      [&synth](int64_t i) { return XytRecord(synth.Minutiae(i)); }, TemplateFormat::kXyt, gpu ? *gpu : cpu, &st));
  std::printf("gallery: %lld templates written in bulk in %.1f s (records + parse %.1f s, cylinders on the %s %.1f s, "
              "store %.1f s, compaction %.1f s)\n",
              static_cast<long long>(cfg.gallery), bench::SecondsSince(t0), st.parse_seconds, gpu ? "GPU" : "CPU",
              st.cylinder_seconds, st.store_seconds, st.compact_seconds);
  return absl::OkStatus();
}

// Enrolls templates [size, cfg.gallery) and compacts (cylinders persisted).
absl::Status FillGallery(const Config& cfg, const SyntheticGallery& synth) {
  if (cfg.setup == "bulk") {
    auto existing = GalleryStore::Check(cfg.gallery_dir);
    if (!existing.ok() || existing->live_templates == 0) return WriteGalleryInBulk(cfg, synth);
  }
  auto service = FingerprintServiceImpl::Create(ServerOptions{}, ServiceOptions(cfg, false));
  if (!service.ok()) return service.status();
  FingerprintGallery& g = (*service)->gallery();
  const int64_t have = g.size();
  if (have >= cfg.gallery) {
    std::printf("gallery %s: %lld templates already there\n", cfg.gallery_dir.c_str(), static_cast<long long>(have));
    return absl::OkStatus();
  }
  const auto t0 = Clock::now();
  g.Reserve(cfg.gallery - have, (cfg.gallery - have) * 32);
  constexpr int64_t kGroup = 8192;
  for (int64_t begin = have; begin < cfg.gallery; begin += kGroup) {
    const int64_t end = std::min(cfg.gallery, begin + kGroup);
    std::vector<EnrollItem> items(end - begin);
    ParallelFor(end - begin, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        items[i] = {absl::StrCat("s", begin + i), XytRecord(synth.Minutiae(begin + i)), TemplateFormat::kXyt, 0};
      }
    });
    auto statuses = g.EnrollBatch(items);
    if (!statuses.ok()) return statuses.status();
    for (const absl::Status& s : *statuses) {
      if (!s.ok()) return s;
    }
    std::printf("\renrolled %lld / %lld", static_cast<long long>(end), static_cast<long long>(cfg.gallery));
    std::fflush(stdout);
  }
  const double enroll_s = bench::SecondsSince(t0);
  if (absl::Status s = g.Compact(); !s.ok()) return s;
  std::printf("\rgallery: %lld templates enrolled in %.1f s and compacted\n",
              static_cast<long long>(cfg.gallery - have), enroll_s);
  return absl::OkStatus();
}

absl::StatusOr<Row> RunRow(const Config& cfg, bool batched, int clients, const std::vector<std::string>& probes) {
  ServerOptions server;
  server.grpc_port = 0;
  server.metrics_port = -1;
  server.device = cfg.device;
  server.drain_timeout = absl::Seconds(5);
  const auto t_load = Clock::now();
  auto service = FingerprintServiceImpl::Create(server, ServiceOptions(cfg, batched));
  if (!service.ok()) return service.status();
  ServiceHost host(server);
  host.AddService(service->get());
  auto ports = host.Start();
  if (!ports.ok()) return ports.status();
  const double load_s = bench::SecondsSince(t_load);
  const std::string target = absl::StrCat("127.0.0.1:", ports->grpc_port);

  std::vector<std::unique_ptr<v1::FingerprintService::Stub>> stubs;
  for (int c = 0; c < clients; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per client
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs.push_back(v1::FingerprintService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  }
  std::vector<std::map<size_t, std::string>> answers(clients);
  auto call = [&](int c, int i, double* ms) {
    v1::SearchRequest req;
    const size_t probe = (static_cast<size_t>(c) * 37 + i) % probes.size();
    req.mutable_probe()->set_data(probes[probe]);
    req.mutable_probe()->set_format(v1::TEMPLATE_FORMAT_XYT);
    req.set_top_k(cfg.top_k);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::SearchResponse resp;
    const auto t0 = Clock::now();
    grpc::Status s = stubs[c]->Search(&ctx, req, &resp);
    *ms = bench::MsSince(t0);
    if (s.ok() && !answers[c].count(probe)) {
      std::string a;
      for (const v1::Candidate& cand : resp.candidates()) absl::StrAppend(&a, cand.id(), ":", cand.score(), " ");
      answers[c][probe] = std::move(a);
    }
    return s;
  };
  // Warm-up: one call per client (connections, first GPU use).
  {
    std::vector<std::thread> warm;
    for (int c = 0; c < clients; ++c) {
      warm.emplace_back([&, c] {
        double ms;
        call(c, -1, &ms);
      });
    }
    for (auto& t : warm) t.join();
  }
  service->get()->search_batcher().ResetMaxQueueDepth();
  const auto before = service->get()->search_batcher().counters();

  Row row;
  row.batched = batched;
  row.clients = clients;
  std::vector<std::vector<double>> latencies(clients);
  std::vector<std::map<std::string, int64_t>> errors(clients);
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = Clock::now();
  const auto t_end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; Clock::now() < t_end; ++i) {
        double ms = 0;
        grpc::Status s = call(c, i, &ms);
        if (s.ok()) {
          latencies[c].push_back(ms);
        } else {
          ++errors[c][absl::StrCat("code ", static_cast<int>(s.error_code()))];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  row.wall = bench::SecondsSince(t0);
  row.cpu_seconds = ProcessCpuSeconds() - cpu0;
  row.load = LoadAverage();
  std::vector<double> all;
  for (int c = 0; c < clients; ++c) {
    all.insert(all.end(), latencies[c].begin(), latencies[c].end());
    for (const auto& [code, n] : errors[c]) row.errors[code] += n;
  }
  row.ok = static_cast<int64_t>(all.size());
  for (auto& m : answers) row.answers.insert(m.begin(), m.end());
  row.p50_ms = bench::Percentile(all, 0.50);
  row.p99_ms = bench::Percentile(all, 0.99);
  const auto after = service->get()->search_batcher().counters();
  row.max_queue_depth = after.max_queue_depth;
  const int64_t batches = after.batches - before.batches;
  row.mean_batch = batches > 0 ? static_cast<double>(after.searches - before.searches) / batches : 1.0;
  host.Drain();
  std::printf("%-9s %7d %8lld %9.2f %9.1f %9.1f %9d %10.1f %7lld %11.1f %6.1f   (gallery loaded in %.1f s)\n",
              batched ? "batched" : "unbatched", clients, static_cast<long long>(row.ok), row.throughput(), row.p50_ms,
              row.p99_ms, row.max_queue_depth, row.mean_batch, static_cast<long long>(row.error_count()),
              row.cpu_ms_per_call(), row.load, load_s);
  std::fflush(stdout);
  return row;
}

int Run(Config cfg) {
  const DeviceRegistry& devices = DeviceRegistry::Get();
  std::printf("fingerprint_batching_bench on %s, %d CPU threads; device %s, matcher %s, gallery %lld, top_k %d, "
              "%.0f s per row; batched: max_batch_size %d, max_queue_delay %.1f ms, max_queued %d\n",
              devices.Describe().c_str(), CpuThreads(), cfg.device.c_str(), cfg.matcher.c_str(),
              static_cast<long long>(cfg.gallery), cfg.top_k, cfg.seconds, cfg.max_batch_size,
              cfg.max_queue_delay_ms, cfg.max_queued);
  bool temporary = false;
  if (cfg.gallery_dir.empty()) {
    char tmpl[] = "/tmp/tessera-fp-batching-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::fprintf(stderr, "cannot create a temporary directory\n");
      return 1;
    }
    cfg.gallery_dir = tmpl;
    temporary = true;
  }
  std::vector<BaseTemplate> bases = LoadBenchBases(cfg.data_dir, cfg.seed);
  SyntheticGalleryOptions so;
  so.seed = cfg.seed;
  so.size = cfg.gallery;
  auto synth = SyntheticGallery::Create(bases, so);
  if (!synth.ok()) {
    std::fprintf(stderr, "synthetic gallery: %s\n", synth.status().ToString().c_str());
    return 1;
  }
  if (absl::Status s = FillGallery(cfg, *synth); !s.ok()) {
    std::fprintf(stderr, "gallery: %s\n", s.ToString().c_str());
    return 1;
  }
  // Latents: crops of 12-30 minutiae of real (or base) impressions.
  std::vector<std::string> probes;
  SplitMix64 rng(cfg.seed + 1);
  for (int i = 0; i < 256; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    probes.push_back(XytRecord(CropLatent(b.points, LatentCropParams(), rng)));
  }

  std::printf("\n%-9s %7s %8s %9s %9s %9s %9s %10s %7s %11s %6s\n", "mode", "clients", "calls", "calls/s", "p50 ms",
              "p99 ms", "max queue", "mean batch", "errors", "CPU ms/call", "load");
  std::vector<std::pair<Row, Row>> rows;
  for (int clients : cfg.clients) {
    auto unbatched = RunRow(cfg, false, clients, probes);
    auto batched = RunRow(cfg, true, clients, probes);
    if (!unbatched.ok() || !batched.ok()) {
      std::fprintf(stderr, "run failed: %s\n",
                   (!unbatched.ok() ? unbatched.status() : batched.status()).ToString().c_str());
      return 1;
    }
    rows.emplace_back(*unbatched, *batched);
  }
  std::printf("\n| clients | unbatched calls/s | batched calls/s | throughput x | unbatched p50 / p99 ms | batched p50 / "
              "p99 ms | p99 x | CPU ms/call unbatched / batched | batched max queue | mean batch | errors (unbatched / "
              "batched) | same top-k (probes answered in both) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (const auto& [u, b] : rows) {
    auto list = [](const Row& r) {
      std::string s = absl::StrCat(r.error_count());
      for (const auto& [code, n] : r.errors) absl::StrAppend(&s, " ", code, ": ", n);
      return s;
    };
    int both = 0, same = 0;
    for (const auto& [probe, answer] : u.answers) {
      auto it = b.answers.find(probe);
      if (it == b.answers.end()) continue;
      ++both;
      same += it->second == answer;
    }
    const std::string same_text = absl::StrCat(same, " / ", both, same == both ? "" : " DIFFERENT");
    std::printf("| %d | %.2f | %.2f | **%.2f** | %.0f / %.0f | %.0f / %.0f | %.2f | %.1f / %.1f | %d | %.1f | %s / %s | %s |\n",
                u.clients, u.throughput(), b.throughput(), u.throughput() > 0 ? b.throughput() / u.throughput() : 0,
                u.p50_ms, u.p99_ms, b.p50_ms, b.p99_ms, u.p99_ms > 0 ? b.p99_ms / u.p99_ms : 0, u.cpu_ms_per_call(),
                b.cpu_ms_per_call(), b.max_queue_depth, b.mean_batch, list(u).c_str(), list(b).c_str(), same_text.c_str());
  }
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(cfg.gallery_dir, ec);
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::fingerprint::Config cfg;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* name) { return tessera::bench::FlagValue(a, name); };
    int64_t n = 0;
    double d = 0;
    bool ok = true;
    if (const char* v = value("--gallery")) {
      ok = absl::SimpleAtoi(v, &cfg.gallery) && cfg.gallery >= 1 && cfg.gallery < (int64_t{1} << 31) - 2;
    } else if (const char* v = value("--clients")) {
      cfg.clients.clear();
      for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        ok = ok && absl::SimpleAtoi(s, &n) && n >= 1 && n <= 4096;
        cfg.clients.push_back(static_cast<int>(n));
      }
      ok = ok && !cfg.clients.empty();
    } else if (const char* v = value("--seconds")) {
      ok = absl::SimpleAtod(v, &cfg.seconds) && cfg.seconds > 0;
    } else if (const char* v = value("--device")) {
      cfg.device = v;
      ok = cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda";
    } else if (const char* v = value("--matcher")) {
      cfg.matcher = v;
      ok = cfg.matcher == "lssr" || cfg.matcher == "dmc";
    } else if (const char* v = value("--top_k")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 1000;
      cfg.top_k = static_cast<int>(n);
    } else if (const char* v = value("--max_batch_size")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1;
      cfg.max_batch_size = static_cast<int>(n);
    } else if (const char* v = value("--max_queue_delay_ms")) {
      ok = absl::SimpleAtod(v, &d) && d >= 0;
      cfg.max_queue_delay_ms = d;
    } else if (const char* v = value("--max_queued")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1;
      cfg.max_queued = static_cast<int>(n);
    } else if (const char* v = value("--gallery_dir")) {
      cfg.gallery_dir = v;
    } else if (const char* v = value("--setup")) {
      cfg.setup = v;
      ok = cfg.setup == "bulk" || cfg.setup == "enroll";
    } else if (const char* v = value("--data")) {
      cfg.data_dir = v;
    } else if (const char* v = value("--seed")) {
      uint64_t u = 0;
      ok = absl::SimpleAtoi(v, &u);
      cfg.seed = u;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--gallery=N] [--clients=1,8,64] [--seconds=S] [--device=auto|cpu|cuda]\n"
                   "          [--matcher=lssr|dmc] [--top_k=K] [--max_batch_size=B] [--max_queue_delay_ms=D]\n"
                   "          [--max_queued=Q] [--gallery_dir=DIR] [--setup=bulk|enroll] [--data=DIR] [--seed=S]\n",
                   argv[0]);
      return 2;
    }
  }
  return tessera::fingerprint::Run(cfg);
}
