// `tessera audit verify|show --log FILE`: checks and filters the server's audit trail
// (services/server/audit_log.h), across rotated files FILE.N ... FILE.1, FILE.
#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "services/server/audit_log.h"

namespace tessera::cli {
namespace {

int Usage(FILE* out, int rc) {
  std::fprintf(out,
               "usage:\n"
               "  tessera audit verify --log FILE [--key-file K[,K2...]] [--expect-head SEQ:HASH]\n"
               "                                      # checks the hash chain across rotated files (keyed links with\n"
               "                                      # the keys the server ran with; a head stored earlier must still\n"
               "                                      # be there); exit 0 intact, 1 broken (first bad seq and why)\n"
               "  tessera audit head --log FILE       # SEQ:HASH of the newest record: store it elsewhere\n"
               "  tessera audit show --log FILE [--principal P] [--method M] [--since RFC3339] [--gallery G] [--outcome O]\n"
               "                    [--trace-id HEX]\n"
               "                                      # matching records as JSON lines, oldest first\n");
  return rc;
}

}  // namespace

int RunAudit(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") return Usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
  const std::string sub = argv[1];
  const std::vector<FlagSpec> specs = {
      {"log", "", "the audit log (as given to tessera serve --audit-log)"},
      {"key-file", "", "verify: the audit key file(s), comma-separated (serve --audit-key-file; old keys too)"},
      {"expect-head", "", "verify: SEQ:HASH printed earlier by `tessera audit head`"},
      {"principal", "", "show: only this principal's records"},
      {"method", "", "show: only methods containing this text (e.g. Search or /tessera.v1.FingerprintService/Delete)"},
      {"since", "", "show: only records at or after this time (RFC3339)"},
      {"gallery", "", "show: only records of calls that named this fingerprint gallery"},
      {"outcome", "", "show: only records with this outcome (OK, PERMISSION_DENIED, UNAUTHENTICATED, ...)"},
      {"trace-id", "", "show: only records of calls in this W3C trace (32 hex digits: a traceparent's second field, "
                       "a job's trace_id)"},
  };
  auto args = Args::Parse(specs, argc, argv, 2);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera audit %s: %s\n", sub.c_str(), std::string(args.status().message()).c_str());
    return Usage(stderr, 2);
  }
  if (args->help()) return Usage(stdout, 0);
  const std::string log = args->Get("log");
  if (log.empty()) {
    std::fprintf(stderr, "tessera audit %s: --log FILE is required\n", sub.c_str());
    return 2;
  }
  if (sub == "head") {
    auto r = VerifyAuditLog(log);
    if (!r.ok()) {
      std::fprintf(stderr, "tessera audit head: %s\n", std::string(r.status().message()).c_str());
      return 2;
    }
    if (r->records == 0) {
      std::fprintf(stderr, "tessera audit head: the log has no record\n");
      return 1;
    }
    std::printf("%lld:%s\n", static_cast<long long>(r->last_seq), r->last_hash.c_str());
    return 0;
  }
  if (sub == "verify") {
    AuditVerifyOptions options;
    for (absl::string_view path : absl::StrSplit(args->Get("key-file"), ',', absl::SkipEmpty())) {
      absl::StatusOr<AuditKey> key = AuditKey::FromFile(std::string(path));
      if (!key.ok()) {
        std::fprintf(stderr, "tessera audit verify: %s\n", std::string(key.status().message()).c_str());
        return 2;
      }
      options.keys.push_back(*std::move(key));
    }
    if (!args->Get("expect-head").empty()) {
      absl::StatusOr<std::pair<int64_t, std::string>> head = ParseAuditHead(args->Get("expect-head"));
      if (!head.ok()) {
        std::fprintf(stderr, "tessera audit verify: --expect-head: %s\n", std::string(head.status().message()).c_str());
        return 2;
      }
      options.expect_head = *head;
    }
    auto r = VerifyAuditLog(log, options);
    if (!r.ok()) {
      std::fprintf(stderr, "tessera audit verify: %s\n", std::string(r.status().message()).c_str());
      return 2;
    }
    if (r->ok) {
      std::printf("OK: %lld records, chain intact across %zu file(s); last hash %s\n",
                  static_cast<long long>(r->records), AuditLogFiles(log).size(), r->last_hash.c_str());
      if (r->keyed_records > 0 && options.keys.empty()) {
        std::printf("note: %lld keyed records whose keyed hashes were not checked: give --key-file\n",
                    static_cast<long long>(r->keyed_records));
      }
      return 0;
    }
    std::printf("BROKEN at seq %lld (%s line %lld): %s\n", static_cast<long long>(r->first_bad_seq), r->file.c_str(),
                static_cast<long long>(r->line), r->reason.c_str());
    return 1;
  }
  if (sub == "show") {
    absl::Time since = absl::InfinitePast();
    if (!args->Get("since").empty()) {
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, args->Get("since"), &since, &err)) {
        std::fprintf(stderr, "tessera audit show: --since: %s\n", err.c_str());
        return 2;
      }
    }
    auto records = ReadAuditLog(log);
    if (!records.ok()) {
      std::fprintf(stderr, "tessera audit show: %s\n", std::string(records.status().message()).c_str());
      return 2;
    }
    for (const AuditRecord& r : *records) {
      if (!args->Get("principal").empty() && r.principal != args->Get("principal")) continue;
      if (!args->Get("method").empty() && !absl::StrContains(r.method, args->Get("method"))) continue;
      if (!args->Get("gallery").empty() && r.gallery != args->Get("gallery")) continue;
      if (!args->Get("outcome").empty() && r.outcome != args->Get("outcome")) continue;
      if (!args->Get("trace-id").empty() && r.trace_id != args->Get("trace-id")) continue;
      absl::Time t;
      std::string err;
      if (since != absl::InfinitePast() && absl::ParseTime(absl::RFC3339_full, r.time, &t, &err) && t < since) continue;
      std::printf("%s\n", r.line.c_str());
    }
    return 0;
  }
  std::fprintf(stderr, "tessera audit: unknown subcommand '%s'\n", sub.c_str());
  return Usage(stderr, 2);
}

}  // namespace tessera::cli
