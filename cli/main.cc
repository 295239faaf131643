// `tessera`: one binary for serving, the demo and client verbs.
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "cli/module.h"
#include "cli/verbs.h"

namespace {

using tessera::cli::Verb;

// The verbs of no one service; each module adds its own (cli/modules.cc).
constexpr Verb kProcessVerbs[] = {
    {"serve", tessera::cli::RunServe, "host all Tessera services in this process (gRPC + /metrics)"},
    {"demo", tessera::cli::RunDemo, "start the services on loopback, drive them over gRPC, write ./demo-out/"},
    {"devices", tessera::cli::RunDevices, "list the compute backends and GPUs this process can use"},
    {"audit", tessera::cli::RunAudit, "audit trail of a server (--audit-log): verify the hash chain, show records"},
    {"health", tessera::cli::RunHealth, "one gRPC health check of a server (exit 0 SERVING): container probes"},
    {"job", tessera::cli::RunJob, "scheduler jobs: submit any long verb to a server, watch, cancel, result, list"},
};

std::vector<Verb> AllVerbs() {
  std::vector<Verb> verbs(std::begin(kProcessVerbs), std::begin(kProcessVerbs) + 2);  // serve, demo first
  for (const auto& module : tessera::cli::Modules()) verbs.insert(verbs.end(), module.verbs.begin(), module.verbs.end());
  verbs.insert(verbs.end(), std::begin(kProcessVerbs) + 2, std::end(kProcessVerbs));
  return verbs;
}

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: tessera <verb> [flags]   (tessera <verb> --help for its flags)\n\nverbs:\n");
  for (const Verb& v : AllVerbs()) std::fprintf(out, "  %-10s %s\n", v.name, v.summary);
  std::fprintf(out, "  %-10s %s\n", "test", "(./tessera script) run every test");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Verb& v : AllVerbs()) {
    if (std::strcmp(argv[1], v.name) == 0) return v.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "tessera: unknown verb '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
