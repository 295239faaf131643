// Accuracy of the MCC matcher on FVC2002 DB1-DB4 set B (CPU):
//   bazel-bin/services/fingerprint/fingerprint_eval [--score=lssr|lss] [--threads=N] [--data=DIR]
// Prints per database: EER, FMR100, FMR1000, ZeroFMR, rank-1, rank-10,
// descriptor and matching times. Protocol in eval.h.
#include <cstdio>
#include <cstring>
#include <string>

#include "services/fingerprint/eval.h"
#include "services/fingerprint/fvc_data.h"

int main(int argc, char** argv) {
  using namespace tessera::fingerprint;
  EvalOptions options;
  std::string data_dir;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--score=lss") == 0) {
      options.score = MccScore::kLss;
    } else if (std::strcmp(a, "--score=lssr") == 0) {
      options.score = MccScore::kLssR;
    } else if (std::strncmp(a, "--threads=", 10) == 0) {
      options.threads = std::atoi(a + 10);
    } else if (std::strncmp(a, "--data=", 7) == 0) {
      data_dir = a + 7;
    } else {
      std::fprintf(stderr, "usage: %s [--score=lssr|lss] [--threads=N] [--data=DIR]\n", argv[0]);
      return 2;
    }
  }
  if (data_dir.empty()) {
    auto found = FindFingerprintDataDir();
    if (!found.ok()) {
      std::fprintf(stderr, "%s\n", std::string(found.status().message()).c_str());
      return 1;
    }
    data_dir = *found;
  }
  std::printf("MCC (NS=16, ND=6, bit) + %s, CPU, %d thread(s); FVC2002 set B, all %s pairs\n",
              options.score == MccScore::kLssR ? "LSS-R" : "LSS", options.threads, "ordered");
  std::printf("%-4s %6s %6s %8s %8s %8s %8s %8s %8s %10s %12s\n", "DB", "min", "cyl", "EER%", "FMR100%", "FMR1000%",
              "ZeroFMR%", "rank1%", "rank10%", "desc ms", "matches/s");
  for (int db = 1; db <= 4; ++db) {
    auto e = EvaluateFvc2002Db(data_dir, db, options);
    if (!e.ok()) {
      std::fprintf(stderr, "DB%d: %s\n", db, std::string(e.status().message()).c_str());
      return 1;
    }
    std::printf("DB%-2d %6.1f %6.1f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %10.1f %12.0f\n", db, e->mean_minutiae,
                e->mean_valid_cylinders, 100 * e->verification.eer, 100 * e->verification.fmr100,
                100 * e->verification.fmr1000, 100 * e->verification.zero_fmr, 100 * e->identification.rank1,
                100 * e->identification.rank10, 1e3 * e->descriptor_seconds, e->matches / e->match_seconds);
  }
  return 0;
}
