// Group commit across requests in the durable fingerprint gallery (CPU): T
// threads each enroll single templates (Enroll, one request per template, as
// concurrent portal clients do) into a fresh gallery; every request returns
// only once its record is fdatasync()ed. Prints enrolls/s, records per sync
// and the speed-up over one thread, side by side in one run, then the
// reload time of a compacted snapshot with cylinders (decoded on all cores).
//
//   bazel run -c opt //bench:gallery_commit_bench -- --dir=/var/tmp/gallery_commit --per_thread=200
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/parallel.h"
#include "services/fingerprint/store/gallery_store.h"

ABSL_FLAG(std::string, dir, "/var/tmp/gallery_commit_bench", "scratch directory (on the disk to measure)");
ABSL_FLAG(std::vector<std::string>, threads, std::vector<std::string>({"1", "2", "4", "8", "16", "32"}),
          "concurrent enrolling threads per row");
ABSL_FLAG(int, per_thread, 200, "single enrolls per thread");
ABSL_FLAG(int, reload_templates, 100000, "templates in the reload row (0: skip)");

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

StoredTemplate MakeTemplate(const std::string& id, int salt) {
  StoredTemplate t;
  t.id = id;
  t.format = TemplateFormat::kXyt;
  t.bytes = absl::StrCat("synthetic ", salt);
  for (int i = 0; i < 40; ++i) {
    t.minutiae.push_back({static_cast<float>((salt * 7 + i * 13) % 400), static_cast<float>((i * 29) % 500), 0.1f * i});
  }
  return t;
}

MccTemplate Cylinders(const StoredTemplate& t) {
  MccTemplate out;
  out.num_minutiae = static_cast<int>(t.minutiae.size());
  out.cylinders.resize(t.minutiae.size());
  for (size_t i = 0; i < out.cylinders.size(); ++i) {
    for (auto& w : out.cylinders[i].bits) w = 0x9E3779B97F4A7C15ull * (i + 1);
    for (auto& w : out.cylinders[i].mask) w = ~0ull;
    out.cylinders[i].minutia = static_cast<int>(i);
  }
  return out;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string root = absl::GetFlag(FLAGS_dir);
  const int per_thread = absl::GetFlag(FLAGS_per_thread);
  std::printf("gallery_commit_bench: %s, %d single enrolls per thread, %d CPU threads\n\n", root.c_str(), per_thread,
              CpuThreads());
  std::printf("| threads | enrolls | seconds | enrolls/s | syncs | records/sync | speed-up vs 1 thread |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  double base_rate = 0;
  for (const std::string& arg : absl::GetFlag(FLAGS_threads)) {
    const int threads = std::atoi(arg.c_str());
    const std::string dir = absl::StrCat(root, "-t", threads);
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) return 1;
    auto store = GalleryStore::Open(dir);
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
      return 1;
    }
    const double t0 = NowSeconds();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          auto r = (*store)->Enroll(MakeTemplate(absl::StrCat("t", t, "-", i), i));
          if (!r.ok()) std::fprintf(stderr, "enroll failed: %s\n", r.status().ToString().c_str());
        }
      });
    }
    for (auto& p : pool) p.join();
    const double seconds = NowSeconds() - t0;
    const GalleryCommitStats stats = (*store)->commit_stats();
    const double rate = stats.records / seconds;
    if (base_rate == 0) base_rate = rate;
    std::printf("| %d | %lld | %.2f | %.0f | %lld | %.1f | %.2fx |\n", threads, static_cast<long long>(stats.records),
                seconds, rate, static_cast<long long>(stats.syncs),
                static_cast<double>(stats.records) / std::max<int64_t>(1, stats.syncs), rate / base_rate);
  }
  const int n = absl::GetFlag(FLAGS_reload_templates);
  if (n > 0) {
    const std::string dir = root + "-reload";
    if (std::system(("rm -rf '" + dir + "'").c_str()) != 0) return 1;
    {
      auto store = GalleryStore::Open(dir);
      if (!store.ok()) return 1;
      std::vector<StoredTemplate> batch;
      for (int i = 0; i < n; ++i) batch.push_back(MakeTemplate(absl::StrCat("r", i), i));
      if (!(*store)->EnrollBatch(std::move(batch)).ok()) return 1;
      auto compacted = (*store)->Compact([](const StoredTemplate& t, MccTemplate* out) {
        *out = Cylinders(t);
        return true;
      });
      if (!compacted.ok()) return 1;
    }
    int64_t cylinders = 0;
    const double t0 = NowSeconds();
    auto store = GalleryStore::Open(dir, [&](const std::shared_ptr<const StoredTemplate>&, MccTemplate&& c) {
      cylinders += static_cast<int64_t>(c.cylinders.size());
    });
    const double seconds = NowSeconds() - t0;
    if (!store.ok()) return 1;
    std::printf("\nreload: %d templates, %lld cylinders in %.2f s (%.0f templates/s, %d CPU threads; "
                "TESSERA_CPU_THREADS=1 for the one-core row)\n",
                n, static_cast<long long>(cylinders), seconds, n / seconds, CpuThreads());
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) { return tessera::fingerprint::Main(argc, argv); }
