// Accuracy of the MCC matcher on FVC2002 DB1-DB4 set B (CPU):
//   bazel-bin/bench/fingerprint_eval [--matcher=mcc|dmc|fusion] [--score=lssr|lss]
//       [--threads=N] [--data=DIR] [--db=N] [--dmc.NAME=VALUE ...]
// --dmc.NAME sets a DMC parameter (DmcParams / DmcFinalStageParams field
// names, e.g. --dmc.cluster_distance=18); --fusion_weight=W for fusion.
// Prints per database: EER, FMR100, FMR1000, ZeroFMR, rank-1, rank-10,
// descriptor and matching times. Protocol in services/fingerprint/eval/eval.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "bench/fingerprint_data.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

int main(int argc, char** argv) {
  using namespace tessera::fingerprint;
  EvalOptions options;
  std::string data_dir;
  int only_db = 0;
  DmcParams& k = options.dmc.kernels;
  DmcFinalStageParams& f = options.dmc.final_stage;
  const std::map<std::string, float*> float_params = {
      {"delta_theta", &k.delta_theta},           {"min_similarity", &k.min_similarity},
      {"cluster_distance", &k.cluster_distance}, {"cluster_angle", &k.cluster_angle},
      {"cluster_radius", &k.cluster_radius},     {"quality_radius", &k.quality_radius},
      {"quality_sigma", &k.quality_sigma},       {"quality_prior", &k.quality_prior},
      {"tps_pair_distance", &f.tps_pair_distance}, {"tps_pair_angle", &f.tps_pair_angle},
      {"tps_keep_distance", &f.tps_keep_distance}, {"residual_sigma", &f.residual_sigma},
      {"new_pair_min_similarity", &f.new_pair_min_similarity},
      {"overlap_margin", &f.overlap_margin},     {"overlap_floor", &f.overlap_floor},
      {"overlap_min_minutiae", &f.overlap_min_minutiae}, {"similarity_weight", &f.similarity_weight},
      {"similarity_power", &f.similarity_power},
      {"quality_weight", &f.quality_weight},     {"overlap_power", &f.overlap_power}};
  const std::map<std::string, int*> int_params = {{"min_cluster_size", &f.min_cluster_size},
                                                  {"min_overlap", &f.min_overlap},
                                                  {"max_consolidated", &f.max_consolidated},
                                                  {"tps_min_pairs", &f.tps_min_pairs},
                                                  {"tps_refits", &f.tps_refits}};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--dmc.", 6) == 0 && std::strchr(a, '=') != nullptr) {
      const std::string name(a + 6, std::strchr(a, '=') - (a + 6));
      const char* value = std::strchr(a, '=') + 1;
      if (float_params.count(name)) {
        *float_params.at(name) = std::strtof(value, nullptr);
      } else if (int_params.count(name)) {
        *int_params.at(name) = std::atoi(value);
      } else if (name == "tps_lambda") {
        f.tps_lambda = std::strtod(value, nullptr);
      } else if (name == "min_matchable") {
        k.min_matchable = std::strtod(value, nullptr);
      } else {
        std::fprintf(stderr, "unknown DMC parameter %s\n", name.c_str());
        return 2;
      }
    } else if (std::strcmp(a, "--matcher=mcc") == 0) {
      options.matcher = EvalMatcher::kMcc;
    } else if (std::strcmp(a, "--matcher=dmc") == 0) {
      options.matcher = EvalMatcher::kDmc;
    } else if (std::strcmp(a, "--matcher=fusion") == 0) {
      options.matcher = EvalMatcher::kFusion;
    } else if (std::strncmp(a, "--fusion_weight=", 16) == 0) {
      options.fusion_weight = std::strtod(a + 16, nullptr);
    } else if (std::strncmp(a, "--db=", 5) == 0) {
      only_db = std::atoi(a + 5);
    } else if (std::strcmp(a, "--score=lss") == 0) {
      options.score = MccScore::kLss;
    } else if (std::strcmp(a, "--score=lssr") == 0) {
      options.score = MccScore::kLssR;
    } else if (std::strncmp(a, "--threads=", 10) == 0) {
      options.threads = std::atoi(a + 10);
    } else if (std::strncmp(a, "--data=", 7) == 0) {
      data_dir = a + 7;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--matcher=mcc|dmc|fusion] [--score=lssr|lss] [--threads=N] [--data=DIR] [--db=N] "
                   "[--fusion_weight=W] [--dmc.NAME=VALUE ...]\n",
                   argv[0]);
      return 2;
    }
  }
  data_dir = FingerprintDataDirOrExit(data_dir);
  const char* matcher = options.matcher == EvalMatcher::kDmc      ? "DMC"
                        : options.matcher == EvalMatcher::kFusion ? "DMC + LSS-R fusion"
                        : options.score == MccScore::kLssR        ? "LSS-R"
                                                                  : "LSS";
  std::printf("MCC (NS=16, ND=6, bit) + %s, CPU, %d thread(s); FVC2002 set B, all %s pairs\n", matcher,
              options.threads, "ordered");
  std::printf("%-4s %6s %6s %8s %8s %8s %8s %8s %8s %10s %12s\n", "DB", "min", "cyl", "EER%", "FMR100%", "FMR1000%",
              "ZeroFMR%", "rank1%", "rank10%", "desc ms", "matches/s");
  for (int db = 1; db <= 4; ++db) {
    if (only_db != 0 && db != only_db) continue;
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
