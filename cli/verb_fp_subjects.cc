// Subjects and finger positions in `tessera fp` (fp_subjects.h).
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/fp_subjects.h"
#include "common/json.h"
#include "common/status.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/search/tenprint_search.h"

namespace tessera::cli {
namespace {

absl::StatusOr<std::vector<int>> CodeList(const Args& args, const std::string& flag) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(args.Get(flag), ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not a number"));
    }
    out.push_back(v);
  }
  return out;
}

std::string MetadataFields(const fingerprint::TemplateMetadata& m) {
  std::string out;
  if (!m.subject_id.empty()) absl::StrAppend(&out, ", \"subject\": ", JsonQuote(m.subject_id));
  if (m.finger_position != 0) {
    absl::StrAppend(&out, ", \"finger\": ", m.finger_position, ", \"finger_name\": ",
                    JsonQuote(fingerprint::FingerPositionName(m.finger_position)));
  }
  if (m.impression_type != fingerprint::kUnknownImpressionType) {
    absl::StrAppend(&out, ", \"impression\": ", m.impression_type);
  }
  if (!m.capture_date.empty()) absl::StrAppend(&out, ", \"capture_date\": ", JsonQuote(m.capture_date));
  if (!m.source_tcn.empty()) absl::StrAppend(&out, ", \"tcn\": ", JsonQuote(m.source_tcn));
  if (!m.attributes.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : m.attributes) kv.push_back(absl::StrCat(JsonQuote(k), ": ", JsonQuote(v)));
    absl::StrAppend(&out, ", \"attributes\": {", absl::StrJoin(kv, ", "), "}");
  }
  return out;
}

}  // namespace

std::vector<FlagSpec> FpSubjectFlags() {
  return {
      {"subject", "", "enroll: the subject of every file (transactions: default their TCN)"},
      {"finger", "0", "enroll: finger position (FGP 1-10: right thumb .. left little) of template and image files"},
      {"impression", "-1", "enroll: impression type (IMP, e.g. 0 live-scan plain, 1 rolled, 4 latent; -1 unknown)"},
      {"attr", "", "enroll: key=value,... stored with every template"},
      {"finger-positions", "", "search: only templates of these finger positions (e.g. 1,6)"},
      {"impression-types", "", "search: only templates of these impression types"},
      {"fusion", "sum", "search of a ten-print card: sum (of per-finger scores per subject) or max"},
  };
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> AttributesFromFlags(const Args& args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view item : absl::StrSplit(args.Get("attr"), ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--attr: '", item, "' is not key=value"));
    }
    out.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  TESSERA_RETURN_IF_ERROR(Annotate(fingerprint::NormalizeAttributes(&out), "--attr"));
  return out;
}

absl::StatusOr<fingerprint::TemplateMetadata> MetadataFromFlags(const Args& args) {
  fingerprint::TemplateMetadata m;
  m.subject_id = args.Get("subject");
  absl::StatusOr<int> finger = args.GetInt("finger");
  absl::StatusOr<int> impression = args.GetInt("impression");
  if (!finger.ok()) return absl::InvalidArgumentError("--finger must be a number (FGP 0-255)");
  if (!impression.ok()) return absl::InvalidArgumentError("--impression must be a number (IMP 0-255, -1 unknown)");
  m.finger_position = *finger;
  m.impression_type = *impression;
  TESSERA_ASSIGN_OR_RETURN(m.attributes, AttributesFromFlags(args));
  TESSERA_RETURN_IF_ERROR(fingerprint::ValidateTemplateMetadata(m));
  return m;
}

absl::StatusOr<fingerprint::TemplateFilter> FilterFromFlags(const Args& args) {
  fingerprint::TemplateFilter f;
  TESSERA_ASSIGN_OR_RETURN(f.finger_positions, CodeList(args, "finger-positions"));
  TESSERA_ASSIGN_OR_RETURN(f.impression_types, CodeList(args, "impression-types"));
  TESSERA_RETURN_IF_ERROR(fingerprint::ValidateTemplateFilter(f));
  return f;
}

std::string CandidateJson(const fingerprint::SearchCandidate& c) {
  return absl::StrFormat("{\"id\": %s, \"score\": %.6f%s}", JsonQuote(c.id), c.score,
                         c.metadata != nullptr ? MetadataFields(*c.metadata) : "");
}

absl::StatusOr<std::string> TenPrintSearchJson(const std::string& name, const fingerprint::TransactionCard& card,
                                               const fingerprint::TransactionProbes& probes, const Args& args,
                                               int top_k, fingerprint::GallerySearcher& searcher) {
  TESSERA_ASSIGN_OR_RETURN(fingerprint::TenPrintFusion fusion, fingerprint::ParseTenPrintFusion(args.Get("fusion")));
  std::vector<fingerprint::CardFinger> fingers;
  for (size_t j = 0; j < probes.searched.size(); ++j) {
    fingers.push_back({card.fingers[probes.searched[j]].position, probes.minutiae[j]});
  }
  fingerprint::TenPrintOptions options;
  options.top_k = top_k;
  options.fusion = fusion;
  const std::string matcher = args.Get("matcher");
  fingerprint::CardSearchFn search = [&](const std::vector<std::vector<fingerprint::MinutiaPoint>>& probes,
                                         const std::vector<fingerprint::TemplateFilter>& filters, int k) {
    fingerprint::SearchOptions o;
    o.top_k = k;
    o.matcher = matcher;
    o.probe_filters = filters;
    return searcher.Search(probes, o);
  };
  TESSERA_ASSIGN_OR_RETURN(std::vector<fingerprint::SubjectMatch> subjects,
                           fingerprint::TenPrintSearchBatched(fingers, options, search));
  std::vector<std::string> entries;
  for (const fingerprint::SubjectMatch& m : subjects) {
    std::vector<std::string> per_finger;
    for (const fingerprint::FingerMatch& f : m.fingers) {
      per_finger.push_back(absl::StrFormat("{\"finger\": %d, \"id\": %s, \"score\": %.6f}", f.finger_position,
                                           JsonQuote(f.id), f.score));
    }
    entries.push_back(absl::StrFormat("{\"subject\": %s, \"score\": %.6f, \"fingers\": [%s]}", JsonQuote(m.subject_id),
                                      m.score, absl::StrJoin(per_finger, ", ")));
  }
  return absl::StrCat("{\"probe\": ", JsonQuote(name), ", \"mode\": \"ten-print\", \"tcn\": ", JsonQuote(card.tcn),
                      ", \"fingers\": ", fingers.size(), ", \"fusion\": ", JsonQuote(fingerprint::TenPrintFusionName(fusion)),
                      ", \"subjects\": [", absl::StrJoin(entries, ", "), "]}");
}

int ListSubjects(fingerprint::FingerprintGallery& gallery) {
  std::vector<std::string> entries;
  std::string after;
  for (;;) {
    auto page = gallery.ListSubjects(after, 10000);
    if (page.empty()) break;
    after = page.back().first;
    for (const auto& [subject, n] : page) {
      entries.push_back(absl::StrCat("{\"subject\": ", JsonQuote(subject), ", \"templates\": ", n, "}"));
    }
  }
  std::printf("{\"count\": %zu, \"subjects\": [%s]}\n", entries.size(), absl::StrJoin(entries, ", ").c_str());
  return 0;
}

int ShowSubjects(const Args& args, fingerprint::FingerprintGallery& gallery) {
  std::vector<std::string> entries;
  int missing = 0;
  for (const std::string& subject : args.positional()) {
    const auto templates = gallery.OfSubject(subject);
    if (templates.empty()) {
      std::fprintf(stderr, "tessera fp subject: no templates of subject '%s'\n", subject.c_str());
      ++missing;
      continue;
    }
    std::vector<std::string> list;
    for (const auto& t : templates) {
      list.push_back(absl::StrCat("{\"id\": ", JsonQuote(t->id), ", \"minutiae\": ", t->minutiae.size(),
                                  ", \"format\": ", JsonQuote(fingerprint::TemplateFormatName(t->format)),
                                  MetadataFields(t->metadata), "}"));
    }
    entries.push_back(absl::StrCat("{\"subject\": ", JsonQuote(subject), ", \"templates\": [", absl::StrJoin(list, ", "),
                                   "]}"));
  }
  std::printf("[%s]\n", absl::StrJoin(entries, ",\n ").c_str());
  return missing == 0 ? 0 : 1;
}

int DeleteSubjects(const Args& args, fingerprint::FingerprintGallery& gallery) {
  std::vector<std::string> deleted, missing;
  int64_t templates = 0;
  for (const std::string& subject : args.positional()) {
    absl::StatusOr<int64_t> n = gallery.DeleteSubject(subject);
    if (n.ok()) {
      deleted.push_back(JsonQuote(subject));
      templates += *n;
    } else {
      std::fprintf(stderr, "tessera fp delete-subject: %s\n", n.status().ToString().c_str());
      missing.push_back(JsonQuote(subject));
    }
  }
  std::printf("{\"deleted_subjects\": [%s], \"deleted_templates\": %lld, \"not_found\": [%s], \"gallery_size\": %lld}\n",
              absl::StrJoin(deleted, ", ").c_str(), static_cast<long long>(templates),
              absl::StrJoin(missing, ", ").c_str(), static_cast<long long>(gallery.size()));
  return missing.empty() ? 0 : 1;
}

}  // namespace tessera::cli
