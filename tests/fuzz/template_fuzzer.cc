// libFuzzer entry point for every template parser. Build and run with clang
// (outside Bazel, whose toolchain here is GCC), seeding from the real data:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     tests/fuzz/template_fuzzer.cc \
//     services/fingerprint/formats/{template,fmr_views,template_iso19794,template_ansi378,template_xyt,template_io}.cc \
//     common/status.cc -labsl_strings -labsl_status -labsl_str_format_internal -labsl_int128 \
//     -labsl_throw_delegate -labsl_raw_logging_internal -labsl_cord -labsl_strerror -o /tmp/template_fuzzer
//   /tmp/template_fuzzer -max_total_time=60 /tmp/corpus ../shared/data/fingerprint/fvc2002/DB1_B
// The Bazel target //tests/fuzz:template_fuzzer links fuzz_main.cc instead, which replays
// the files named on the command line (a regression runner for crashers).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/types/span.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/formats/template_ansi378.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/formats/template_iso19794.h"
#include "services/fingerprint/formats/template_xyt.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool Clean(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDataLoss || s.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::fingerprint;
  const absl::Span<const uint8_t> bytes(data, size);
  auto iso = ParseIso19794(bytes);
  Check(iso.ok() || Clean(iso.status()));
  auto ansi = ParseAnsi378(bytes);
  Check(ansi.ok() || Clean(ansi.status()));
  auto xyt = ParseXyt(absl::string_view(reinterpret_cast<const char*>(data), size));
  Check(xyt.ok() || Clean(xyt.status()));
  auto any = ParseTemplateRecord(bytes);
  Check(any.ok() || Clean(any.status()));
  if (any.ok()) {
    Check(ValidateRecordViews(*any).ok());
    const TemplateFormat format = SniffTemplateFormat(bytes);
    auto rewritten = WriteTemplateRecord(format, *any);
    Check(rewritten.ok());
    Check(ParseTemplateRecordAs(format, *rewritten).ok());
  }
  return 0;
}
