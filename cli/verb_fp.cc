// `tessera fp`: the fingerprint gallery on this machine, without a server
// (the same FingerprintGallery the service uses; a gallery directory is
// locked by one process at a time).
//
//   tessera fp enroll --gallery DIR [--ids a,b,...] [--replace] FILES...
//   tessera fp search --gallery DIR [--top K] [--matcher lssr|dmc|fusion|cascade]
//                     [--cascade-candidates N] LATENT...
//   tessera fp extract --out DIR [--format iso|ansi] [--overlay] IMAGES...
//
// FILES and LATENTs are templates, images (WSQ, PNG, TIFF, BMP, JPEG) or
// ANSI/NIST-ITL transactions (.an2/.an2k/.eft: one template per finger, id
// or name <file>_<FGP>, an examiner's Type-9 markup used as given), told
// apart by content; images are extracted first (image_template.h), refused
// below --min-quality, with --ppi for files that do not say their resolution.
//   tessera fp delete --gallery DIR IDS...
//   tessera fp subjects --gallery DIR; fp subject --gallery DIR SUBJECTS...;
//   fp delete-subject --gallery DIR SUBJECTS...
// Subjects (fp_subjects.h): enroll --subject/--finger/--impression/--attr
// store whose finger a template is (a transaction's fingers get its TCN as
// subject, their FGP and IMP); search --finger-positions/--impression-types
// restricts the candidates, and a ten-print card file is searched finger by
// finger and fused per subject (--fusion sum|max).
//   tessera fp nist show FILE...  (verb_fp_nist.cc)
//   tessera fp list   --gallery DIR
//   tessera fp check  --gallery DIR   (offline verification, hash chain included; changes nothing)
//
// Every subcommand prints JSON on stdout; errors go to stderr and a failed
// item makes the exit code 1 (usage errors: 2).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "cli/fp_subjects.h"
#include "cli/verbs.h"
#include "common/durable_file.h"
#include "common/json.h"
#include "common/parallel.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/extract/minutiae_overlay.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/search/tenprint_search.h"
#include "services/fingerprint/transaction_enroll.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera::cli {
namespace {

using fingerprint::TemplateFormat;

std::vector<FlagSpec> FpFlags() {
  std::vector<FlagSpec> flags = {
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
      {"out", "", "extract: directory for the templates (<name>.iso or .ansi) and overlays (<name>.overlay.png)"},
      {"overlay", "", "extract: also write each image's minutiae drawn on its enhanced image", true},
      {"min-quality", "0", "images of lower quality (0-100) are refused (enroll, search) or flagged (extract)"},
      {"ppi", "0", "resolution of images that do not say theirs (0: the file's)"},
      {"expect-head", "", "check: N:HEX, the \"head\" an earlier fp check printed (kept elsewhere): exit 1 if records were "
                          "cut from the end or rewritten"},
  };
  for (FlagSpec& f : FpSubjectFlags()) flags.push_back(std::move(f));
  return flags;
}

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out,
               "usage: tessera fp enroll --gallery DIR [--ids a,b,...] [--replace] FILES...\n"
               "       tessera fp search --gallery DIR [--top K] [--matcher lssr|dmc|fusion|cascade]\n"
               "                         [--cascade-candidates N] LATENT...\n"
               "       tessera fp extract --out DIR [--format iso|ansi] [--overlay] [--min-quality Q] IMAGES...\n"
               "       (templates or images: WSQ, PNG, TIFF, BMP, JPEG, told apart by content; [--min-quality Q]\n"
               "        [--ppi N] for images)\n"
               "       tessera fp delete --gallery DIR IDS...\n"
               "       tessera fp nist show FILE...   (ANSI/NIST-ITL transaction as JSON)\n"
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

// --min-quality and --ppi as extractor input.
absl::StatusOr<fingerprint::ImageInput> ImageInputFromFlags(const Args& args) {
  absl::StatusOr<int> min_quality = args.GetInt("min-quality");
  absl::StatusOr<int> ppi = args.GetInt("ppi");
  if (!min_quality.ok() || *min_quality < 0 || *min_quality > 100) {
    return absl::InvalidArgumentError(absl::StrCat("--min-quality must be 0-100, got '", args.Get("min-quality"), "'"));
  }
  if (!ppi.ok() || *ppi < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ppi must be 0 or positive, got '", args.Get("ppi"), "'"));
  }
  fingerprint::ImageInput input;
  input.min_quality = *min_quality;
  input.decode.ppi = *ppi;
  return input;
}

// What one file holds, parsed: one template (a template or image file) or
// one per finger (an ANSI/NIST-ITL transaction), each with its name.
struct NamedTemplate {
  std::string name;
  absl::StatusOr<fingerprint::ParsedTemplate> parsed;
};

// A transaction's fingers, named as the service names them (FingerTemplateIds).
std::vector<NamedTemplate> TemplatesOfCard(const std::string& file, const fingerprint::TransactionCard& card) {
  const std::vector<fingerprint::TransactionFinger>* fingers = &card.fingers;
  const std::vector<std::string> names = fingerprint::FingerTemplateIds(Stem(file), *fingers);
  std::vector<NamedTemplate> out;
  for (size_t i = 0; i < fingers->size(); ++i) {
    const fingerprint::TransactionFinger& f = (*fingers)[i];
    const std::string& name = names[i];
    if (!f.status.ok()) {
      out.push_back({name, f.status});
      continue;
    }
    const std::string record(f.record.begin(), f.record.end());
    NamedTemplate t{name, fingerprint::ParseProbeOrTemplate(record, TemplateFormat::kIso19794)};
    if (t.parsed.ok()) {
      t.parsed->quality = f.quality;
      t.parsed->extracted_record = record;
    }
    out.push_back(std::move(t));
  }
  return out;
}

// The probes of one file: its templates, or a ten-print card (a transaction
// that is not a latent submission, IsLatentSubmission) searched as a whole.
struct FileProbes {
  std::vector<NamedTemplate> templates;
  std::optional<fingerprint::TransactionCard> card;
  fingerprint::TransactionProbes card_probes;  // with `card`: its searchable fingers
};

FileProbes ProbesOfFile(const std::string& file, const std::string& format_flag,
                        const fingerprint::ImageInput& image_input) {
  absl::StatusOr<TemplateFormat> format = FormatFor(format_flag, file);
  absl::StatusOr<std::vector<uint8_t>> bytes =
      format.ok() ? fingerprint::ReadFileBytes(file) : absl::StatusOr<std::vector<uint8_t>>(format.status());
  if (!bytes.ok()) return {{{Stem(file), bytes.status()}}, std::nullopt, {}};
  const std::string content(bytes->begin(), bytes->end());
  if (fingerprint::LooksLikeImage(content)) {
    return {{{Stem(file), fingerprint::ParseImageTemplate(content, image_input)}}, std::nullopt, {}};
  }
  if (!fingerprint::LooksLikeTransaction(content)) {
    return {{{Stem(file), fingerprint::ParseProbeOrTemplate(content, *format)}}, std::nullopt, {}};
  }
  absl::StatusOr<fingerprint::TransactionCard> card = fingerprint::ReadTransactionCard(content, image_input);
  if (!card.ok()) return {{{Stem(file), card.status()}}, std::nullopt, {}};
  fingerprint::TransactionProbes probes = fingerprint::SearchableProbes(*card);
  if (!probes.latent) return {{}, std::move(*card), std::move(probes)};
  return {TemplatesOfCard(file, *card), std::nullopt, {}};
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

int Enroll(const Args& args, const fingerprint::ImageInput& image_input, fingerprint::FingerprintGallery& gallery) {
  const std::vector<std::string>& files = args.positional();
  absl::StatusOr<fingerprint::TemplateMetadata> metadata = MetadataFromFlags(args);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> attributes = AttributesFromFlags(args);
  if (!metadata.ok() || !attributes.ok()) {
    std::fprintf(stderr, "tessera fp enroll: %s\n",
                 std::string((metadata.ok() ? attributes.status() : metadata.status()).message()).c_str());
    return 2;
  }
  std::vector<std::string> ids = absl::StrSplit(args.Get("ids"), ',', absl::SkipEmpty());
  if (!ids.empty() && ids.size() != files.size()) {
    std::fprintf(stderr, "tessera fp enroll: %zu ids for %zu files\n", ids.size(), files.size());
    return 2;
  }
  std::vector<std::string> errors, skipped;
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
      fingerprint::EnrollItem item{id, std::string(bytes->begin(), bytes->end()), *format, 0};
      if (fingerprint::LooksLikeTransaction(item.bytes)) {
        // One template per finger, id <id>_<FGP>, with the card's subject
        // (--subject, else its TCN), finger positions and impression types:
        // what EnrollTransaction enrolls.
        absl::StatusOr<fingerprint::TransactionCard> card = fingerprint::ReadTransactionCard(item.bytes, image_input);
        absl::StatusOr<fingerprint::TransactionEnrollment> plan =
            card.ok() ? fingerprint::PlanTransactionEnroll(*card, args.Get("subject"), id, *attributes)
                      : absl::StatusOr<fingerprint::TransactionEnrollment>(card.status());
        if (!plan.ok()) {
          errors.push_back(ErrorJson("file", files[i], plan.status()));
          continue;
        }
        for (size_t f = 0; f < card->fingers.size(); ++f) {
          const absl::Status& status = card->fingers[f].status;
          if (status.ok()) continue;
          // A slap (multi-finger image) is listed, not a failure.
          (status.code() == absl::StatusCode::kUnimplemented ? skipped : errors)
              .push_back(ErrorJson("file", absl::StrCat(files[i], "#", plan->ids[f]), status));
        }
        for (fingerprint::EnrollItem& finger : plan->items) {
          items.push_back(std::move(finger));
          where.push_back(i);
        }
        continue;
      }
      item.metadata = *metadata;
      if (fingerprint::LooksLikeImage(item.bytes)) item.image = image_input;
      items.push_back(std::move(item));
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
  std::printf("{\"gallery\": %s, \"enrolled\": %lld, \"failed\": [%s], %s\"gallery_size\": %lld}\n",
              JsonQuote(args.Get("gallery")).c_str(), static_cast<long long>(enrolled),
              absl::StrJoin(errors, ", ").c_str(),
              skipped.empty() ? "" : absl::StrCat("\"skipped\": [", absl::StrJoin(skipped, ", "), "], ").c_str(),
              static_cast<long long>(gallery.size()));
  return errors.empty() ? 0 : 1;
}

int Search(const Args& args, const fingerprint::ImageInput& image_input, fingerprint::FingerprintGallery& gallery) {
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
  absl::StatusOr<fingerprint::TemplateFilter> filter = FilterFromFlags(args);
  if (!filter.ok() || !fingerprint::ParseTenPrintFusion(args.Get("fusion")).ok()) {
    std::fprintf(stderr, "tessera fp search: %s\n",
                 std::string((filter.ok() ? fingerprint::ParseTenPrintFusion(args.Get("fusion")).status()
                                          : filter.status()).message()).c_str());
    return 2;
  }
  const std::vector<std::string>& files = args.positional();
  // Probes parsed (images extracted) on all cores, in file order; a latent
  // transaction gives one probe per finger, a ten-print card is searched whole.
  std::vector<FileProbes> per_file(files.size());
  ParallelForDynamic(static_cast<int64_t>(files.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) per_file[i] = ProbesOfFile(files[i], args.Get("format"), image_input);
  });
  std::vector<std::string> card_entries;
  int card_errors = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!per_file[i].card) continue;
    absl::StatusOr<std::string> entry =
        TenPrintSearchJson(Stem(files[i]), *per_file[i].card, per_file[i].card_probes, args, *top, gallery.searcher());
    if (entry.ok()) {
      card_entries.push_back(std::move(*entry));
    } else {
      ++card_errors;
      card_entries.push_back(ErrorJson("probe", Stem(files[i]), entry.status()));
      std::fprintf(stderr, "tessera fp search: %s: %s\n", files[i].c_str(), entry.status().ToString().c_str());
    }
  }
  std::vector<NamedTemplate> named;
  for (auto& f : per_file) {
    for (NamedTemplate& t : f.templates) {
      if (t.parsed.status().code() == absl::StatusCode::kUnimplemented) {  // a slap of a card: not searched
        std::fprintf(stderr, "tessera fp search: %s skipped: %s\n", t.name.c_str(),
                     std::string(t.parsed.status().message()).c_str());
        continue;
      }
      named.push_back(std::move(t));
    }
  }
  std::vector<std::vector<fingerprint::MinutiaPoint>> probes;
  std::vector<size_t> where;
  std::vector<int> qualities;
  for (size_t i = 0; i < named.size(); ++i) {
    absl::StatusOr<fingerprint::ParsedTemplate>& parsed = named[i].parsed;
    if (!parsed.ok()) {
      std::fprintf(stderr, "tessera fp search: %s: %s\n", named[i].name.c_str(), parsed.status().ToString().c_str());
      continue;
    }
    probes.push_back(std::move(parsed->minutiae));
    qualities.push_back(parsed->quality);
    where.push_back(i);
  }
  fingerprint::SearchOptions options;
  options.top_k = *top;
  options.matcher = args.Get("matcher");
  options.filter = *filter;
  absl::StatusOr<std::vector<std::vector<fingerprint::SearchCandidate>>> results =
      gallery.Search(probes, options);
  if (!results.ok()) {
    std::fprintf(stderr, "tessera fp search: %s\n", results.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> entries(named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    if (!named[i].parsed.ok()) entries[i] = ErrorJson("probe", named[i].name, named[i].parsed.status());
  }
  for (size_t j = 0; j < where.size(); ++j) {
    std::vector<std::string> candidates;
    for (const fingerprint::SearchCandidate& c : (*results)[j]) candidates.push_back(CandidateJson(c));
    entries[where[j]] = absl::StrCat("{\"probe\": ", JsonQuote(named[where[j]].name),
                                     qualities[j] >= 0 ? absl::StrCat(", \"quality\": ", qualities[j]) : "",
                                     ", \"candidates\": [", absl::StrJoin(candidates, ", "), "]}");
  }
  for (std::string& e : card_entries) entries.push_back(std::move(e));
  std::printf("[%s%s%s]\n", entries.empty() ? "" : "\n  ", absl::StrJoin(entries, ",\n  ").c_str(),
              entries.empty() ? "" : "\n");
  return where.size() == named.size() && card_errors == 0 ? 0 : 1;
}

// One image's extraction written under --out: the template (and overlay);
// the JSON entry describing it.
absl::StatusOr<std::string> ExtractOne(const std::string& file, const fingerprint::ImageInput& input,
                                       TemplateFormat format, const std::string& out_dir, bool overlay) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, fingerprint::ReadFileBytes(file));
  // Flag, not refuse: the examiner sees the quality and the overlay.
  fingerprint::ImageInput flag_only = input;
  flag_only.min_quality = 0;
  TESSERA_ASSIGN_OR_RETURN(
      fingerprint::ImageTemplate t,
      fingerprint::TemplateFromImage(absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                     flag_only, format));
  const std::string stem = absl::StrCat(out_dir, "/", Stem(file));
  const std::string record_path = absl::StrCat(stem, format == TemplateFormat::kAnsi378 ? ".ansi" : ".iso");
  TESSERA_RETURN_IF_ERROR(WriteFileAtomically(record_path, std::string(t.record.begin(), t.record.end())));
  std::string overlay_json;
  if (overlay) {
    const std::string overlay_path = absl::StrCat(stem, ".overlay.png");
    TESSERA_RETURN_IF_ERROR(WritePng(fingerprint::DrawMinutiaeOverlay(t.extraction, 2), overlay_path));
    overlay_json = absl::StrCat(", \"overlay\": ", JsonQuote(overlay_path));
  }
  return absl::StrFormat(
      "{\"image\": %s, \"template\": %s, \"minutiae\": %d, \"quality\": %d, \"below_min_quality\": %s, "
      "\"image_format\": %s, \"width\": %d, \"height\": %d, \"ppi\": %g%s}",
      JsonQuote(file), JsonQuote(record_path), static_cast<int>(t.extraction.view.minutiae.size()), t.quality.score,
      fingerprint::CheckImageQuality(t.quality.score, input.min_quality).ok() ? "false" : "true",
      JsonQuote(std::string(fingerprint::ImageFormatName(t.image_format))), t.width, t.height, t.ppi, overlay_json);
}

// Images to templates under --out, on all cores; exit 1 if any failed.
int Extract(const Args& args, const fingerprint::ImageInput& input) {
  const std::string out_dir = args.Get("out");
  if (out_dir.empty()) {
    std::fprintf(stderr, "tessera fp extract: --out is required\n");
    return 2;
  }
  const std::string name = args.Get("format") == "auto" ? "iso" : args.Get("format");
  absl::StatusOr<TemplateFormat> format = fingerprint::ParseTemplateFormatName(name);
  if (!format.ok() || (*format != TemplateFormat::kIso19794 && *format != TemplateFormat::kAnsi378)) {
    std::fprintf(stderr, "tessera fp extract: --format must be iso or ansi, got '%s'\n", name.c_str());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "tessera fp extract: cannot create %s: %s\n", out_dir.c_str(), ec.message().c_str());
    return 1;
  }
  const std::vector<std::string>& files = args.positional();
  // Outputs are named by the image's stem: two images must not share one.
  std::map<std::string, std::string> by_stem;
  for (const std::string& f : files) {
    auto [it, fresh] = by_stem.emplace(Stem(f), f);
    if (!fresh) {
      std::fprintf(stderr, "tessera fp extract: %s and %s would both write %s/%s.*: extract them into different --out "
                           "directories\n", it->second.c_str(), f.c_str(), out_dir.c_str(), it->first.c_str());
      return 2;
    }
  }
  std::vector<std::string> entries(files.size());
  std::vector<bool> failed(files.size(), false);
  ParallelForDynamic(static_cast<int64_t>(files.size()), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      absl::StatusOr<std::string> entry = ExtractOne(files[i], input, *format, out_dir, args.GetBool("overlay"));
      failed[i] = !entry.ok();
      entries[i] = entry.ok() ? *entry : ErrorJson("image", files[i], entry.status());
    }
  });
  int errors = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!failed[i]) continue;
    ++errors;
    std::fprintf(stderr, "tessera fp extract: %s\n", entries[i].c_str());
  }
  std::printf("[\n  %s\n]\n", absl::StrJoin(entries, ",\n  ").c_str());
  return errors == 0 ? 0 : 1;
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
  if (sub == "nist") return RunFpNist(argc - 1, argv + 1);  // its own flags (verb_fp_nist.cc)
  if (sub == "chart") return RunFpChart(argc - 1, argv + 1);  // its own flags (verb_fp_chart.cc)
  auto args = Args::Parse(specs, argc, argv, 2);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera fp: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  if (sub != "enroll" && sub != "search" && sub != "delete" && sub != "list" && sub != "check" && sub != "compact" &&
      sub != "extract" && sub != "subjects" && sub != "subject" && sub != "delete-subject") {
    std::fprintf(stderr, "tessera fp: unknown subcommand '%s'\n", sub.c_str());
    return Usage(specs, stderr, 2);
  }
  absl::StatusOr<fingerprint::ImageInput> image_input = ImageInputFromFlags(*args);
  if (!image_input.ok()) {
    std::fprintf(stderr, "tessera fp %s: %s\n", sub.c_str(), std::string(image_input.status().message()).c_str());
    return 2;
  }
  if (sub == "extract") {
    if (args->positional().empty()) {
      std::fprintf(stderr, "tessera fp extract: nothing given\n");
      return Usage(specs, stderr, 2);
    }
    return Extract(*args, *image_input);
  }
  if (args->Get("gallery").empty()) {
    std::fprintf(stderr, "tessera fp %s: --gallery is required\n", sub.c_str());
    return 2;
  }
  if (sub == "check") return Check(args->Get("gallery"), args->Get("expect-head"));
  if (sub != "list" && sub != "compact" && sub != "subjects" && args->positional().empty()) {
    std::fprintf(stderr, "tessera fp %s: nothing given\n", sub.c_str());
    return Usage(specs, stderr, 2);
  }
  auto gallery = OpenGallery(*args);
  if (!gallery.ok()) {
    std::fprintf(stderr, "tessera fp %s: %s\n", sub.c_str(), gallery.status().ToString().c_str());
    return 1;
  }
  if (sub == "enroll") return Enroll(*args, *image_input, **gallery);
  if (sub == "search") return Search(*args, *image_input, **gallery);
  if (sub == "delete") return Delete(*args, **gallery);
  if (sub == "compact") return Compact(**gallery);
  if (sub == "subjects") return ListSubjects(**gallery);
  if (sub == "subject") return ShowSubjects(*args, **gallery);
  if (sub == "delete-subject") return DeleteSubjects(*args, **gallery);
  return List(**gallery);
}

}  // namespace tessera::cli
