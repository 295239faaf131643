// `tessera fp nist show FILE...`: an ANSI/NIST-ITL transaction (.an2, .an2k,
// .eft in the traditional encoding, or the 2011 XML encoding) as JSON: every record with its fields in file
// order (binary image data as its length and a SHA-256 prefix), the images
// the records describe, and the Type-9 minutiae (legacy NIST standard and
// EFS, in the file's own units). A malformed file prints the reader's message
// (record, IDC and field) on stderr and makes the exit code 1.
// `tessera fp nist convert IN OUT [--to xml|traditional]`: the same
// transaction in the other encoding (default: the one IN is not in).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/verbs.h"
#include "common/json.h"
#include "common/sha256.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/ansi_nist_xml.h"

namespace tessera::cli {
namespace {

namespace an = fingerprint::ansi_nist;

// Hex digits of the SHA-256 shown for binary data: enough to tell images apart.
constexpr size_t kDigestPrefix = 16;

std::string FieldJson(int type, const an::Field& f) {
  std::string out = absl::StrCat("{\"field\": ", JsonQuote(an::FieldLabel(type, f.number)));
  if (f.is_binary) {
    absl::StrAppend(&out, ", \"bytes\": ", f.binary.size(), ", \"sha256\": ",
                    JsonQuote(Sha256Hex(f.binary.data(), f.binary.size()).substr(0, kDigestPrefix)), "}");
    return out;
  }
  if (f.subfields.size() == 1 && f.subfields[0].size() == 1) {
    absl::StrAppend(&out, ", \"value\": ", JsonQuote(f.subfields[0][0]), "}");
    return out;
  }
  out += ", \"subfields\": [";
  for (size_t s = 0; s < f.subfields.size(); ++s) {
    out += s ? ", [" : "[";
    for (size_t i = 0; i < f.subfields[s].size(); ++i) {
      if (i) out += ", ";
      out += JsonQuote(f.subfields[s][i]);
    }
    out += "]";
  }
  out += "]}";
  return out;
}

std::string ImageJson(const an::ImageView& img) {
  std::string positions;
  for (size_t i = 0; i < img.positions.size(); ++i) absl::StrAppend(&positions, i ? ", " : "", img.positions[i]);
  return absl::StrCat("{\"record\": ", img.record_index, ", \"type\": ", img.record_type, ", \"idc\": ", img.idc,
                      ", \"positions\": [", positions, "], \"impression_type\": ", img.impression_type,
                      ", \"ppi\": ", img.ppi, ", \"width\": ", img.width, ", \"height\": ", img.height,
                      ", \"bits_per_pixel\": ", img.bits_per_pixel,
                      ", \"compression\": ", JsonQuote(an::CompressionName(img.compression)),
                      ", \"compression_code\": ", JsonQuote(img.compression_code), ", \"bytes\": ", img.data.size(),
                      ", \"sha256\": ", JsonQuote(Sha256Hex(img.data.data(), img.data.size()).substr(0, kDigestPrefix)),
                      "}");
}

std::string MinutiaeJson(const an::MinutiaeView& m) {
  std::string out = absl::StrCat("{\"record\": ", m.record_index, ", \"idc\": ", m.idc,
                                 ", \"impression_type\": ", m.impression_type, ", \"format\": ", JsonQuote(m.format));
  if (m.has_legacy) {
    absl::StrAppend(&out, ", \"legacy_count\": ", m.declared_count,
                    ", \"legacy_units\": \"x y in 0.01 mm from the bottom-left, theta degrees (NIST)\", \"legacy\": [");
    for (size_t i = 0; i < m.legacy.size(); ++i) {
      const an::LegacyMinutia& l = m.legacy[i];
      absl::StrAppend(&out, i ? ", " : "", "{\"index\": ", l.index, ", \"x\": ", l.x, ", \"y\": ", l.y,
                      ", \"theta\": ", l.theta, ", \"quality\": ", l.quality, ", \"type\": ",
                      JsonQuote(std::string(1, l.type)), "}");
    }
    out += "]";
  }
  if (m.has_roi) {
    absl::StrAppend(&out, ", \"roi\": {\"width\": ", m.roi_width, ", \"height\": ", m.roi_height, ", \"x\": ", m.roi_x,
                    ", \"y\": ", m.roi_y, "}");
  }
  if (m.has_efs) {
    absl::StrAppend(&out, ", \"efs_count\": ", m.efs.size(),
                    ", \"efs_units\": \"x y in 10 um from the ROI's top-left, theta degrees\", \"efs\": [");
    for (size_t i = 0; i < m.efs.size(); ++i) {
      const an::EfsMinutia& e = m.efs[i];
      absl::StrAppend(&out, i ? ", " : "", "{\"x\": ", e.x, ", \"y\": ", e.y, ", \"theta\": ", e.theta,
                      ", \"type\": ", JsonQuote(std::string(1, e.type)), "}");
    }
    out += "]";
  }
  out += "}";
  return out;
}

bool ReadWhole(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  *out = bytes.str();
  return true;
}

int Convert(const std::string& in_path, const std::string& out_path, const std::string& to) {
  std::string bytes;
  if (!ReadWhole(in_path, &bytes)) {
    std::fprintf(stderr, "tessera fp nist convert: cannot read %s\n", in_path.c_str());
    return 1;
  }
  const bool xml_in = an::LooksLikeXmlTransaction(bytes);
  const std::string target = to.empty() ? (xml_in ? "traditional" : "xml") : to;
  if (target != "xml" && target != "traditional") {
    std::fprintf(stderr, "tessera fp nist convert: --to takes xml or traditional, got '%s'\n", to.c_str());
    return 2;
  }
  auto t = an::ParseAnyTransaction(bytes);
  absl::StatusOr<std::string> written =
      !t.ok() ? absl::StatusOr<std::string>(t.status())
              : (target == "xml" ? an::WriteXmlTransaction(*t) : an::WriteTransaction(*t));
  if (!written.ok()) {
    std::fprintf(stderr, "tessera fp nist convert: %s: %s\n", in_path.c_str(),
                 std::string(written.status().message()).c_str());
    return 1;
  }
  std::ofstream out(out_path, std::ios::binary);
  out << *written;
  if (!out.good()) {
    std::fprintf(stderr, "tessera fp nist convert: cannot write %s\n", out_path.c_str());
    return 1;
  }
  std::printf("{\"in\": %s, \"out\": %s, \"encoding\": %s, \"records\": %zu, \"bytes\": %zu}\n",
              JsonQuote(in_path).c_str(), JsonQuote(out_path).c_str(), JsonQuote(target).c_str(), t->records.size(),
              written->size());
  return 0;
}

int Show(const std::string& path) {
  std::string bytes;
  if (!ReadWhole(path, &bytes)) {
    std::fprintf(stderr, "tessera fp nist show: cannot read %s\n", path.c_str());
    return 1;
  }
  auto t = an::ParseAnyTransaction(bytes);
  if (!t.ok()) {
    std::fprintf(stderr, "tessera fp nist show: %s: %s\n", path.c_str(), std::string(t.status().message()).c_str());
    return 1;
  }
  // Parsing validated the views: these cannot fail here.
  const auto images = an::Images(*t);
  const auto minutiae = an::Minutiae(*t);
  std::string out = absl::StrCat("{\"file\": ", JsonQuote(path), ", \"version\": ", JsonQuote(t->Version()),
                                 ",\n \"warnings\": [");
  for (size_t i = 0; i < t->warnings.size(); ++i) absl::StrAppend(&out, i ? ", " : "", JsonQuote(t->warnings[i]));
  out += "],\n \"records\": [";
  for (size_t r = 0; r < t->records.size(); ++r) {
    const an::Record& rec = t->records[r];
    absl::StrAppend(&out, r ? ",\n  " : "\n  ", "{\"record\": ", r + 1, ", \"type\": ", rec.type, ", \"idc\": ", rec.idc,
                    ", \"fields\": [");
    for (size_t f = 0; f < rec.fields.size(); ++f) {
      absl::StrAppend(&out, f ? ",\n    " : "\n    ", FieldJson(rec.type, rec.fields[f]));
    }
    out += "]}";
  }
  out += "],\n \"images\": [";
  for (size_t i = 0; images.ok() && i < images->size(); ++i) {
    absl::StrAppend(&out, i ? ",\n  " : "\n  ", ImageJson((*images)[i]));
  }
  out += "],\n \"minutiae\": [";
  for (size_t i = 0; minutiae.ok() && i < minutiae->size(); ++i) {
    absl::StrAppend(&out, i ? ",\n  " : "\n  ", MinutiaeJson((*minutiae)[i]));
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

int Usage(FILE* out, int rc) {
  std::fprintf(out,
               "usage: tessera fp nist show FILE...\n"
               "       tessera fp nist convert IN OUT [--to xml|traditional]\n"
               "  FILE: an ANSI/NIST-ITL transaction (.an2, .an2k, .eft in the traditional encoding, or the 2011\n"
               "  XML encoding). show prints its records and fields, images and Type-9 minutiae as JSON; convert\n"
               "  writes it in the other encoding (or --to's); exit 1 when a file is malformed.\n");
  return rc;
}

}  // namespace

int RunFpNist(int argc, char** argv) {
  if (argc < 2) return Usage(stderr, 2);
  const std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") return Usage(stdout, 0);
  if (sub == "convert") {
    std::vector<std::string> paths;
    std::string to;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--to" && i + 1 < argc) {
        to = argv[++i];
      } else if (a.rfind("--to=", 0) == 0) {
        to = a.substr(5);
      } else {
        paths.push_back(a);
      }
    }
    if (paths.size() != 2) return Usage(stderr, 2);
    return Convert(paths[0], paths[1], to);
  }
  if (sub != "show") {
    std::fprintf(stderr, "tessera fp nist: unknown subcommand '%s'\n", sub.c_str());
    return Usage(stderr, 2);
  }
  if (argc < 3) return Usage(stderr, 2);
  int rc = 0;
  for (int i = 2; i < argc; ++i) rc |= Show(argv[i]);
  return rc;
}

}  // namespace tessera::cli
