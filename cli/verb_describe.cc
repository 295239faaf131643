// `tessera describe FILE`: the same summary the VolumeService gives, computed
// locally (no server), for checking a file before submitting work.
#include <cstdio>

#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/array_stats.h"
#include "common/device.h"
#include "common/nifti_io.h"

namespace tessera::cli {

int RunDescribe(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {{"device", "auto", "compute backend: auto, cpu or cuda"}};
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || args->positional().empty()) {
    if (!args.ok()) std::fprintf(stderr, "tessera describe: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(stderr, "usage: tessera describe [--device=auto] FILE.nii[.gz]...\n");
    return args.ok() && args->help() ? 0 : 2;
  }
  auto backend = ResolveBackend(args->Get("device"));
  if (!backend.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  auto stream = Stream::Create(*backend);
  if (!stream.ok()) {
    std::fprintf(stderr, "tessera describe: %s\n", std::string(stream.status().message()).c_str());
    return 1;
  }
  int rc = 0;
  for (const std::string& path : args->positional()) {
    NiftiInfo info;
    auto volume = ReadNifti(path, &info);
    if (!volume.ok()) {
      std::fprintf(stderr, "tessera describe: %s\n", std::string(volume.status().message()).c_str());
      rc = 1;
      continue;
    }
    auto stats = ComputeArrayStats(volume->data, *stream);
    if (!stats.ok()) {
      std::fprintf(stderr, "tessera describe: %s: %s\n", path.c_str(), std::string(stats.status().message()).c_str());
      rc = 1;
      continue;
    }
    const Geometry& g = volume->geometry;
    std::printf("%s: NIfTI-%d %s %s, spacing %g x %g x %g mm, origin (%g, %g, %g), orientation %s\n", path.c_str(),
                info.version, absl::StrJoin(volume->data.shape(), "x").c_str(),
                std::string(DTypeName(volume->data.dtype())).c_str(), g.spacing[0], g.spacing[1], g.spacing[2],
                g.origin[0], g.origin[1], g.origin[2], g.AxisCodes().c_str());
    std::printf("  min %g  max %g  mean %g  sd %g  non-finite %lld  (on %s)\n", stats->min, stats->max, stats->mean,
                stats->stddev, static_cast<long long>(stats->nonfinite_count),
                std::string(BackendName(stream->backend())).c_str());
  }
  return rc;
}

}  // namespace tessera::cli
