// `tessera fp chart`: why a candidate scored, for an examiner. Matches a
// probe against one candidate with LSS-R (match_explain.h: the searcher's
// score, the minutiae pairs it sums, their rigid alignment and residuals),
// draws the match chart (match_chart.h) as a PNG and prints the explanation
// as JSON.
//
//   tessera fp chart --probe P --candidate C --out chart.png [--json pairs.json] [--ppi N]
//                    [--gallery DIR]   (then C is an enrolled template id: its stored minutiae)
//                    [--probe-finger FGP] [--candidate-finger FGP] [--scale S] [--enhanced]
//
// P and C are each a fingerprint image (PNG, TIFF, BMP, JPEG, WSQ: extracted
// as `fp enroll` does, drawn on the decoded 500-ppi image, or the enhanced
// one with --enhanced), a template (ISO 19794-2, ANSI 378, xyt: first view;
// blank canvas) or an ANSI/NIST-ITL transaction (the finger --*-finger names:
// FGP, FGP_idcN or idcN when the transaction holds a finger twice; blank
// canvas), told apart by content. Exit 0 on success, 1 when an input cannot
// be read or matched, 2 for usage errors.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "common/durable_file.h"
#include "common/status.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/extract/match_chart.h"
#include "services/fingerprint/extract/minutiae_overlay.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/search/match_explain.h"
#include "services/fingerprint/store/gallery_store.h"

namespace tessera::cli {
namespace {

namespace fp = fingerprint;

std::vector<FlagSpec> ChartFlags() {
  return {
      {"probe", "", "the probe (latent): image, template or ANSI/NIST-ITL transaction"},
      {"candidate", "", "the candidate: image, template or ANSI/NIST-ITL transaction; with --gallery, an enrolled id"},
      {"gallery", "", "a gallery directory: --candidate names one of its templates (drawn on a blank canvas)"},
      {"out", "", "the chart, written as an RGB PNG"},
      {"json", "", "write the JSON summary here instead of stdout"},
      {"ppi", "0", "resolution of images that do not say theirs (0: the file's)"},
      {"probe-finger", "", "transaction probe: the finger, FGP (or FGP_idcN / idcN when it is there twice)"},
      {"candidate-finger", "", "transaction candidate: the finger, as --probe-finger"},
      {"scale", "1", "chart pixels per image pixel, 1-4"},
      {"enhanced", "", "draw images as the extractor's enhanced image instead of the decoded one", true},
  };
}

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out,
               "usage: tessera fp chart --probe P --candidate C --out chart.png [--json pairs.json] [--ppi N]\n"
               "                        [--probe-finger FGP] [--candidate-finger FGP] [--scale S] [--enhanced]\n"
               "  P, C: images (PNG, TIFF, BMP, JPEG, WSQ), templates (ISO, ANSI, xyt) or ANSI/NIST-ITL\n"
               "  transactions, told apart by content. Writes the match chart and prints the score, the paired\n"
               "  minutiae, their rigid alignment and residuals as JSON.\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// One side of the match: its minutiae (the matcher's input), what the chart
// draws them on, and where they came from.
struct Side {
  std::string source;  // "image", "template" or "transaction"
  std::string finger;  // the transaction finger chosen (FGP or FGP_idcN)
  fp::Template view;   // minutiae as a stored record holds them
  Image8 image;        // gray; empty for a blank canvas
  double ppi = 0;      // images: the resolution read or given
};

std::vector<fp::MinutiaPoint> Points(const fp::Template& t) {
  std::vector<fp::MinutiaPoint> out;
  for (const fp::Minutia& m : t.minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  return out;
}

absl::StatusOr<fp::Template> FirstView(absl::string_view record) {
  TESSERA_ASSIGN_OR_RETURN(
      std::vector<fp::Template> views,
      fp::ParseTemplateRecord(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(record.data()), record.size())));
  if (views.empty()) return absl::InvalidArgumentError("the record holds no finger view");
  return views[0];
}

Image8 GrayOf(const fp::GrayImage& g) {
  Image8 out = Image8::Make(g.width, g.height, 1);
  out.pixels = g.pixels;
  return out;
}

// A finger's name as `fp enroll` names it, without the file prefix.
std::string FingerLabel(const fp::TransactionFinger& f, bool repeated) {
  if (f.position <= 0) return absl::StrCat("idc", f.idc);
  return repeated ? absl::StrCat(f.position, "_idc", f.idc) : absl::StrCat(f.position);
}

// The finger `wanted` names (FGP, FGP_idcN or idcN; empty: the only one).
absl::StatusOr<Side> FromTransaction(const std::string& content, const std::string& wanted, const std::string& flag,
                                     const fp::ImageInput& input) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<fp::TransactionFinger> fingers, fp::TemplatesFromTransaction(content, input));
  std::vector<std::string> labels;
  std::vector<int> usable;
  for (size_t i = 0; i < fingers.size(); ++i) {
    int same = 0;
    for (const fp::TransactionFinger& g : fingers) same += g.position == fingers[i].position;
    labels.push_back(FingerLabel(fingers[i], same > 1));
    if (fingers[i].status.ok()) usable.push_back(static_cast<int>(i));
  }
  std::vector<std::string> usable_labels;
  for (int i : usable) usable_labels.push_back(labels[i]);
  const std::string choices = usable_labels.empty() ? "none" : absl::StrJoin(usable_labels, ", ");
  int chosen = -1;
  if (wanted.empty()) {
    if (usable.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("the transaction holds ", usable.size(),
                                                     " usable fingers (", choices, "): choose one with --", flag));
    }
    chosen = usable[0];
  } else {
    std::vector<int> matching;
    for (int i : usable) {
      const std::string& l = labels[i];
      // "7" names every FGP 7 ("7_idc3", "7_idc5": then ambiguous), "idc3" the finger of IDC 3.
      if (l == wanted || absl::StartsWith(l, absl::StrCat(wanted, "_idc")) ||
          (absl::StartsWith(wanted, "idc") && absl::EndsWith(l, absl::StrCat("_", wanted)))) {
        matching.push_back(i);
      }
    }
    if (matching.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", wanted, " names ", matching.size(),
                                                     " usable fingers of the transaction; it holds: ", choices));
    }
    chosen = matching[0];
  }
  Side side;
  side.source = "transaction";
  side.finger = labels[chosen];
  const std::vector<uint8_t>& record = fingers[chosen].record;
  TESSERA_ASSIGN_OR_RETURN(side.view, FirstView(std::string(record.begin(), record.end())));
  return side;
}

// An enrolled template of a gallery directory (read without its search
// index; FAILED_PRECONDITION while a server holds the gallery).
absl::StatusOr<Side> FromGallery(const std::string& dir, const std::string& id) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<fp::GalleryStore> store, fp::GalleryStore::Open(dir));
  std::shared_ptr<const fp::StoredTemplate> t = store->Get(id);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no template '", id, "' in gallery ", dir));
  Side side;
  side.source = "gallery";
  TESSERA_ASSIGN_OR_RETURN(side.view, FirstView(t->bytes));
  if (t->metadata.finger_position != 0) side.finger = std::to_string(t->metadata.finger_position);
  return side;
}

absl::StatusOr<Side> LoadSide(const std::string& path, const std::string& finger, const std::string& finger_flag,
                              const fp::ImageInput& input, bool enhanced) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, fp::ReadFileBytes(path));
  const std::string content(bytes.begin(), bytes.end());
  if (fp::LooksLikeTransaction(content)) return FromTransaction(content, finger, finger_flag, input);
  if (!finger.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", finger_flag, " is for ANSI/NIST-ITL transactions only"));
  }
  Side side;
  if (fp::LooksLikeImage(content)) {
    TESSERA_ASSIGN_OR_RETURN(fp::ImageTemplate t, fp::TemplateFromImage(content, input));
    side.source = "image";
    side.ppi = t.ppi;
    // The record's minutiae (angles in its units), as a gallery would match them.
    TESSERA_ASSIGN_OR_RETURN(side.view, FirstView(std::string(t.record.begin(), t.record.end())));
    side.image = enhanced ? fp::EnhancedImageGray(t.extraction) : GrayOf(t.image);
    return side;
  }
  side.source = "template";
  TESSERA_ASSIGN_OR_RETURN(side.view, FirstView(content));
  return side;
}

nlohmann::ordered_json PointJson(const fp::MinutiaPoint& m) {
  return {{"x", m.x}, {"y", m.y}, {"theta", m.theta}};
}

nlohmann::ordered_json SideJson(const std::string& path, const Side& s, int cylinders) {
  nlohmann::ordered_json j = {{"file", path}, {"source", s.source}};
  if (!s.finger.empty()) j["finger"] = s.finger;
  if (s.source == "image") j["ppi"] = s.ppi;
  j["minutiae"] = s.view.minutiae.size();
  j["valid_cylinders"] = cylinders;
  return j;
}

nlohmann::ordered_json ExplanationJson(const fp::MatchExplanation& e) {
  nlohmann::ordered_json j;
  j["units"] = "pixels of the matched template (500 ppi for images), x right, y down; angles radians, "
               "counterclockwise as displayed (ISO 19794-2)";
  j["score"] = e.score;
  j["np"] = e.np;
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (size_t k = 0; k < e.pairs.size(); ++k) {
    const fp::MatchedPair& p = e.pairs[k];
    pairs.push_back({{"pair", k + 1},
                     {"probe_index", p.probe_index},
                     {"candidate_index", p.gallery_index},
                     {"probe", PointJson(p.probe)},
                     {"candidate", PointJson(p.gallery)},
                     {"local_similarity", p.local_similarity},
                     {"relaxed_similarity", p.relaxed_similarity},
                     {"residual", p.residual}});
  }
  j["pairs"] = pairs;
  j["alignment"] = {{"valid", e.alignment.valid},
                    {"rotation", e.alignment.rotation},
                    {"rotation_degrees", e.alignment.rotation * 180 / M_PI},
                    {"tx", e.alignment.tx},
                    {"ty", e.alignment.ty},
                    {"maps", "candidate = R(rotation) probe + (tx, ty)"}};
  j["rms_residual"] = e.rms_residual;
  j["genuine_rms_bound"] = fp::kGenuineRmsResidualBound;
  j["within_genuine_bound"] = e.alignment.valid && e.rms_residual <= fp::kGenuineRmsResidualBound;
  return j;
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "tessera fp chart: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int RunFpChart(int argc, char** argv) {
  const std::vector<FlagSpec> specs = ChartFlags();
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera fp chart: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  for (const char* required : {"probe", "candidate", "out"}) {
    if (args->Get(required).empty()) {
      std::fprintf(stderr, "tessera fp chart: --%s is required\n", required);
      return Usage(specs, stderr, 2);
    }
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "tessera fp chart: unexpected argument '%s'\n", args->positional()[0].c_str());
    return Usage(specs, stderr, 2);
  }
  absl::StatusOr<int> ppi = args->GetInt("ppi");
  absl::StatusOr<int> scale = args->GetInt("scale");
  if (!ppi.ok() || *ppi < 0) {
    std::fprintf(stderr, "tessera fp chart: --ppi must be 0 or positive, got '%s'\n", args->Get("ppi").c_str());
    return 2;
  }
  if (!scale.ok() || *scale < 1 || *scale > 4) {
    std::fprintf(stderr, "tessera fp chart: --scale must be 1-4, got '%s'\n", args->Get("scale").c_str());
    return 2;
  }
  fp::ImageInput input;
  input.decode.ppi = *ppi;
  const bool enhanced = args->GetBool("enhanced");
  const std::string probe_path = args->Get("probe"), candidate_path = args->Get("candidate");
  absl::StatusOr<Side> probe = LoadSide(probe_path, args->Get("probe-finger"), "probe-finger", input, enhanced);
  if (!probe.ok()) return Fail(probe_path, probe.status());
  absl::StatusOr<Side> candidate =
      args->Get("gallery").empty()
          ? LoadSide(candidate_path, args->Get("candidate-finger"), "candidate-finger", input, enhanced)
          : FromGallery(args->Get("gallery"), candidate_path);
  if (!candidate.ok()) return Fail(candidate_path, candidate.status());

  absl::StatusOr<fp::MatchExplanation> e = fp::ExplainMatch(Points(probe->view), Points(candidate->view));
  if (!e.ok()) return Fail("match", e.status());

  fp::MatchChart chart;
  chart.probe = {absl::StrCat("PROBE ", BaseName(probe_path), probe->finger.empty() ? "" : " FGP ", probe->finger),
                 probe->image, probe->view.minutiae};
  chart.candidate = {
      absl::StrCat("CANDIDATE ", BaseName(candidate_path), candidate->finger.empty() ? "" : " FGP ", candidate->finger),
      candidate->image, candidate->view.minutiae};
  for (const fp::MatchedPair& p : e->pairs) chart.pairs.push_back({p.probe_index, p.gallery_index});
  chart.score = e->score;
  chart.aligned = e->alignment.valid;
  chart.rms_residual = e->rms_residual;
  chart.rotation = e->alignment.rotation;
  absl::StatusOr<Image8> img = fp::DrawMatchChart(chart, {*scale});
  if (!img.ok()) return Fail("chart", img.status());
  absl::StatusOr<std::string> png = EncodePngBytes(*img);
  if (!png.ok()) return Fail("chart", png.status());
  if (absl::Status s = WriteFileAtomically(args->Get("out"), *png); !s.ok()) return Fail(args->Get("out"), s);

  nlohmann::ordered_json summary;
  summary["probe"] = SideJson(probe_path, *probe, e->probe_cylinders);
  summary["candidate"] = SideJson(candidate_path, *candidate, e->gallery_cylinders);
  summary.update(ExplanationJson(*e));
  summary["chart"] = {{"file", args->Get("out")}, {"width", img->width}, {"height", img->height}};
  const std::string text = summary.dump(2) + "\n";
  if (args->Get("json").empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (absl::Status s = WriteFileAtomically(args->Get("json"), text); !s.ok()) return Fail(args->Get("json"), s);
  return 0;
}

}  // namespace tessera::cli
