// A durable fingerprint gallery directory written in bulk, for benchmarks
// that need 10^6 enrolled templates quickly (issue 37: enrolling them through
// the service took 104 s on 16 cores, mostly building cylinders on the CPU).
//
// The directory is the one the service would write for the same enrollments:
// each record is parsed exactly as an enrollment parses it
// (ParseProbeOrTemplate), the templates go to the store in large group commits
// (GalleryStore::EnrollBatch), and one compaction writes the snapshot with
// the cylinders - built from the parsed minutiae on the GPU when the stream is
// a CUDA one (BuildMccTemplates: bits identical to the CPU reference), else on
// all cores - so a service opening it loads them without rebuilding
// (the service's own Compact exports the same cylinders from its searcher).
#ifndef TESSERA_BENCH_FINGERPRINT_GALLERY_PREBUILD_H_
#define TESSERA_BENCH_FINGERPRINT_GALLERY_PREBUILD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/device.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera::fingerprint {

struct PrebuiltGalleryStats {
  int64_t templates = 0;  // written by this call
  double parse_seconds = 0, cylinder_seconds = 0, store_seconds = 0, compact_seconds = 0;
};

// Writes templates [0, count) into the (new or empty) gallery directory `dir`:
// template i has id id_of(i) and record record_of(i) in `format`. Every
// record must parse. FAILED_PRECONDITION when `dir` already holds templates
// or another process has it open.
absl::Status WritePrebuiltGallery(const std::string& dir, int64_t count,
                                  const std::function<std::string(int64_t)>& id_of,
                                  const std::function<std::string(int64_t)>& record_of, TemplateFormat format,
                                  const Stream& stream, PrebuiltGalleryStats* stats = nullptr);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_FINGERPRINT_GALLERY_PREBUILD_H_
