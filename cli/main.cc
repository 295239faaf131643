// `tessera`: one binary for serving, the demo and client verbs.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/verbs.h"

namespace {

struct Verb {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Verb kVerbs[] = {
    {"serve", tessera::cli::RunServe, "host all Tessera services in this process (gRPC + /metrics)"},
    {"demo", tessera::cli::RunDemo, "start the services on loopback, drive them over gRPC, write ./demo-out/"},
    {"describe", tessera::cli::RunDescribe, "summarize a NIfTI volume: geometry, orientation, statistics"},
    {"register", tessera::cli::RunRegister, "register a moving volume to a fixed one; ANTs-style outputs + JSON"},
    {"synth", tessera::cli::RunSynth, "make a registration problem with a known answer from a real volume"},
    {"som", tessera::cli::RunSom, "SOM atlases: train on a sparse corpus, project documents, render PNGs, label cells"},
    {"devices", tessera::cli::RunDevices, "list the compute backends and GPUs this process can use"},
    {"fp", tessera::cli::RunFp, "fingerprint gallery in a directory: enroll, search (JSON), delete, list"},
    {"audit", tessera::cli::RunAudit, "audit trail of a server (--audit-log): verify the hash chain, show records"},
    {"phantom", tessera::cli::RunPhantom, "reconstruction test data: exact CT/PET sinograms of phantoms, geometry JSON"},
    {"recon", tessera::cli::RunRecon, "CT (fbp, fdk, sart, os-sart, cgls) and PET (mlem, osem) reconstruction to NIfTI"},
    {"health", tessera::cli::RunHealth, "one gRPC health check of a server (exit 0 SERVING): container probes"},
    {"job", tessera::cli::RunJob, "scheduler jobs: submit any long verb to a server, watch, cancel, result, list"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: tessera <verb> [flags]   (tessera <verb> --help for its flags)\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::fprintf(out, "  %-10s %s\n", v.name, v.summary);
  std::fprintf(out, "  %-10s %s\n", "test", "(./tessera script) run every test");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Verb& v : kVerbs) {
    if (std::strcmp(argv[1], v.name) == 0) return v.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "tessera: unknown verb '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
