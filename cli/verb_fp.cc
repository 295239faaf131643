// `tessera fp`: the fingerprint gallery on this machine, without a server
// (the same FingerprintGallery the service uses; a gallery directory is
// locked by one process at a time).
//
//   tessera fp enroll --gallery DIR [--ids a,b,...] [--replace] FILES...
//   tessera fp search --gallery DIR [--top K] [--matcher lssr|dmc|fusion|cascade]
//                     [--cascade-candidates N] LATENT...
//   tessera fp delete --gallery DIR IDS...
//   tessera fp list   --gallery DIR
//   tessera fp check  --gallery DIR   (offline verification, hash chain included; changes nothing)
//
// Every subcommand prints JSON on stdout; errors go to stderr and a failed
// item makes the exit code 1 (usage errors: 2).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/json.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera::cli {
namespace {

using fingerprint::TemplateFormat;

std::vector<FlagSpec> FpFlags() {
  return {
      {"gallery", "", "gallery directory (created if missing)"},
      {"ids", "", "enroll: comma-separated ids, one per file (default: each file's name without extension)"},
      {"replace", "", "enroll: overwrite ids that are already enrolled", true},
      {"format", "auto", "template format: auto (from extension, else content), iso, ansi or xyt"},
      {"top", "10", "search: candidates per probe"},
      {"device", "auto", "search backend: auto, cpu or cuda"},
      {"matcher", "lssr",
       "search: lssr (MCC LSS-R), dmc (deformable minutiae clustering), fusion (DMC + LSS-R scores) or cascade "
       "(LSS-R over the gallery, then fusion of its top candidates)"},
      {"cascade-candidates", "200", "search --matcher cascade: LSS-R candidates re-scored per probe (1-100000)"},
      {"expect-head", "", "check: N:HEX, the \"head\" an earlier fp check printed (kept elsewhere): exit 1 if records were "
                          "cut from the end or rewritten"},
  };
}

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out,
               "usage: tessera fp enroll --gallery DIR [--ids a,b,...] [--replace] FILES...\n"
               "       tessera fp search --gallery DIR [--top K] [--matcher lssr|dmc|fusion|cascade]\n"
               "                         [--cascade-candidates N] LATENT...\n"
               "       tessera fp delete --gallery DIR IDS...\n"
               "       tessera fp list   --gallery DIR\n"
               "       tessera fp check  --gallery DIR [--expect-head N:HEX]   (verify offline: exit 1 if damaged, set\n"
               "                                          aside, or not holding the head printed earlier as \"head\")\n"
               "       tessera fp compact --gallery DIR  (one snapshot of the live templates; the old snapshot and logs\n"
               "                                          removed: deleted templates leave no copy in them)\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Stem(const std::string& path) {
  std::string base = BaseName(path);
  const size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

// --format, or the file extension, or kUnknown (detect from the content).
absl::StatusOr<TemplateFormat> FormatFor(const std::string& flag, const std::string& path) {
  if (flag != "auto") return fingerprint::ParseTemplateFormatName(flag);
  std::string base = absl::AsciiStrToLower(BaseName(path));
  const size_t dot = base.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : base.substr(dot + 1);
  if (ext == "iso" || ext == "ist") return TemplateFormat::kIso19794;
  if (ext == "ansi" || ext == "378") return TemplateFormat::kAnsi378;
  if (ext == "xyt") return TemplateFormat::kXyt;
  return TemplateFormat::kUnknown;
}

std::string ErrorJson(const std::string& key, const std::string& name, const absl::Status& s) {
  return absl::StrCat("{", JsonQuote(key), ": ", JsonQuote(name), ", \"code\": ",
                      JsonQuote(absl::StatusCodeToString(s.code())), ", \"error\": ", JsonQuote(s.message()), "}");
}

absl::StatusOr<std::unique_ptr<fingerprint::FingerprintGallery>> OpenGallery(const Args& args) {
  FingerprintServiceOptions options;
  options.gallery_dir = args.Get("gallery");
  options.device = args.Get("device");
  absl::StatusOr<int> cascade = args.GetInt("cascade-candidates");
  if (!cascade.ok() || !fingerprint::ValidateCascadeCandidates(*cascade).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--cascade-candidates must be 1-", fingerprint::kMaxCascadeCandidates,
                                                   ", got '", args.Get("cascade-candidates"), "'"));
  }
  options.cascade_candidates = *cascade;
  return fingerprint::FingerprintGallery::Open(options);
}

int Enroll(const Args& args, fingerprint::FingerprintGallery& gallery) {
  const std::vector<std::string>& files = args.positional();
  std::vector<std::string> ids = absl::StrSplit(args.Get("ids"), ',', absl::SkipEmpty());
  if (!ids.empty() && ids.size() != files.size()) {
    std::fprintf(stderr, "tessera fp enroll: %zu ids for %zu files\n", ids.size(), files.size());
    return 2;
  }
  std::vector<std::string> errors;
  int64_t enrolled = 0;
  constexpr size_t kGroup = 1024;  // files per group commit
  for (size_t begin = 0; begin < files.size(); begin += kGroup) {
    const size_t end = std::min(files.size(), begin + kGroup);
    std::vector<fingerprint::EnrollItem> items;
    std::vector<size_t> where;
    for (size_t i = begin; i < end; ++i) {
      const std::string id = ids.empty() ? Stem(files[i]) : ids[i];
      absl::StatusOr<TemplateFormat> format = FormatFor(args.Get("format"), files[i]);
      absl::StatusOr<std::vector<uint8_t>> bytes =
          format.ok() ? fingerprint::ReadFileBytes(files[i]) : absl::StatusOr<std::vector<uint8_t>>(format.status());
      if (!bytes.ok()) {
        errors.push_back(ErrorJson("file", files[i], bytes.status()));
        continue;
      }
      items.push_back({id, std::string(bytes->begin(), bytes->end()), *format, 0});
      where.push_back(i);
    }
    absl::StatusOr<std::vector<absl::Status>> statuses = gallery.EnrollBatch(items, args.GetBool("replace"));
    if (!statuses.ok()) {
      std::fprintf(stderr, "tessera fp enroll: %s\n", statuses.status().ToString().c_str());
      return 1;
    }
    for (size_t j = 0; j < statuses->size(); ++j) {
      if ((*statuses)[j].ok()) {
        ++enrolled;
      } else {
        errors.push_back(ErrorJson("file", files[where[j]], (*statuses)[j]));
        std::fprintf(stderr, "tessera fp enroll: %s: %s\n", files[where[j]].c_str(),
                     (*statuses)[j].ToString().c_str());
      }
    }
  }
  std::printf("{\"gallery\": %s, \"enrolled\": %lld, \"failed\": [%s], \"gallery_size\": %lld}\n",
              JsonQuote(args.Get("gallery")).c_str(), static_cast<long long>(enrolled),
              absl::StrJoin(errors, ", ").c_str(), static_cast<long long>(gallery.size()));
  return errors.empty() ? 0 : 1;
}

int Search(const Args& args, fingerprint::FingerprintGallery& gallery) {
  absl::StatusOr<int> top = args.GetInt("top");
  if (!top.ok() || *top < 1 || *top > 100000) {
    std::fprintf(stderr, "tessera fp search: --top must be 1-100000\n");
    return 2;
  }
  const std::vector<std::string> matchers = fingerprint::SearcherMatchers();
  if (std::find(matchers.begin(), matchers.end(), args.Get("matcher")) == matchers.end()) {
    std::fprintf(stderr, "tessera fp search: --matcher must be one of %s, got '%s'\n",
                 absl::StrJoin(matchers, ", ").c_str(), args.Get("matcher").c_str());
    return 2;
  }
  const std::vector<std::string>& files = args.positional();
  std::vector<std::vector<fingerprint::MinutiaPoint>> probes;
  std::vector<absl::Status> problems(files.size());
  std::vector<size_t> where;
  for (size_t i = 0; i < files.size(); ++i) {
    absl::StatusOr<TemplateFormat> format = FormatFor(args.Get("format"), files[i]);
    absl::StatusOr<std::vector<uint8_t>> bytes =
        format.ok() ? fingerprint::ReadFileBytes(files[i]) : absl::StatusOr<std::vector<uint8_t>>(format.status());
    absl::StatusOr<fingerprint::ParsedTemplate> parsed =
        bytes.ok() ? fingerprint::ParseProbeOrTemplate(std::string(bytes->begin(), bytes->end()), *format)
                   : absl::StatusOr<fingerprint::ParsedTemplate>(bytes.status());
    if (!parsed.ok()) {
      problems[i] = parsed.status();
      std::fprintf(stderr, "tessera fp search: %s: %s\n", files[i].c_str(), parsed.status().ToString().c_str());
      continue;
    }
    probes.push_back(std::move(parsed->minutiae));
    where.push_back(i);
  }
  absl::StatusOr<std::vector<std::vector<fingerprint::SearchCandidate>>> results =
      gallery.Search(probes, *top, nullptr, args.Get("matcher"));
  if (!results.ok()) {
    std::fprintf(stderr, "tessera fp search: %s\n", results.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> entries(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (!problems[i].ok()) entries[i] = ErrorJson("probe", Stem(files[i]), problems[i]);
  }
  for (size_t j = 0; j < where.size(); ++j) {
    std::vector<std::string> candidates;
    for (const fingerprint::SearchCandidate& c : (*results)[j]) {
      candidates.push_back(absl::StrFormat("{\"id\": %s, \"score\": %.6f}", JsonQuote(c.id), c.score));
    }
    entries[where[j]] = absl::StrCat("{\"probe\": ", JsonQuote(Stem(files[where[j]])), ", \"candidates\": [",
                                     absl::StrJoin(candidates, ", "), "]}");
  }
  std::printf("[%s%s%s]\n", entries.empty() ? "" : "\n  ", absl::StrJoin(entries, ",\n  ").c_str(),
              entries.empty() ? "" : "\n");
  return where.size() == files.size() ? 0 : 1;
}

int Delete(const Args& args, fingerprint::FingerprintGallery& gallery) {
  std::vector<std::string> deleted, missing;
  for (const std::string& id : args.positional()) {
    absl::Status s = gallery.Delete(id);
    if (s.ok()) {
      deleted.push_back(JsonQuote(id));
    } else {
      std::fprintf(stderr, "tessera fp delete: %s\n", s.ToString().c_str());
      missing.push_back(JsonQuote(id));
    }
  }
  std::printf("{\"deleted\": [%s], \"not_found\": [%s], \"gallery_size\": %lld}\n",
              absl::StrJoin(deleted, ", ").c_str(), absl::StrJoin(missing, ", ").c_str(),
              static_cast<long long>(gallery.size()));
  return missing.empty() ? 0 : 1;
}

// Erasure: once this returns, the gallery's files are one snapshot of the live
// templates and an empty log; a template deleted before has no copy in them
// (files set aside as damaged-log-* are not rewritten: `fp check` lists them).
int Compact(fingerprint::FingerprintGallery& gallery) {
  absl::Status s = gallery.Compact();
  if (!s.ok()) {
    std::fprintf(stderr, "tessera fp compact: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("{\"compacted\": true, \"gallery_size\": %lld}\n", static_cast<long long>(gallery.size()));
  return 0;
}

int List(fingerprint::FingerprintGallery& gallery) {
  std::vector<std::string> ids;
  std::string after;
  for (;;) {
    std::vector<std::string> page = gallery.List(after, 10000);
    if (page.empty()) break;
    after = page.back();
    for (const std::string& id : page) ids.push_back(JsonQuote(id));
  }
  std::printf("{\"count\": %zu, \"ids\": [%s]}\n", ids.size(), absl::StrJoin(ids, ", ").c_str());
  return 0;
}

// Reads the gallery as a start would, without locking or changing it: exit 0
// when nothing is damaged or set aside, 1 otherwise (a torn tail, a write that
// was never acknowledged, is reported but is not damage). The hash chain of the
// log records is verified (an edited, deleted, reordered or inserted record is
// the error); chain_records / chain_head are the chain's end, to be recorded
// elsewhere (a later check showing fewer records or another head at that number
// means the end was cut or changed).
int Check(const std::string& dir, const std::string& expect_head) {
  absl::StatusOr<fingerprint::GalleryCheck> check = fingerprint::GalleryStore::Check(dir, expect_head);
  if (!check.ok()) {
    std::fprintf(stderr, "tessera fp check: %s\n", check.status().ToString().c_str());
    return 1;
  }
  const fingerprint::GalleryOpenStats& s = check->stats;
  std::vector<std::string> aside;
  for (const std::string& f : s.quarantined) aside.push_back(JsonQuote(f));
  std::printf(
      "{\"gallery\": %s, \"clean\": %s, \"live_templates\": %lld, \"snapshot_templates\": %lld, "
      "\"log_records\": %lld, \"torn_tail_bytes\": %lld, \"damaged_tail\": %s, \"set_aside\": [%s], "
      "\"chain_records\": %lld, \"chain_head\": %s, \"head\": %s, \"legacy_records\": %lld, \"error\": %s}\n",
      JsonQuote(dir).c_str(), check->clean() ? "true" : "false", static_cast<long long>(check->live_templates),
      static_cast<long long>(s.snapshot_templates), static_cast<long long>(s.log_records),
      static_cast<long long>(s.truncated_bytes), JsonQuote(s.damaged_tail).c_str(), absl::StrJoin(aside, ", ").c_str(),
      static_cast<long long>(s.chain_records), JsonQuote(s.chain_head).c_str(),
      JsonQuote(absl::StrCat(s.chain_records, ":", s.chain_head)).c_str(),
      static_cast<long long>(s.legacy_records), JsonQuote(check->error).c_str());
  if (s.legacy_records > 0) {
    std::fprintf(stderr,
                 "tessera fp check: %lld log record(s) predate the hash chain (written before it existed): their "
                 "CRCs are checked, but an edit or deletion among them with a fixed-up CRC would not show\n",
                 static_cast<long long>(s.legacy_records));
  }
  if (!check->error.empty()) std::fprintf(stderr, "tessera fp check: %s\n", check->error.c_str());
  if (!s.damaged_tail.empty()) {
    std::fprintf(stderr, "tessera fp check: damaged last record: %s (the next start sets it aside)\n",
                 s.damaged_tail.c_str());
  }
  for (const std::string& f : s.quarantined) {
    std::fprintf(stderr, "tessera fp check: set aside earlier (not in the gallery): %s\n", f.c_str());
  }
  return check->clean() ? 0 : 1;
}

}  // namespace

int RunFp(int argc, char** argv) {
  const std::vector<FlagSpec> specs = FpFlags();
  if (argc < 2) return Usage(specs, stderr, 2);
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") return Usage(specs, stdout, 0);
  auto args = Args::Parse(specs, argc, argv, 2);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera fp: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  if (sub != "enroll" && sub != "search" && sub != "delete" && sub != "list" && sub != "check" && sub != "compact") {
    std::fprintf(stderr, "tessera fp: unknown subcommand '%s'\n", sub.c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->Get("gallery").empty()) {
    std::fprintf(stderr, "tessera fp %s: --gallery is required\n", sub.c_str());
    return 2;
  }
  if (sub == "check") return Check(args->Get("gallery"), args->Get("expect-head"));
  if (sub != "list" && sub != "compact" && args->positional().empty()) {
    std::fprintf(stderr, "tessera fp %s: nothing given\n", sub.c_str());
    return Usage(specs, stderr, 2);
  }
  auto gallery = OpenGallery(*args);
  if (!gallery.ok()) {
    std::fprintf(stderr, "tessera fp %s: %s\n", sub.c_str(), gallery.status().ToString().c_str());
    return 1;
  }
  if (sub == "enroll") return Enroll(*args, **gallery);
  if (sub == "search") return Search(*args, **gallery);
  if (sub == "delete") return Delete(*args, **gallery);
  if (sub == "compact") return Compact(**gallery);
  return List(**gallery);
}

}  // namespace tessera::cli
