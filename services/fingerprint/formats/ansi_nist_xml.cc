#include "services/fingerprint/formats/ansi_nist_xml.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "services/fingerprint/formats/xml_tree.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

// ---- the element mapping ----------------------------------------------------
//
// Field        Element (path from the record element; <img> is the record's image
//              element: Type-4 biom:FingerprintImage, Type-13 biom:FrictionRidgeImage
//              (also read: FingerImpressionImage, PalmprintImage, PlantarImage),
//              Type-14 biom:FingerImpressionImage, Type-15 biom:PalmprintImage)
// x.001        biom:RecordCategoryCode (the record type; LEN is computed)
// x.002 IDC    biom:ImageReferenceIdentification/nc:IdentificationID
// Type-1, below biom:Transaction:
// 1.002 VER    biom:TransactionMajorVersionValue + biom:TransactionMinorVersionValue
// 1.003 CNT    biom:TransactionContentSummary (ContentFirstRecordCategoryCode,
//              ContentRecordQuantity, ContentRecordSummary: IDC and RecordCategoryCode)
// 1.004 TOT    biom:TransactionCategoryCode
// 1.005 DAT    biom:TransactionDate/nc:Date (YYYY-MM-DD)
// 1.006 PRY    biom:TransactionPriorityValue
// 1.007 DAI    biom:TransactionDestinationOrganization/nc:OrganizationIdentification/nc:IdentificationID
// 1.008 ORI    biom:TransactionOriginatingOrganization/nc:OrganizationIdentification/nc:IdentificationID
// 1.009 TCN    biom:TransactionControlIdentification/nc:IdentificationID
// 1.010 TCR    biom:TransactionControlReferenceIdentification/nc:IdentificationID
// 1.011 NSR    biom:TransactionImageResolutionDetails/biom:NativeScanningResolutionValue
// 1.012 NTR    biom:TransactionImageResolutionDetails/biom:NominalTransmittingResolutionValue
// 1.013 DOM    biom:TransactionDomain (TransactionDomainName, DomainVersionNumberIdentification)
// 1.014 GMT    biom:TransactionUTCDate/nc:DateTime (YYYY-MM-DDThh:mm:ssZ)
// 1.015 DCS    biom:TransactionCharacterSetDirectory, one per subfield
// 1.016 APS    biom:TransactionApplicationProfile, one per subfield
// 1.017 ANM    the two organizations' nc:OrganizationName
// 1.018 GNS    biom:TransactionGeographicNameSetCode
// Type-4 (binary header fields), below <img>:
// 4.003 IMP    biom:FingerprintImageImpressionCaptureCategoryCode
// 4.004 FGP    biom:FingerprintImagePosition/biom:FingerPositionCode (1-6; unused 255s dropped)
// 4.005 ISR    biom:ImageCaptureDetail/biom:CaptureResolutionCode
// 4.006/4.007  biom:ImageHorizontalLineLengthPixelQuantity / ...Vertical...
// 4.008 GCA    biom:ImageCompressionAlgorithmCode
// Type-9:
// 9.003 IMP    biom:MinutiaeImpressionCaptureCategoryCode
// 9.004 FMT    biom:MinutiaeFormatNISTStandardIndicator (S true, U false)
// 9.005 OFR    itl:Minutiae/itl:MinutiaeNISTStandard/biom:MinutiaeReadingSystem
// 9.006 FGP    itl:Minutiae/biom:MinutiaeFingerPositionCode (palm codes 20-38: ...PalmPositionCode)
// 9.007 FPC    itl:Minutiae/itl:MinutiaeFingerPatternDetail
// 9.008 CRP    itl:Minutiae/biom:MinutiaeFingerCorePosition (XXXXYYYY split)
// 9.009 DLT    itl:Minutiae/biom:MinutiaeFingerDeltaPosition
// 9.010 MIN    itl:Minutiae/itl:MinutiaeNISTStandard/biom:MinutiaeQuantity
// 9.011 RDG    itl:Minutiae/itl:MinutiaeNISTStandard/biom:MinutiaeRidgeCountIndicator (1 true, 0 false)
// 9.012 MRC    itl:Minutiae/itl:MinutiaeNISTStandard/itl:MinutiaDetail, one per minutia
//              (XXXXYYYYTTT split into Position{Horizontal,Vertical}CoordinateValue and
//              PositionThetaAngleMeasure; ridge counts "n,c" as biom:MinutiaRidgeCount)
// 9.300 ROI    biom:ExtendedFeatureSetMinutiae/biom:FrictionRidgeImageRegionOfInterest
//              (ImageSegment{Width,Height,HorizontalOffset,VerticalOffset}Measure, ImageSegmentPolygon)
// 9.331 MIN    biom:ExtendedFeatureSetMinutiae/biom:EFSMinutia, one per minutia
// Types 13, 14, 15, below <img>:
// x.003 IMP    biom:FingerprintImageImpressionCaptureCategoryCode (also read:
//              biom:FrictionRidgeImageImpressionCaptureCategoryCode)
// x.004 SRC    biom:ImageCaptureDetail/biom:CaptureOrganization/nc:OrganizationIdentification/nc:IdentificationID
// x.005 date   biom:ImageCaptureDetail/biom:CaptureDate/nc:Date
// x.006-x.012  HLL, VLL, SLC biom:ImageScaleUnitsCode, THPS biom:ImageHorizontalPixelDensityValue,
//              TVPS ...Vertical..., CGA biom:ImageCompressionAlgorithmText, BPX biom:ImageBitsPerPixelQuantity
// x.013 FGP    Type-13 biom:FrictionRidgePositionCode, Type-14 biom:FingerPositionCode,
//              Type-15 biom:PalmPositionCode, one per subfield
// x.014 SPD    biom:FingerprintImageMajorCasePrint (FingerPositionCode, MajorCasePrintCode)   (13, 14)
// x.015 PPC    biom:FingerprintImageMajorCasePrint/biom:MajorCasePrintSegmentOffset          (13, 14)
// x.020 COM    biom:ImageCommentText
// 14.022 NQM   biom:FingerprintImageNISTQuality
// x.024 quality  Type-13 biom:FrictionRidgeImageQuality, 14 biom:FingerprintImageQuality,
//              15 biom:PalmprintImageQuality (position, QualityValue, vendor and product IDs)
// x.999 DATA   nc:BinaryBase64Object
// Any other field: tsr:Fields/tsr:Field (ansi_nist_xml.h).

constexpr absl::string_view kItl2008Namespace = "http://biometrics.nist.gov/standard/2-2008";
constexpr absl::string_view kPackage = "NISTBiometricInformationExchangePackage";
constexpr size_t kLookLimit = size_t{64} << 10;

enum Ns { kItl, kBiom, kNc, kTsr };

absl::string_view Uri(Ns ns) {
  switch (ns) {
    case kItl:
      return kItlNamespace;
    case kBiom:
      return kBiomNamespace;
    case kNc:
      return kNcNamespace;
    case kTsr:
      break;
  }
  return kFieldsNamespace;
}

absl::string_view PrefixOf(Ns ns) {
  switch (ns) {
    case kItl:
      return "itl";
    case kBiom:
      return "biom";
    case kNc:
      return "nc";
    case kTsr:
      break;
  }
  return "tsr";
}

struct Step {
  Ns ns;
  std::string local;
};
using StepPath = std::vector<Step>;

// "biom:A/nc:B": only ever called on this file's constant strings.
StepPath Steps(absl::string_view path) {
  StepPath out;
  if (path.empty()) return out;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    const size_t colon = part.find(':');
    const absl::string_view prefix = part.substr(0, colon);
    const Ns ns = prefix == "itl" ? kItl : prefix == "biom" ? kBiom : prefix == "nc" ? kNc : kTsr;
    out.push_back({ns, std::string(part.substr(colon + 1))});
  }
  return out;
}

struct RecordKind {
  int type;
  const char* element;
  bool covered;
};

constexpr RecordKind kRecordKinds[] = {
    {1, "PackageInformationRecord", true},
    {2, "PackageDescriptiveTextRecord", true},
    {3, "PackageLowResolutionGrayscaleImageRecord", false},
    {4, "PackageHighResolutionGrayscaleImageRecord", true},
    {5, "PackageLowResolutionBinaryImageRecord", false},
    {6, "PackageHighResolutionBinaryImageRecord", false},
    {7, "PackageUserDefinedImageRecord", false},
    {8, "PackageSignatureImageRecord", false},
    {9, "PackageMinutiaeRecord", true},
    {10, "PackageFacialAndSMTImageRecord", false},
    {11, "PackageVoiceDataRecord", false},
    {12, "PackageForensicDentalDataRecord", false},
    {13, "PackageLatentImageRecord", true},
    {14, "PackageFingerprintImageRecord", true},
    {15, "PackagePalmprintImageRecord", true},
    {16, "PackageUserDefinedTestingImageRecord", false},
    {17, "PackageIrisImageRecord", false},
    {18, "PackageDNARecord", false},
    {19, "PackagePlantarImageRecord", false},
    {20, "PackageSourceRepresentationRecord", false},
    {21, "PackageAssociatedContextRecord", false},
    {22, "PackageNonPhotographicImageryRecord", false},
    {98, "PackageInformationAssuranceRecord", false},
    {99, "PackageCBEFFBiometricDataRecord", false},
};

const RecordKind* KindByElement(absl::string_view local) {
  for (const RecordKind& k : kRecordKinds) {
    if (local == k.element) return &k;
  }
  return nullptr;
}

const RecordKind* KindByType(int type) {
  for (const RecordKind& k : kRecordKinds) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

bool IsImageType(int type) { return type == 4 || type == 13 || type == 14 || type == 15; }

// The image element the writer uses for a record type ("" for none).
absl::string_view ImageElement(int type) {
  switch (type) {
    case 4:
      return "FingerprintImage";
    case 13:
      return "FrictionRidgeImage";
    case 14:
      return "FingerImpressionImage";
    case 15:
      return "PalmprintImage";
    default:
      return "";
  }
}

// The image elements the reader accepts (Type-13: the 2013 FrictionRidgeImage
// and the three it replaced).
std::vector<absl::string_view> ImageElementsRead(int type) {
  if (type == 13) return {"FrictionRidgeImage", "FingerImpressionImage", "PalmprintImage", "PlantarImage"};
  const absl::string_view e = ImageElement(type);
  if (e.empty()) return {};
  return {e};
}

// ---- small helpers ------------------------------------------------------------

std::string Shown(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 32)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 32) out += "...";
  return out;
}

bool IsXmlSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

absl::string_view TrimXml(absl::string_view s) {
  while (!s.empty() && IsXmlSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsXmlSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Unsigned decimal of 1..max_digits digits.
bool ParseNumber(absl::string_view s, size_t max_digits, int* v) {
  if (s.size() > max_digits || !AllDigits(s)) return false;
  int r = 0;
  for (char c : s) r = r * 10 + (c - '0');
  *v = r;
  return true;
}

std::string ZeroPad(absl::string_view digits, size_t width) {
  std::string out(width > digits.size() ? width - digits.size() : 0, '0');
  out.append(digits.data(), digits.size());
  return out;
}

Field TextField1(int number, std::string value) {
  Field f;
  f.number = number;
  f.subfields.push_back({std::move(value)});
  return f;
}

// Base64 (RFC 4648, standard alphabet, padded), XML whitespace anywhere
// ignored. "" on success, else why not.
std::string DecodeBase64(absl::string_view text, std::string* out) {
  static const auto* const kValue = [] {
    auto* t = new std::array<int8_t, 256>();
    t->fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) (*t)[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  out->clear();
  out->reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t symbols = 0, padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (IsXmlSpace(c)) continue;
    if (c == '=') {
      ++padding;
      ++symbols;
      continue;
    }
    const int8_t v = (*kValue)[static_cast<uint8_t>(c)];
    if (v < 0 || padding > 0) {
      return absl::StrCat(v < 0 ? "character '" : "data after the padding at '", Shown(text.substr(i, 1)),
                          "' (offset ", i, ") is not base64");
    }
    ++symbols;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (symbols % 4 != 0 || padding > 2) {
    return absl::StrCat("base64 of ", symbols, " symbols (", padding, " padding) is not whole groups of 4");
  }
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return "base64 with stray bits before the padding";
  return "";
}

// ---- errors -------------------------------------------------------------------

struct Ctx {
  int type = 0;
  int index = 0;
  int idc = -1;
};

absl::Status XmlError(const Ctx* ctx, const XmlElement& e, int field, absl::string_view message) {
  std::string s = "ANSI/NIST XML: ";
  if (ctx != nullptr) absl::StrAppend(&s, RecordName(ctx->type, ctx->index, ctx->idc), ": ");
  absl::StrAppend(&s, e.Path());
  if (e.line > 0) absl::StrAppend(&s, " (line ", e.line, ")");
  if (field > 0 && ctx != nullptr) absl::StrAppend(&s, ": field ", FieldLabel(ctx->type, field));
  absl::StrAppend(&s, ": ", message);
  return absl::InvalidArgumentError(s);
}

std::string Expected(const Step& s) { return absl::StrCat(PrefixOf(s.ns), ":", s.local); }

// ---- reading ------------------------------------------------------------------

// Every child named (ns, local), marked read.
std::vector<const XmlElement*> Children(const XmlElement& parent, Ns ns, absl::string_view local) {
  std::vector<const XmlElement*> out;
  for (const XmlElement& c : parent.children) {
    if (c.Is(Uri(ns), local)) {
      c.used = true;
      out.push_back(&c);
    }
  }
  return out;
}

// The child named `step`, nullptr when there is none; an error when there are several.
absl::StatusOr<const XmlElement*> OneChild(const Ctx& ctx, const XmlElement& parent, const Step& step, int field) {
  const XmlElement* found = nullptr;
  for (const XmlElement& c : parent.children) {
    if (!c.Is(Uri(step.ns), step.local)) continue;
    if (found != nullptr) return XmlError(&ctx, c, field, "appears more than once");
    found = &c;
  }
  if (found != nullptr) found->used = true;
  return found;
}

// `path` from `base`, each step at most once: nullptr when a step is absent.
absl::StatusOr<const XmlElement*> Follow(const Ctx& ctx, const XmlElement* base, const StepPath& path, int field) {
  const XmlElement* e = base;
  for (const Step& s : path) {
    if (e == nullptr) return e;
    TESSERA_ASSIGN_OR_RETURN(e, OneChild(ctx, *e, s, field));
  }
  return e;
}

// Every element at the end of `path` (several allowed at each step), in document order.
std::vector<const XmlElement*> FollowAll(const XmlElement* base, const StepPath& path) {
  if (base == nullptr) return {};
  std::vector<const XmlElement*> level{base};
  for (const Step& s : path) {
    std::vector<const XmlElement*> next;
    for (const XmlElement* e : level) {
      for (const XmlElement* c : Children(*e, s.ns, s.local)) next.push_back(c);
    }
    level = std::move(next);
  }
  return level;
}

// A simple value: the element's text without the surrounding XML whitespace.
absl::StatusOr<std::string> Value(const Ctx& ctx, const XmlElement& e, int field) {
  e.used = true;
  if (!e.children.empty()) {
    return XmlError(&ctx, e.children[0], field,
                    absl::StrCat("is an element where ", e.QName(), " should hold a value"));
  }
  return std::string(TrimXml(e.text));
}

// A record element being read.
struct View {
  Ctx ctx;
  const XmlElement* record = nullptr;
  const XmlElement* image = nullptr;        // Types 4, 13-15
  const XmlElement* transaction = nullptr;  // Type-1 biom:Transaction
};

// A record element being written. The image and transaction elements are
// looked up each time: adding to the record's children moves them.
struct Builder {
  int type = 0;
  XmlElement* record = nullptr;
};

XmlElement Make(Ns ns, absl::string_view local, std::string text = "") {
  XmlElement e;
  e.ns = std::string(Uri(ns));
  e.local = std::string(local);
  e.prefix = std::string(PrefixOf(ns));
  e.text = std::move(text);
  return e;
}

XmlElement* Add(XmlElement* parent, Ns ns, absl::string_view local, std::string text = "") {
  parent->children.push_back(Make(ns, local, std::move(text)));
  return &parent->children.back();
}

// The first child so named, else a new one.
XmlElement* Ensure(XmlElement* parent, Ns ns, absl::string_view local) {
  for (XmlElement& c : parent->children) {
    if (c.Is(Uri(ns), local)) return &c;
  }
  return Add(parent, ns, local);
}

XmlElement* EnsurePath(XmlElement* base, const StepPath& path) {
  XmlElement* e = base;
  for (const Step& s : path) e = Ensure(e, s.ns, s.local);
  return e;
}

// `path` below `base`: the steps before the last reused, the last new, holding `text`.
XmlElement* AddPath(XmlElement* base, const StepPath& path, std::string text) {
  XmlElement* e = base;
  for (size_t i = 0; i + 1 < path.size(); ++i) e = Ensure(e, path[i].ns, path[i].local);
  e = Add(e, path.back().ns, path.back().local);
  e->text = std::move(text);
  return e;
}

enum class Base { kRecord, kImage, kTransaction };

const XmlElement* BaseOf(const View& v, Base b) {
  switch (b) {
    case Base::kRecord:
      return v.record;
    case Base::kImage:
      return v.image;
    case Base::kTransaction:
      return v.transaction;
  }
  return nullptr;
}

XmlElement* BaseOf(Builder* b, Base base) {
  switch (base) {
    case Base::kRecord:
      return b->record;
    case Base::kImage:
      return Ensure(b->record, kBiom, ImageElement(b->type));
    case Base::kTransaction:
      return Ensure(b->record, kBiom, "Transaction");
  }
  return nullptr;
}

// How a value is written in XML.
enum class Kind {
  kText,            // as is
  kDate,            // YYYYMMDD <-> YYYY-MM-DD
  kDateTime,        // YYYYMMDDhhmmssZ <-> YYYY-MM-DDThh:mm:ssZ
  kStandardFormat,  // 9.004: S <-> true, U <-> false
  kFlag,            // 1 <-> true, 0 <-> false
};

bool DigitsAt(absl::string_view s, std::initializer_list<std::pair<size_t, size_t>> spans) {
  for (const auto& [at, n] : spans) {
    if (at + n > s.size() || !AllDigits(s.substr(at, n))) return false;
  }
  return true;
}

// Model value -> XML; false when the value has no such form.
bool ToXml(Kind kind, const std::string& v, std::string* out) {
  switch (kind) {
    case Kind::kText:
      *out = v;
      return true;
    case Kind::kDate:
      if (v.size() != 8 || !AllDigits(v)) return false;
      *out = absl::StrCat(v.substr(0, 4), "-", v.substr(4, 2), "-", v.substr(6, 2));
      return true;
    case Kind::kDateTime:
      if (v.size() != 15 || v[14] != 'Z' || !AllDigits(v.substr(0, 14))) return false;
      *out = absl::StrCat(v.substr(0, 4), "-", v.substr(4, 2), "-", v.substr(6, 2), "T", v.substr(8, 2), ":",
                          v.substr(10, 2), ":", v.substr(12, 2), "Z");
      return true;
    case Kind::kStandardFormat:
      if (v != "S" && v != "U") return false;
      *out = v == "S" ? "true" : "false";
      return true;
    case Kind::kFlag:
      if (v != "1" && v != "0") return false;
      *out = v == "1" ? "true" : "false";
      return true;
  }
  return false;
}

// XML value -> model; "" on success, else why not.
std::string FromXml(Kind kind, absl::string_view x, std::string* out) {
  switch (kind) {
    case Kind::kText:
      *out = std::string(x);
      return "";
    case Kind::kDate:
      if (x.size() != 10 || x[4] != '-' || x[7] != '-' || !DigitsAt(x, {{0, 4}, {5, 2}, {8, 2}})) {
        return absl::StrCat("'", Shown(x), "' is not a date (YYYY-MM-DD)");
      }
      *out = absl::StrCat(x.substr(0, 4), x.substr(5, 2), x.substr(8, 2));
      return "";
    case Kind::kDateTime:
      if (x.size() != 20 || x[4] != '-' || x[7] != '-' || x[10] != 'T' || x[13] != ':' || x[16] != ':' ||
          x[19] != 'Z' || !DigitsAt(x, {{0, 4}, {5, 2}, {8, 2}, {11, 2}, {14, 2}, {17, 2}})) {
        return absl::StrCat("'", Shown(x), "' is not a UTC date and time (YYYY-MM-DDThh:mm:ssZ)");
      }
      *out = absl::StrCat(x.substr(0, 4), x.substr(5, 2), x.substr(8, 2), x.substr(11, 2), x.substr(14, 2),
                          x.substr(17, 2), "Z");
      return "";
    case Kind::kStandardFormat:
    case Kind::kFlag: {
      const bool yes = x == "true" || x == "1";
      if (!yes && x != "false" && x != "0") return absl::StrCat("'", Shown(x), "' is not a boolean (true or false)");
      *out = kind == Kind::kFlag ? (yes ? "1" : "0") : (yes ? "S" : "U");
      return "";
    }
  }
  return "unknown kind";
}

// One field's elements: how to find them in a record element and how to
// write them. `decode` appends what it finds (nothing when the elements are
// absent); `encode` returns false when the elements cannot carry the value.
struct Mapping {
  int field = 0;
  std::function<absl::Status(const View&, std::vector<Field>*)> decode;
  std::function<bool(const Field&, Builder*)> encode;
};

// A single value at `path`.
Mapping Leaf(int field, Base base, const char* path, Kind kind = Kind::kText, const char* alias = nullptr) {
  const StepPath steps = Steps(path);
  const StepPath alias_steps = alias != nullptr ? Steps(alias) : StepPath{};
  Mapping m;
  m.field = field;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, Follow(v.ctx, BaseOf(v, base), steps, field));
    if (e == nullptr && !alias_steps.empty()) {
      TESSERA_ASSIGN_OR_RETURN(e, Follow(v.ctx, BaseOf(v, base), alias_steps, field));
    }
    if (e == nullptr) return absl::OkStatus();
    TESSERA_ASSIGN_OR_RETURN(std::string text, Value(v.ctx, *e, field));
    std::string value;
    const std::string why = FromXml(kind, text, &value);
    if (!why.empty()) return XmlError(&v.ctx, *e, field, why);
    out->push_back(TextField1(field, std::move(value)));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.size() != 1 || f.subfields[0].size() != 1) return false;
    std::string x;
    if (!ToXml(kind, f.subfields[0][0], &x)) return false;
    AddPath(BaseOf(b, base), steps, std::move(x));
    return true;
  };
  return m;
}

// A field of repeated subfields, one element ("group") per subfield, its
// items the values at the item paths.
struct GroupSpec {
  int field = 0;
  Base base = Base::kRecord;
  const char* container = "";  // "" = the base; may match several (document order)
  const char* group = "";      // "" = the container itself, the only subfield
  std::vector<const char*> items;  // per item its path in the group; "" = the group's text
  std::vector<int> write_order;    // the items in schema order; empty = as listed
  size_t max_subfields = 0;        // 0 = any number
};

Mapping Group(const GroupSpec& spec) {
  const StepPath container = Steps(spec.container);
  const StepPath group = Steps(spec.group);
  std::vector<StepPath> items;
  for (const char* p : spec.items) items.push_back(Steps(p));
  std::vector<int> order = spec.write_order;
  if (order.empty()) {
    for (size_t i = 0; i < items.size(); ++i) order.push_back(static_cast<int>(i));
  }
  Mapping m;
  m.field = spec.field;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    const XmlElement* base = BaseOf(v, spec.base);
    if (base == nullptr) return absl::OkStatus();
    std::vector<const XmlElement*> groups;
    for (const XmlElement* c : container.empty() ? std::vector<const XmlElement*>{base} : FollowAll(base, container)) {
      if (group.empty()) {
        groups.push_back(c);
      } else {
        for (const XmlElement* g : Children(*c, group[0].ns, group[0].local)) groups.push_back(g);
      }
    }
    Field f;
    f.number = spec.field;
    for (const XmlElement* g : groups) {
      Subfield s;
      for (size_t i = 0; i < items.size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, Follow(v.ctx, g, items[i], spec.field));
        if (e == nullptr) continue;
        TESSERA_ASSIGN_OR_RETURN(std::string value, Value(v.ctx, *e, spec.field));
        s.resize(i + 1);
        s[i] = std::move(value);
      }
      if (s.empty()) {
        if (group.empty()) continue;  // the container holds none of this field's elements
        std::vector<std::string> names;
        for (const StepPath& p : items) names.push_back(p.empty() ? "a value" : Expected(p.back()));
        return XmlError(&v.ctx, *g, spec.field, absl::StrCat("holds none of ", absl::StrJoin(names, ", ")));
      }
      if (spec.max_subfields > 0 && f.subfields.size() == spec.max_subfields) {
        return XmlError(&v.ctx, *g, spec.field, absl::StrCat("more than ", spec.max_subfields, " of these"));
      }
      f.subfields.push_back(std::move(s));
    }
    if (!f.subfields.empty()) out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.empty() || (spec.max_subfields > 0 && f.subfields.size() > spec.max_subfields)) return false;
    for (const Subfield& s : f.subfields) {
      if (s.empty() || s.size() > items.size()) return false;
    }
    XmlElement* c = EnsurePath(BaseOf(b, spec.base), container);
    for (const Subfield& s : f.subfields) {
      XmlElement* g = group.empty() ? c : Add(c, group[0].ns, group[0].local);
      for (int i : order) {
        if (static_cast<size_t>(i) >= s.size()) continue;
        if (items[i].empty()) {
          g->text = s[i];
        } else {
          AddPath(g, items[i], s[i]);
        }
      }
    }
    return true;
  };
  return m;
}

// 1.002 VER: "0400" as major "04" and minor "00".
Mapping Version() {
  const Step major{kBiom, "TransactionMajorVersionValue"};
  const Step minor{kBiom, "TransactionMinorVersionValue"};
  Mapping m;
  m.field = 2;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    if (v.transaction == nullptr) return absl::OkStatus();
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* a, OneChild(v.ctx, *v.transaction, major, 2));
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* b, OneChild(v.ctx, *v.transaction, minor, 2));
    if (a == nullptr && b == nullptr) return absl::OkStatus();
    if (a == nullptr || b == nullptr) {
      return XmlError(&v.ctx, a != nullptr ? *a : *b, 2,
                      absl::StrCat("needs both ", Expected(major), " and ", Expected(minor)));
    }
    std::string parts[2];
    for (int i = 0; i < 2; ++i) {
      const XmlElement& e = i == 0 ? *a : *b;
      TESSERA_ASSIGN_OR_RETURN(std::string x, Value(v.ctx, e, 2));
      int n = 0;
      if (!ParseNumber(x, 2, &n)) return XmlError(&v.ctx, e, 2, absl::StrCat("'", Shown(x), "' is not 0-99"));
      parts[i] = ZeroPad(x, 2);
    }
    out->push_back(TextField1(2, parts[0] + parts[1]));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.size() != 1 || f.subfields[0].size() != 1) return false;
    const std::string& x = f.subfields[0][0];
    if (x.size() != 4 || !AllDigits(x)) return false;
    XmlElement* t = BaseOf(b, Base::kTransaction);
    Add(t, major.ns, major.local, x.substr(0, 2));
    Add(t, minor.ns, minor.local, x.substr(2, 2));
    return true;
  };
  return m;
}

// 4.004 FGP: six bytes, the unused ones 255; the XML lists the used ones.
Mapping BinaryPositions() {
  const Step position{kBiom, "FingerprintImagePosition"};
  Mapping m;
  m.field = 4;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    if (v.image == nullptr) return absl::OkStatus();
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* p, OneChild(v.ctx, *v.image, position, 4));
    if (p == nullptr) return absl::OkStatus();
    const std::vector<const XmlElement*> codes = Children(*p, kBiom, "FingerPositionCode");
    if (codes.size() > 6) return XmlError(&v.ctx, *codes[6], 4, "more than 6 finger positions");
    Field f;
    f.number = 4;
    f.subfields.emplace_back();
    for (const XmlElement* c : codes) {
      TESSERA_ASSIGN_OR_RETURN(std::string x, Value(v.ctx, *c, 4));
      f.subfields[0].push_back(std::move(x));
    }
    while (f.subfields[0].size() < 6) f.subfields[0].push_back("255");
    out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.size() != 1 || f.subfields[0].size() != 6) return false;
    const Subfield& s = f.subfields[0];
    size_t used = 0;
    while (used < 6 && s[used] != "255") ++used;
    for (size_t i = used; i < 6; ++i) {
      if (s[i] != "255") return false;
    }
    XmlElement* p = Add(BaseOf(b, Base::kImage), position.ns, position.local);
    for (size_t i = 0; i < used; ++i) Add(p, kBiom, "FingerPositionCode", s[i]);
    return true;
  };
  return m;
}

// 9.006 FGP: finger codes, palm codes (20-38) as their own element.
Mapping MinutiaePositions() {
  const Step minutiae{kItl, "Minutiae"};
  Mapping m;
  m.field = 6;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* mn, OneChild(v.ctx, *v.record, minutiae, 6));
    if (mn == nullptr) return absl::OkStatus();
    Field f;
    f.number = 6;
    for (const XmlElement& c : mn->children) {
      if (!c.Is(kBiomNamespace, "MinutiaeFingerPositionCode") && !c.Is(kBiomNamespace, "MinutiaePalmPositionCode")) {
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(std::string x, Value(v.ctx, c, 6));
      f.subfields.push_back({std::move(x)});
    }
    if (!f.subfields.empty()) out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.empty()) return false;
    for (const Subfield& s : f.subfields) {
      if (s.size() != 1) return false;
    }
    XmlElement* mn = Ensure(b->record, minutiae.ns, minutiae.local);
    for (const Subfield& s : f.subfields) {
      int code = 0;
      const bool palm = ParseNumber(s[0], 2, &code) && code >= 20 && code <= 38;
      Add(mn, kBiom, palm ? "MinutiaePalmPositionCode" : "MinutiaeFingerPositionCode", s[0]);
    }
    return true;
  };
  return m;
}

// 9.007 FPC: a source ("T" table, "U" user) then pattern codes or texts.
Mapping PatternClasses() {
  const StepPath details = Steps("itl:Minutiae/itl:MinutiaeFingerPatternDetail");
  const Step source{kItl, "FingerPatternCodeSourceCode"};
  Mapping m;
  m.field = 7;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    Field f;
    f.number = 7;
    for (const XmlElement* d : FollowAll(v.record, details)) {
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* s, OneChild(v.ctx, *d, source, 7));
      if (s == nullptr) return XmlError(&v.ctx, *d, 7, absl::StrCat("has no ", Expected(source)));
      Subfield items;
      TESSERA_ASSIGN_OR_RETURN(std::string x, Value(v.ctx, *s, 7));
      items.push_back(std::move(x));
      for (const XmlElement& c : d->children) {
        if (!c.Is(kBiomNamespace, "FingerPatternCode") && !c.Is(kBiomNamespace, "FingerPatternText")) continue;
        TESSERA_ASSIGN_OR_RETURN(std::string y, Value(v.ctx, c, 7));
        items.push_back(std::move(y));
      }
      f.subfields.push_back(std::move(items));
    }
    if (!f.subfields.empty()) out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.empty()) return false;
    for (const Subfield& s : f.subfields) {
      if (s.empty()) return false;
    }
    for (const Subfield& s : f.subfields) {
      XmlElement* mn = EnsurePath(b->record, {details[0]});
      XmlElement* d = Add(mn, details[1].ns, details[1].local);
      Add(d, source.ns, source.local, s[0]);
      for (size_t i = 1; i < s.size(); ++i) Add(d, kBiom, s[0] == "T" ? "FingerPatternCode" : "FingerPatternText", s[i]);
    }
    return true;
  };
  return m;
}

// Coordinates written as fixed-width digits in one traditional item.
absl::StatusOr<std::string> FixedDigits(const Ctx& ctx, const XmlElement* parent, const Step& step, size_t width,
                                        int field) {
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, OneChild(ctx, *parent, step, field));
  if (e == nullptr) return XmlError(&ctx, *parent, field, absl::StrCat("has no ", Expected(step)));
  TESSERA_ASSIGN_OR_RETURN(std::string x, Value(ctx, *e, field));
  if (x.size() > width || !AllDigits(x)) {
    return XmlError(&ctx, *e, field, absl::StrCat("'", Shown(x), "' is not a number of at most ", width, " digits"));
  }
  return ZeroPad(x, width);
}

// 9.008 CRP and 9.009 DLT: "XXXXYYYY" per subfield.
Mapping CorePoints(int field, const char* element) {
  const StepPath points = Steps(absl::StrCat("itl:Minutiae/biom:", element));
  const Step h{kBiom, "PositionHorizontalCoordinateValue"};
  const Step vert{kBiom, "PositionVerticalCoordinateValue"};
  Mapping m;
  m.field = field;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    Field f;
    f.number = field;
    for (const XmlElement* p : FollowAll(v.record, points)) {
      TESSERA_ASSIGN_OR_RETURN(std::string x, FixedDigits(v.ctx, p, h, 4, field));
      TESSERA_ASSIGN_OR_RETURN(std::string y, FixedDigits(v.ctx, p, vert, 4, field));
      f.subfields.push_back({x + y});
    }
    if (!f.subfields.empty()) out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.empty()) return false;
    for (const Subfield& s : f.subfields) {
      if (s.size() != 1 || s[0].size() != 8 || !AllDigits(s[0])) return false;
    }
    for (const Subfield& s : f.subfields) {
      XmlElement* mn = EnsurePath(b->record, {points[0]});
      XmlElement* p = Add(mn, points[1].ns, points[1].local);
      Add(p, h.ns, h.local, s[0].substr(0, 4));
      Add(p, vert.ns, vert.local, s[0].substr(4, 4));
    }
    return true;
  };
  return m;
}

// 9.012 MRC: index, XXXXYYYYTTT, quality, type, then ridge counts "n,c".
Mapping LegacyMinutiae() {
  const StepPath details = Steps("itl:Minutiae/itl:MinutiaeNISTStandard/itl:MinutiaDetail");
  const Step h{kBiom, "PositionHorizontalCoordinateValue"};
  const Step vert{kBiom, "PositionVerticalCoordinateValue"};
  const Step theta{kBiom, "PositionThetaAngleMeasure"};
  const StepPath id = Steps("biom:MinutiaIdentification/nc:IdentificationID");
  const Step quality{kBiom, "MinutiaQualityValue"};
  const Step category{kBiom, "MinutiaCategoryCode"};
  const Step ridge{kBiom, "MinutiaRidgeCount"};
  const StepPath neighbour = Steps("biom:RidgeCountReferenceIdentification/nc:IdentificationID");
  const Step count{kBiom, "RidgeCountValue"};
  Mapping m;
  m.field = 12;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    Field f;
    f.number = 12;
    for (const XmlElement* d : FollowAll(v.record, details)) {
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* ide, Follow(v.ctx, d, id, 12));
      if (ide == nullptr) return XmlError(&v.ctx, *d, 12, "has no biom:MinutiaIdentification/nc:IdentificationID");
      Subfield s(2);
      TESSERA_ASSIGN_OR_RETURN(s[0], Value(v.ctx, *ide, 12));
      TESSERA_ASSIGN_OR_RETURN(std::string x, FixedDigits(v.ctx, d, h, 4, 12));
      TESSERA_ASSIGN_OR_RETURN(std::string y, FixedDigits(v.ctx, d, vert, 4, 12));
      TESSERA_ASSIGN_OR_RETURN(std::string t, FixedDigits(v.ctx, d, theta, 3, 12));
      s[1] = x + y + t;
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* q, OneChild(v.ctx, *d, quality, 12));
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* c, OneChild(v.ctx, *d, category, 12));
      const std::vector<const XmlElement*> counts = Children(*d, ridge.ns, ridge.local);
      if (q != nullptr || c != nullptr || !counts.empty()) {
        s.emplace_back();
        if (q != nullptr) {
          TESSERA_ASSIGN_OR_RETURN(s[2], Value(v.ctx, *q, 12));
        }
      }
      if (c != nullptr || !counts.empty()) {
        s.emplace_back();
        if (c != nullptr) {
          TESSERA_ASSIGN_OR_RETURN(s[3], Value(v.ctx, *c, 12));
        }
      }
      for (const XmlElement* r : counts) {
        TESSERA_ASSIGN_OR_RETURN(const XmlElement* n, Follow(v.ctx, r, neighbour, 12));
        TESSERA_ASSIGN_OR_RETURN(const XmlElement* k, OneChild(v.ctx, *r, count, 12));
        if (n == nullptr || k == nullptr) {
          return XmlError(&v.ctx, *r, 12, "needs biom:RidgeCountReferenceIdentification and biom:RidgeCountValue");
        }
        TESSERA_ASSIGN_OR_RETURN(std::string nv, Value(v.ctx, *n, 12));
        TESSERA_ASSIGN_OR_RETURN(std::string kv, Value(v.ctx, *k, 12));
        s.push_back(absl::StrCat(nv, ",", kv));
      }
      f.subfields.push_back(std::move(s));
    }
    if (!f.subfields.empty()) out->push_back(std::move(f));
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.empty()) return false;
    for (const Subfield& s : f.subfields) {
      if (s.size() < 2 || s[1].size() != 11 || !AllDigits(s[1])) return false;
      for (size_t i = 4; i < s.size(); ++i) {
        if (std::count(s[i].begin(), s[i].end(), ',') != 1) return false;
      }
    }
    for (const Subfield& s : f.subfields) {
      XmlElement* std_minutiae = EnsurePath(b->record, {details[0], details[1]});
      XmlElement* d = Add(std_minutiae, details[2].ns, details[2].local);
      Add(d, h.ns, h.local, s[1].substr(0, 4));
      Add(d, vert.ns, vert.local, s[1].substr(4, 4));
      AddPath(d, id, s[0]);
      Add(d, theta.ns, theta.local, s[1].substr(8, 3));
      if (s.size() > 2) Add(d, quality.ns, quality.local, s[2]);
      if (s.size() > 3) Add(d, category.ns, category.local, s[3]);
      for (size_t i = 4; i < s.size(); ++i) {
        const size_t comma = s[i].find(',');
        XmlElement* r = Add(d, ridge.ns, ridge.local);
        AddPath(r, neighbour, s[i].substr(0, comma));
        Add(r, count.ns, count.local, s[i].substr(comma + 1));
      }
    }
    return true;
  };
  return m;
}

// 9.300 ROI: width, height, offsets, then the polygon "x,y-x,y-...".
Mapping RegionOfInterest() {
  const StepPath roi = Steps("biom:ExtendedFeatureSetMinutiae/biom:FrictionRidgeImageRegionOfInterest");
  const std::vector<Step> sizes = {{kBiom, "ImageSegmentWidthMeasure"},
                                   {kBiom, "ImageSegmentHeightMeasure"},
                                   {kBiom, "ImageSegmentHorizontalOffsetMeasure"},
                                   {kBiom, "ImageSegmentVerticalOffsetMeasure"}};
  const Step polygon{kBiom, "ImageSegmentPolygon"};
  const Step vertex{kBiom, "ImageSegmentVertex"};
  const Step vx{kBiom, "ImageLocationHorizontalCoordinateMeasure"};
  const Step vy{kBiom, "ImageLocationVerticalCoordinateMeasure"};
  Mapping m;
  m.field = 300;
  m.decode = [=](const View& v, std::vector<Field>* out) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* r, Follow(v.ctx, v.record, roi, 300));
    if (r == nullptr) return absl::OkStatus();
    Subfield s;
    for (size_t i = 0; i < sizes.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, OneChild(v.ctx, *r, sizes[i], 300));
      if (e == nullptr) continue;
      s.resize(i + 1);
      TESSERA_ASSIGN_OR_RETURN(s[i], Value(v.ctx, *e, 300));
    }
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* p, OneChild(v.ctx, *r, polygon, 300));
    if (p != nullptr) {
      std::vector<std::string> points;
      for (const XmlElement* pt : Children(*p, vertex.ns, vertex.local)) {
        TESSERA_ASSIGN_OR_RETURN(const XmlElement* x, OneChild(v.ctx, *pt, vx, 300));
        TESSERA_ASSIGN_OR_RETURN(const XmlElement* y, OneChild(v.ctx, *pt, vy, 300));
        if (x == nullptr || y == nullptr) {
          return XmlError(&v.ctx, *pt, 300, absl::StrCat("needs ", Expected(vx), " and ", Expected(vy)));
        }
        TESSERA_ASSIGN_OR_RETURN(std::string xs, Value(v.ctx, *x, 300));
        TESSERA_ASSIGN_OR_RETURN(std::string ys, Value(v.ctx, *y, 300));
        points.push_back(absl::StrCat(xs, ",", ys));
      }
      if (points.empty()) return XmlError(&v.ctx, *p, 300, "has no vertices");
      s.resize(5);
      s[4] = absl::StrJoin(points, "-");
    }
    if (s.empty()) return XmlError(&v.ctx, *r, 300, "holds no size, offset or polygon");
    out->push_back(Field{300, {std::move(s)}, "", false});
    return absl::OkStatus();
  };
  m.encode = [=](const Field& f, Builder* b) {
    if (f.subfields.size() != 1 || f.subfields[0].empty() || f.subfields[0].size() > 5) return false;
    const Subfield& s = f.subfields[0];
    std::vector<std::pair<std::string, std::string>> points;
    if (s.size() == 5) {
      for (absl::string_view point : absl::StrSplit(s[4], '-')) {
        const size_t comma = point.find(',');
        if (comma == absl::string_view::npos || point.find(',', comma + 1) != absl::string_view::npos) return false;
        points.emplace_back(std::string(point.substr(0, comma)), std::string(point.substr(comma + 1)));
      }
    }
    XmlElement* efs = Ensure(b->record, roi[0].ns, roi[0].local);
    XmlElement* r = Add(efs, roi[1].ns, roi[1].local);
    for (size_t i = 0; i < std::min<size_t>(s.size(), 4); ++i) Add(r, sizes[i].ns, sizes[i].local, s[i]);
    if (!points.empty()) {
      XmlElement* p = Add(r, polygon.ns, polygon.local);
      for (const auto& [x, y] : points) {
        XmlElement* pt = Add(p, vertex.ns, vertex.local);
        Add(pt, vx.ns, vx.local, x);
        Add(pt, vy.ns, vy.local, y);
      }
    }
    return true;
  };
  return m;
}

std::vector<Mapping> Type1Mappings() {
  const Base t = Base::kTransaction;
  return {
      Version(),
      Leaf(4, t, "biom:TransactionCategoryCode"),
      Leaf(5, t, "biom:TransactionDate/nc:Date", Kind::kDate),
      Leaf(6, t, "biom:TransactionPriorityValue"),
      Leaf(7, t, "biom:TransactionDestinationOrganization/nc:OrganizationIdentification/nc:IdentificationID"),
      Leaf(8, t, "biom:TransactionOriginatingOrganization/nc:OrganizationIdentification/nc:IdentificationID"),
      Leaf(9, t, "biom:TransactionControlIdentification/nc:IdentificationID"),
      Leaf(10, t, "biom:TransactionControlReferenceIdentification/nc:IdentificationID"),
      Leaf(11, t, "biom:TransactionImageResolutionDetails/biom:NativeScanningResolutionValue"),
      Leaf(12, t, "biom:TransactionImageResolutionDetails/biom:NominalTransmittingResolutionValue"),
      Group({13, t, "", "biom:TransactionDomain",
             {"biom:TransactionDomainName", "biom:DomainVersionNumberIdentification/nc:IdentificationID"},
             {1, 0}, 1}),
      Leaf(14, t, "biom:TransactionUTCDate/nc:DateTime", Kind::kDateTime),
      Group({15, t, "", "biom:TransactionCharacterSetDirectory",
             {"biom:CharacterSetIndexCode", "biom:CharacterSetCommonNameCode",
              "biom:CharacterSetVersionIdentification/nc:IdentificationID"},
             {1, 0, 2}}),
      Group({16, t, "", "biom:TransactionApplicationProfile",
             {"biom:ApplicationProfileOrganizationName", "biom:ApplicationProfileName",
              "biom:ApplicationProfileVersionIdentification/nc:IdentificationID"}}),
      Group({17, t, "", "",
             {"biom:TransactionDestinationOrganization/nc:OrganizationName",
              "biom:TransactionOriginatingOrganization/nc:OrganizationName"},
             {}, 1}),
      Leaf(18, t, "biom:TransactionGeographicNameSetCode"),
  };
}

std::vector<Mapping> Type4Mappings() {
  const Base img = Base::kImage;
  return {
      Leaf(3, img, "biom:FingerprintImageImpressionCaptureCategoryCode"),
      BinaryPositions(),
      Leaf(5, img, "biom:ImageCaptureDetail/biom:CaptureResolutionCode"),
      Leaf(6, img, "biom:ImageHorizontalLineLengthPixelQuantity"),
      Leaf(7, img, "biom:ImageVerticalLineLengthPixelQuantity"),
      Leaf(8, img, "biom:ImageCompressionAlgorithmCode"),
  };
}

std::vector<Mapping> Type9Mappings() {
  const Base r = Base::kRecord;
  return {
      Leaf(3, r, "biom:MinutiaeImpressionCaptureCategoryCode"),
      Leaf(4, r, "biom:MinutiaeFormatNISTStandardIndicator", Kind::kStandardFormat),
      Group({5, r, "itl:Minutiae/itl:MinutiaeNISTStandard", "biom:MinutiaeReadingSystem",
             {"biom:ReadingSystemName", "biom:ReadingSystemCodingMethodCode",
              "biom:ReadingSystemSubsystemIdentification/nc:IdentificationID"},
             {1, 0, 2}, 1}),
      MinutiaePositions(),
      PatternClasses(),
      CorePoints(8, "MinutiaeFingerCorePosition"),
      CorePoints(9, "MinutiaeFingerDeltaPosition"),
      Leaf(10, r, "itl:Minutiae/itl:MinutiaeNISTStandard/biom:MinutiaeQuantity"),
      Leaf(11, r, "itl:Minutiae/itl:MinutiaeNISTStandard/biom:MinutiaeRidgeCountIndicator", Kind::kFlag),
      LegacyMinutiae(),
      RegionOfInterest(),
      Group({331, r, "biom:ExtendedFeatureSetMinutiae", "biom:EFSMinutia",
             {"biom:ImageLocationHorizontalCoordinateMeasure", "biom:ImageLocationVerticalCoordinateMeasure",
              "biom:ImageLocationThetaAngleMeasure", "biom:EFSMinutiaCategoryCode",
              "biom:ImageLocationUncertaintyRadiusMeasure", "biom:MinutiaDirectionUncertaintyValue"}}),
  };
}

// Types 13, 14 and 15.
std::vector<Mapping> TaggedImageMappings(int type) {
  const Base img = Base::kImage;
  const char* position = type == 13 ? "biom:FrictionRidgePositionCode"
                         : type == 14 ? "biom:FingerPositionCode"
                                      : "biom:PalmPositionCode";
  const char* quality = type == 13 ? "biom:FrictionRidgeImageQuality"
                        : type == 14 ? "biom:FingerprintImageQuality"
                                     : "biom:PalmprintImageQuality";
  std::vector<Mapping> m = {
      Leaf(3, img, "biom:FingerprintImageImpressionCaptureCategoryCode", Kind::kText,
           "biom:FrictionRidgeImageImpressionCaptureCategoryCode"),
      Leaf(4, img, "biom:ImageCaptureDetail/biom:CaptureOrganization/nc:OrganizationIdentification/nc:IdentificationID"),
      Leaf(5, img, "biom:ImageCaptureDetail/biom:CaptureDate/nc:Date", Kind::kDate),
      Leaf(6, img, "biom:ImageHorizontalLineLengthPixelQuantity"),
      Leaf(7, img, "biom:ImageVerticalLineLengthPixelQuantity"),
      Leaf(8, img, "biom:ImageScaleUnitsCode"),
      Leaf(9, img, "biom:ImageHorizontalPixelDensityValue"),
      Leaf(10, img, "biom:ImageVerticalPixelDensityValue"),
      Leaf(11, img, "biom:ImageCompressionAlgorithmText"),
      Leaf(12, img, "biom:ImageBitsPerPixelQuantity"),
      Group({13, img, "", position, {""}}),
      Leaf(20, img, "biom:ImageCommentText"),
      Group({24, img, "", quality,
             {position, "biom:QualityValue", "biom:QualityAlgorithmVendorIdentification/nc:IdentificationID",
              "biom:QualityAlgorithmProductIdentification/nc:IdentificationID"},
             {0, 3, 2, 1}}),
  };
  if (type != 15) {
    m.push_back(Group({14, img, "", "biom:FingerprintImageMajorCasePrint",
                       {"biom:FingerPositionCode", "biom:MajorCasePrintCode"}}));
    m.push_back(Group({15, img, "biom:FingerprintImageMajorCasePrint", "biom:MajorCasePrintSegmentOffset",
                       {"biom:SegmentFingerViewCode", "biom:SegmentLocationCode",
                        "biom:SegmentLeftHorizontalCoordinateValue", "biom:SegmentRightHorizontalCoordinateValue",
                        "biom:SegmentTopVerticalCoordinateValue", "biom:SegmentBottomVerticalCoordinateValue"},
                       {5, 1, 0, 2, 3, 4}}));
  }
  if (type == 14) {
    m.push_back(Group({22, img, "", "biom:FingerprintImageNISTQuality",
                       {"biom:FingerPositionCode", "biom:NISTQualityMeasure"}}));
  }
  return m;
}

const std::vector<Mapping>& MappingsFor(int type) {
  static const auto* const kByType = [] {
    auto* m = new std::map<int, std::vector<Mapping>>();
    (*m)[1] = Type1Mappings();
    (*m)[2] = {};
    (*m)[4] = Type4Mappings();
    (*m)[9] = Type9Mappings();
    for (int t : {13, 14, 15}) (*m)[t] = TaggedImageMappings(t);
    return m;
  }();
  static const std::vector<Mapping>* const kNone = new std::vector<Mapping>();
  const auto it = kByType->find(type);
  return it == kByType->end() ? *kNone : it->second;
}

const Mapping* MappingOf(int type, int field) {
  for (const Mapping& m : MappingsFor(type)) {
    if (m.field == field) return &m;
  }
  return nullptr;
}

// Every named field a record element holds (not IDC, CNT, DATA or tsr:Fields).
absl::Status DecodeNamed(const View& v, std::vector<Field>* out) {
  for (const Mapping& m : MappingsFor(v.ctx.type)) TESSERA_RETURN_IF_ERROR(m.decode(v, out));
  return absl::OkStatus();
}

// x.999 from <img>/nc:BinaryBase64Object.
absl::Status DecodeData(const View& v, std::vector<Field>* out) {
  if (v.image == nullptr) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* e,
                           OneChild(v.ctx, *v.image, Step{kNc, "BinaryBase64Object"}, kDataField));
  if (e == nullptr) return absl::OkStatus();
  if (!e->children.empty()) return XmlError(&v.ctx, e->children[0], kDataField, "is an element inside base64 data");
  Field f;
  f.number = kDataField;
  f.is_binary = true;
  const std::string why = DecodeBase64(e->text, &f.binary);
  if (!why.empty()) return XmlError(&v.ctx, *e, kDataField, why);
  out->push_back(std::move(f));
  return absl::OkStatus();
}

// tsr:Field elements: <tsr:Field number="N"> holding the value as text, or
// tsr:Subfield elements holding it as text or tsr:Item elements;
// binary="true": base64 text.
absl::Status DecodeGenericField(const Ctx& ctx, const XmlElement& e, std::vector<Field>* out) {
  e.used = true;
  if (!e.Is(kFieldsNamespace, "Field")) {
    return XmlError(&ctx, e, 0, "only tsr:Field elements belong in tsr:Fields");
  }
  const XmlAttribute* number = e.Attribute("number");
  int n = 0;
  if (number == nullptr || !ParseNumber(number->value, 3, &n) || n < 1) {
    return XmlError(&ctx, e, 0,
                    absl::StrCat("attribute number ", number == nullptr ? "missing" : "'" + Shown(number->value) + "'",
                                 ": needs the field number (1-999)"));
  }
  if (n == kLenField || (ctx.type != 1 && n == kIdcField) || (ctx.type == 1 && n == 3)) {
    return XmlError(&ctx, e, n, "is given by its own element (biom:RecordCategoryCode, the IDC or the content summary)");
  }
  auto mixed = [&ctx, n](const XmlElement& x) -> absl::Status {
    if (!x.children.empty() && !TrimXml(x.text).empty()) {
      return XmlError(&ctx, x, n, absl::StrCat("mixes text ('", Shown(TrimXml(x.text)), "') with elements"));
    }
    return absl::OkStatus();
  };
  Field f;
  f.number = n;
  const XmlAttribute* binary = e.Attribute("binary");
  if (binary != nullptr && binary->value != "false") {
    if (binary->value != "true") return XmlError(&ctx, e, n, "attribute binary is not true or false");
    if (!e.children.empty()) return XmlError(&ctx, e.children[0], n, "is an element inside base64 data");
    f.is_binary = true;
    const std::string why = DecodeBase64(e.text, &f.binary);
    if (!why.empty()) return XmlError(&ctx, e, n, why);
    out->push_back(std::move(f));
    return absl::OkStatus();
  }
  TESSERA_RETURN_IF_ERROR(mixed(e));
  if (e.children.empty()) {
    f.subfields.push_back({e.text});
  }
  for (const XmlElement& s : e.children) {
    s.used = true;
    if (!s.Is(kFieldsNamespace, "Subfield")) return XmlError(&ctx, s, n, "only tsr:Subfield elements belong in tsr:Field");
    TESSERA_RETURN_IF_ERROR(mixed(s));
    Subfield items;
    if (s.children.empty()) items.push_back(s.text);
    for (const XmlElement& i : s.children) {
      i.used = true;
      if (!i.Is(kFieldsNamespace, "Item")) return XmlError(&ctx, i, n, "only tsr:Item elements belong in tsr:Subfield");
      if (!i.children.empty()) return XmlError(&ctx, i.children[0], n, "is an element inside a tsr:Item");
      items.push_back(i.text);
    }
    f.subfields.push_back(std::move(items));
  }
  out->push_back(std::move(f));
  return absl::OkStatus();
}

absl::Status DecodeGeneric(const View& v, std::vector<Field>* out) {
  const Step fields{kTsr, "Fields"};
  std::vector<const XmlElement*> containers;
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* top, OneChild(v.ctx, *v.record, fields, 0));
  if (top != nullptr) containers.push_back(top);
  if (v.ctx.type == 2) {
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* domain,
                             Follow(v.ctx, v.record, Steps("itl:UserDefinedDescriptiveDetail/tsr:Fields"), 0));
    if (domain != nullptr) containers.push_back(domain);
  }
  for (const XmlElement* c : containers) {
    for (const XmlElement& e : c->children) TESSERA_RETURN_IF_ERROR(DecodeGenericField(v.ctx, e, out));
  }
  return absl::OkStatus();
}

// The elements of `record` nobody read, outermost only.
void CollectUnused(const XmlElement& e, std::vector<const XmlElement*>* out) {
  for (const XmlElement& c : e.children) {
    if (!c.used) {
      out->push_back(&c);
    } else {
      CollectUnused(c, out);
    }
  }
}

std::string RelativePath(const XmlElement& e, const XmlElement& ancestor) {
  std::vector<const XmlElement*> chain;
  for (const XmlElement* p = &e; p != nullptr && p != &ancestor; p = p->parent) chain.push_back(p);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += (*it)->QName();
    if ((*it)->repeated) absl::StrAppend(&path, "[", (*it)->position, "]");
  }
  return path;
}

absl::Status ReportUnused(const Ctx& ctx, const XmlElement& record, std::vector<std::string>* warnings) {
  std::vector<const XmlElement*> unused;
  CollectUnused(record, &unused);
  if (unused.empty()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const XmlElement* e : unused) {
    if (e->ns == kFieldsNamespace) {
      return XmlError(&ctx, *e, 0, "is not where Tessera's fields go (tsr:Fields in the record element)");
    }
    if (names.size() < 8) names.push_back(RelativePath(*e, record));
  }
  std::string line = absl::StrCat("ANSI/NIST XML: ", RecordName(ctx.type, ctx.index, ctx.idc), " (", record.Path(),
                                  "): not mapped, skipped: ", absl::StrJoin(names, ", "));
  if (unused.size() > names.size()) absl::StrAppend(&line, " and ", unused.size() - names.size(), " more");
  warnings->push_back(std::move(line));
  return absl::OkStatus();
}

// biom:RecordCategoryCode, which must name the element's record type.
absl::Status CheckCategory(const Ctx& ctx, const XmlElement& record) {
  const Step rcc{kBiom, "RecordCategoryCode"};
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, OneChild(ctx, record, rcc, 0));
  if (e == nullptr) return XmlError(&ctx, record, 0, "has no biom:RecordCategoryCode");
  TESSERA_ASSIGN_OR_RETURN(std::string x, Value(ctx, *e, 0));
  int type = 0;
  if (!ParseNumber(x, 2, &type) || type != ctx.type) {
    return XmlError(&ctx, *e, 0, absl::StrCat("'", Shown(x), "' is not ", ctx.type, ", the type of ", record.QName()));
  }
  return absl::OkStatus();
}

// biom:ImageReferenceIdentification/nc:IdentificationID: the IDC as written.
absl::StatusOr<std::string> ReadIdc(const Ctx& ctx, const XmlElement& record, int* idc) {
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* e,
                           Follow(ctx, &record, Steps("biom:ImageReferenceIdentification/nc:IdentificationID"),
                                  kIdcField));
  if (e == nullptr) {
    return XmlError(&ctx, record, kIdcField, "has no biom:ImageReferenceIdentification/nc:IdentificationID");
  }
  TESSERA_ASSIGN_OR_RETURN(std::string x, Value(ctx, *e, kIdcField));
  if (!ParseNumber(x, 2, idc)) return XmlError(&ctx, *e, kIdcField, absl::StrCat("'", Shown(x), "' is not an IDC (0-99)"));
  return x;
}

struct SummaryEntry {
  int type = 0;
  int idc = 0;
  const XmlElement* element = nullptr;
};

// 1.003 CNT: biom:TransactionContentSummary.
absl::StatusOr<std::vector<SummaryEntry>> ReadContentSummary(const View& v) {
  const Ctx& ctx = v.ctx;
  TESSERA_ASSIGN_OR_RETURN(const XmlElement* cs,
                           OneChild(ctx, *v.transaction, Step{kBiom, "TransactionContentSummary"}, 3));
  if (cs == nullptr) return XmlError(&ctx, *v.transaction, 3, "has no biom:TransactionContentSummary");
  auto number = [&ctx](const XmlElement* parent, absl::string_view path, size_t digits,
                       int* value) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(const XmlElement* e, Follow(ctx, parent, Steps(path), 3));
    if (e == nullptr) return XmlError(&ctx, *parent, 3, absl::StrCat("has no ", path));
    TESSERA_ASSIGN_OR_RETURN(std::string x, Value(ctx, *e, 3));
    if (!ParseNumber(x, digits, value)) return XmlError(&ctx, *e, 3, absl::StrCat("'", Shown(x), "' is not a number"));
    return absl::OkStatus();
  };
  int first = 0, quantity = 0;
  TESSERA_RETURN_IF_ERROR(number(cs, "biom:ContentFirstRecordCategoryCode", 2, &first));
  if (first != 1) return XmlError(&ctx, *cs, 3, absl::StrCat("the first record's type is ", first, ", not 1"));
  TESSERA_RETURN_IF_ERROR(number(cs, "biom:ContentRecordQuantity", 6, &quantity));
  std::vector<SummaryEntry> entries;
  for (const XmlElement* s : Children(*cs, kBiom, "ContentRecordSummary")) {
    SummaryEntry entry;
    entry.element = s;
    TESSERA_RETURN_IF_ERROR(number(s, "biom:RecordCategoryCode", 2, &entry.type));
    TESSERA_RETURN_IF_ERROR(number(s, "biom:ImageReferenceIdentification/nc:IdentificationID", 3, &entry.idc));
    entries.push_back(entry);
  }
  if (static_cast<size_t>(quantity) != entries.size()) {
    return XmlError(&ctx, *cs, 3,
                    absl::StrCat("biom:ContentRecordQuantity says ", quantity, " records follow but ", entries.size(),
                                 " biom:ContentRecordSummary are listed"));
  }
  return entries;
}

// One record element of a covered type.
absl::StatusOr<Record> ReadRecord(const XmlElement& e, int type, int index, std::vector<SummaryEntry>* summary,
                                  std::vector<std::string>* warnings) {
  Ctx ctx;
  ctx.type = type;
  ctx.index = index;
  e.used = true;
  TESSERA_RETURN_IF_ERROR(CheckCategory(ctx, e));
  Record rec;
  rec.type = type;
  std::vector<Field> fields;
  View v;
  v.record = &e;
  if (type == 1) {
    TESSERA_ASSIGN_OR_RETURN(v.transaction, OneChild(ctx, e, Step{kBiom, "Transaction"}, 0));
    if (v.transaction == nullptr) return XmlError(&ctx, e, 0, "has no biom:Transaction");
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::string idc, ReadIdc(ctx, e, &rec.idc));
    ctx.idc = rec.idc;
    fields.push_back(TextField1(kIdcField, std::move(idc)));
  }
  if (IsImageType(type)) {
    std::vector<std::string> names;
    for (absl::string_view name : ImageElementsRead(type)) {
      names.push_back(absl::StrCat("biom:", name));
      TESSERA_ASSIGN_OR_RETURN(const XmlElement* img, OneChild(ctx, e, Step{kBiom, std::string(name)}, 0));
      if (img == nullptr) continue;
      if (v.image != nullptr) return XmlError(&ctx, *img, 0, absl::StrCat("a second image element (after ", v.image->QName(), ")"));
      v.image = img;
    }
    if (v.image == nullptr) return XmlError(&ctx, e, 0, absl::StrCat("has no ", absl::StrJoin(names, " or ")));
  }
  v.ctx = ctx;
  if (type == 1) {
    TESSERA_ASSIGN_OR_RETURN(*summary, ReadContentSummary(v));
    Field cnt;  // written from the records by WriteTransaction
    cnt.number = 3;
    cnt.subfields.push_back({"1", "0"});
    fields.push_back(std::move(cnt));
  }
  TESSERA_RETURN_IF_ERROR(DecodeNamed(v, &fields));
  TESSERA_RETURN_IF_ERROR(DecodeData(v, &fields));
  TESSERA_RETURN_IF_ERROR(DecodeGeneric(v, &fields));
  TESSERA_RETURN_IF_ERROR(ReportUnused(ctx, e, warnings));
  std::stable_sort(fields.begin(), fields.end(), [](const Field& a, const Field& b) { return a.number < b.number; });
  rec.fields = std::move(fields);
  return rec;
}

// ---- writing ------------------------------------------------------------------

// Children in schema order, by the container's local name: listed names
// first, in this order, then the rest as they were.
const std::map<std::string, std::vector<std::string>>& SchemaOrders() {
  static const auto* const kOrders = new std::map<std::string, std::vector<std::string>>{
      {"Transaction",
       {"TransactionDate", "TransactionDestinationOrganization", "TransactionOriginatingOrganization",
        "TransactionUTCDate", "TransactionControlIdentification", "TransactionControlReferenceIdentification",
        "TransactionDomain", "TransactionApplicationProfile", "TransactionImageResolutionDetails",
        "TransactionMajorVersionValue", "TransactionMinorVersionValue", "TransactionPriorityValue",
        "TransactionCategoryCode", "TransactionContentSummary", "TransactionCharacterSetDirectory",
        "TransactionGeographicNameSetCode"}},
      {"FingerprintImage",  // Type-4
       {"BinaryBase64Object", "ImageCaptureDetail", "ImageCompressionAlgorithmCode",
        "ImageHorizontalLineLengthPixelQuantity", "ImageVerticalLineLengthPixelQuantity", "FingerprintImagePosition",
        "FingerprintImageImpressionCaptureCategoryCode"}},
      {"ImageCaptureDetail", {"CaptureResolutionCode", "CaptureDate", "CaptureOrganization"}},
      {"Minutiae",
       {"MinutiaeNISTStandard", "MinutiaeFingerCorePosition", "MinutiaeFingerDeltaPosition",
        "MinutiaeFingerPatternDetail", "MinutiaeFingerPositionCode"}},
      {"MinutiaeNISTStandard",
       {"MinutiaDetail", "MinutiaeQuantity", "MinutiaeReadingSystem", "MinutiaeRidgeCountIndicator"}},
  };
  return *kOrders;
}

const std::vector<std::string>& TaggedImageOrder() {
  static const auto* const kOrder = new std::vector<std::string>{
      "BinaryBase64Object", "ImageBitsPerPixelQuantity", "ImageCaptureDetail", "ImageCommentText",
      "ImageCompressionAlgorithmText", "ImageHorizontalLineLengthPixelQuantity", "ImageHorizontalPixelDensityValue",
      "ImageScaleUnitsCode", "ImageVerticalLineLengthPixelQuantity", "ImageVerticalPixelDensityValue",
      "FingerprintImageImpressionCaptureCategoryCode", "FrictionRidgePositionCode", "FingerPositionCode",
      "PalmPositionCode", "FingerprintImageMajorCasePrint", "FingerprintImageNISTQuality", "FingerprintImageQuality",
      "FrictionRidgeImageQuality", "PalmprintImageQuality"};
  return *kOrder;
}

void SortTree(XmlElement* e) {
  const std::vector<std::string>* order = nullptr;
  const auto& orders = SchemaOrders();
  const auto it = orders.find(e->local);
  if (it != orders.end()) order = &it->second;
  if (e->local == "FrictionRidgeImage" || e->local == "FingerImpressionImage" || e->local == "PalmprintImage") {
    order = &TaggedImageOrder();
  }
  if (order != nullptr) {
    auto rank = [order](const XmlElement& c) {
      // 9.006's palm codes keep their place among the finger codes.
      const std::string& name = c.local == "MinutiaePalmPositionCode" ? "MinutiaeFingerPositionCode" : c.local;
      const auto at = std::find(order->begin(), order->end(), name);
      return static_cast<size_t>(at - order->begin());
    };
    std::stable_sort(e->children.begin(), e->children.end(),
                     [&rank](const XmlElement& a, const XmlElement& b) { return rank(a) < rank(b); });
  }
  for (XmlElement& c : e->children) SortTree(&c);
}

// The named fields a record element under construction decodes to.
absl::StatusOr<std::vector<Field>> DecodeBuilt(int type, const XmlElement& record) {
  View v;
  v.ctx.type = type;
  v.record = &record;
  for (const XmlElement& c : record.children) {
    if (c.Is(kBiomNamespace, "Transaction")) v.transaction = &c;
    if (IsImageType(type) && c.Is(kBiomNamespace, ImageElement(type))) v.image = &c;
  }
  std::vector<Field> out;
  TESSERA_RETURN_IF_ERROR(DecodeNamed(v, &out));
  std::stable_sort(out.begin(), out.end(), [](const Field& a, const Field& b) { return a.number < b.number; });
  return out;
}

void WriteGenericField(const Field& f, XmlElement* fields) {
  XmlElement* x = Add(fields, kTsr, "Field");
  x->attributes.push_back({"", "number", absl::StrCat(f.number)});
  if (f.is_binary) {
    x->attributes.push_back({"", "binary", "true"});
    x->text = absl::Base64Escape(f.binary);
    return;
  }
  if (f.subfields.size() == 1 && f.subfields[0].size() == 1) {
    x->text = f.subfields[0][0];
    return;
  }
  for (const Subfield& s : f.subfields) {
    XmlElement* sub = Add(x, kTsr, "Subfield");
    if (s.size() == 1) {
      sub->text = s[0];
      continue;
    }
    for (const std::string& item : s) Add(sub, kTsr, "Item", item);
  }
}

absl::Status CheckWritable(const Record& rec, int index, const Field& f) {
  if (f.is_binary) return absl::OkStatus();
  if (f.subfields.empty()) return FieldError(rec.type, index, rec.idc, f.number, "has no subfields");
  for (const Subfield& s : f.subfields) {
    if (s.empty()) return FieldError(rec.type, index, rec.idc, f.number, "has a subfield with no items");
    for (const std::string& item : s) {
      if (!IsXmlText(item)) {
        return FieldError(rec.type, index, rec.idc, f.number,
                          absl::StrCat("item '", Shown(item),
                                       "' is not text XML 1.0 can carry (UTF-8 without control characters)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<XmlElement> WriteRecord(const Transaction& t, size_t i, bool* uses_fields) {
  const Record& rec = t.records[i];
  const int index = static_cast<int>(i) + 1;
  const RecordKind* kind = KindByType(rec.type);
  if (kind == nullptr || !kind->covered) {
    return absl::InvalidArgumentError(
        absl::StrCat(RecordName(rec.type, index, rec.idc),
                     ": the XML writer covers record Types 1, 2, 4, 9, 13, 14 and 15 only"));
  }
  XmlElement e = Make(kItl, kind->element);
  Add(&e, kBiom, "RecordCategoryCode", absl::StrCat(rec.type));
  if (rec.type != 1) {
    if (rec.idc < 0 || rec.idc > 99) return FieldError(rec.type, index, rec.idc, kIdcField, "IDC outside 0..99");
    std::string idc = absl::StrFormat("%02d", rec.idc);
    if (const Field* f = rec.Find(kIdcField); f != nullptr && !f->is_binary) {
      int v = -1;
      if (!ParseNumber(f->value(), 2, &v) || v != rec.idc) {
        return FieldError(rec.type, index, rec.idc, kIdcField,
                          absl::StrCat("'", Shown(f->value()), "' differs from the record's IDC ", rec.idc));
      }
      idc = f->value();
    }
    AddPath(&e, Steps("biom:ImageReferenceIdentification/nc:IdentificationID"), idc);
  } else {
    if (rec.Find(3) == nullptr) return FieldError(1, 1, -1, 3, "missing");
    XmlElement* cs = Add(Ensure(&e, kBiom, "Transaction"), kBiom, "TransactionContentSummary");
    Add(cs, kBiom, "ContentFirstRecordCategoryCode", "1");
    Add(cs, kBiom, "ContentRecordQuantity", absl::StrCat(t.records.size() - 1));
    for (size_t k = 1; k < t.records.size(); ++k) {
      XmlElement* s = Add(cs, kBiom, "ContentRecordSummary");
      AddPath(s, Steps("biom:ImageReferenceIdentification/nc:IdentificationID"),
              absl::StrFormat("%02d", t.records[k].idc));
      Add(s, kBiom, "RecordCategoryCode", absl::StrCat(t.records[k].type));
    }
  }
  std::map<int, int> occurrences;
  for (const Field& f : rec.fields) ++occurrences[f.number];
  std::vector<Field> named;  // what the element decodes to so far
  std::vector<const Field*> generic;
  const Field* data = nullptr;
  for (const Field& f : rec.fields) {
    if (f.number < 1 || f.number > 999) return FieldError(rec.type, index, rec.idc, f.number, "field number outside 1..999");
    if (f.number == kLenField) continue;
    if (rec.type != 1 && f.number == kIdcField) continue;
    if (rec.type == 1 && f.number == 3) continue;
    TESSERA_RETURN_IF_ERROR(CheckWritable(rec, index, f));
    const bool once = occurrences[f.number] == 1;
    if (f.number == kDataField && f.is_binary && IsImageType(rec.type) && once) {
      data = &f;
      continue;
    }
    const Mapping* m = once && !f.is_binary ? MappingOf(rec.type, f.number) : nullptr;
    if (m != nullptr) {
      // Named only if the elements give the field back exactly.
      XmlElement trial = e;
      Builder b{rec.type, &trial};
      if (m->encode(f, &b)) {
        std::vector<Field> expected = named;
        expected.push_back(f);
        std::stable_sort(expected.begin(), expected.end(),
                         [](const Field& a, const Field& c) { return a.number < c.number; });
        absl::StatusOr<std::vector<Field>> decoded = DecodeBuilt(rec.type, trial);
        if (decoded.ok() && *decoded == expected) {
          e = std::move(trial);
          named = std::move(expected);
          continue;
        }
      }
    }
    generic.push_back(&f);
  }
  if (data != nullptr) {
    Builder b{rec.type, &e};
    Add(BaseOf(&b, Base::kImage), kNc, "BinaryBase64Object", absl::Base64Escape(data->binary));
  }
  if (!generic.empty()) {
    *uses_fields = true;
    XmlElement* parent = rec.type == 2 ? Ensure(&e, kItl, "UserDefinedDescriptiveDetail") : &e;
    XmlElement* fields = Add(parent, kTsr, "Fields");
    for (const Field* f : generic) WriteGenericField(*f, fields);
  }
  SortTree(&e);
  return e;
}

// An error of the traditional reader on the rewrite, with the XML element of
// the record it names.
absl::Status Reframe(const absl::Status& s, const std::vector<std::pair<std::string, std::string>>& names) {
  std::string message = absl::StrCat("ANSI/NIST XML: ", s.message());
  for (const auto& [name, path] : names) {
    if (absl::StartsWith(s.message(), absl::StrCat(name, ":"))) {
      absl::StrAppend(&message, " (in ", path, ")");
      break;
    }
  }
  return absl::Status(s.code(), message);
}

}  // namespace

absl::StatusOr<Transaction> ParseAnyTransaction(absl::string_view bytes) {
  return LooksLikeXmlTransaction(bytes) ? ParseXmlTransaction(bytes) : ParseTransaction(bytes);
}

bool LooksLikeXmlTransaction(absl::string_view bytes) {
  absl::string_view s = bytes.substr(0, kLookLimit);
  if (absl::StartsWith(s, "\xEF\xBB\xBF")) s.remove_prefix(3);
  for (;;) {
    while (!s.empty() && IsXmlSpace(s.front())) s.remove_prefix(1);
    absl::string_view close;
    if (absl::StartsWith(s, "<?")) {
      close = "?>";
    } else if (absl::StartsWith(s, "<!--")) {
      close = "-->";
    } else if (absl::StartsWith(s, "<!DOCTYPE")) {
      close = ">";  // the reader refuses it, saying why
    } else {
      break;
    }
    const size_t end = s.find(close, 2);
    if (end == absl::string_view::npos) return false;
    s.remove_prefix(end + close.size());
  }
  if (s.empty() || s.front() != '<') return false;
  s.remove_prefix(1);
  const size_t end = s.find_first_of(" \t\r\n/>");
  if (end == absl::string_view::npos) return false;
  absl::string_view name = s.substr(0, end);
  const size_t colon = name.rfind(':');
  if (colon != absl::string_view::npos) name.remove_prefix(colon + 1);
  return name == kPackage;
}

absl::StatusOr<Transaction> ParseXmlTransaction(absl::string_view xml) {
  absl::StatusOr<std::unique_ptr<XmlElement>> doc = ParseXmlDocument(xml);
  if (!doc.ok()) return absl::InvalidArgumentError(absl::StrCat("ANSI/NIST ", doc.status().message()));
  const XmlElement& root = **doc;
  if (root.local != kPackage) {
    return XmlError(nullptr, root, 0, absl::StrCat("the root element is not itl:", kPackage));
  }
  if (root.ns == kItl2008Namespace) {
    return XmlError(nullptr, root, 0,
                    absl::StrCat("ANSI/NIST-ITL 2-2008 XML (namespace ", kItl2008Namespace,
                                 ") is not read; only the 1-2011 encoding (namespace ", kItlNamespace, ")"));
  }
  if (root.ns != kItlNamespace) {
    return XmlError(nullptr, root, 0,
                    absl::StrCat("namespace '", Shown(root.ns), "' is not ANSI/NIST-ITL 1-2011's (", kItlNamespace, ")"));
  }
  Transaction t;
  std::vector<std::string> warnings;
  std::vector<SummaryEntry> summary;
  std::vector<std::pair<int, int>> package;  // every record element's (type, IDC), in order
  std::vector<std::pair<std::string, std::string>> names;  // model record name -> element path
  for (const XmlElement& e : root.children) {
    const RecordKind* kind = e.ns == kItlNamespace ? KindByElement(e.local) : nullptr;
    if (kind == nullptr) return XmlError(nullptr, e, 0, "is not an ANSI/NIST-ITL record element");
    const bool first = package.empty();
    if (first != (kind->type == 1)) {
      return XmlError(nullptr, e, 0,
                      first ? "the package must start with itl:PackageInformationRecord (Type-1)"
                            : "a second itl:PackageInformationRecord (Type-1)");
    }
    const int index = static_cast<int>(t.records.size()) + 1;
    if (!kind->covered) {
      Ctx ctx;
      ctx.type = kind->type;
      ctx.index = index;
      e.used = true;
      int idc = 0;
      TESSERA_RETURN_IF_ERROR(ReadIdc(ctx, e, &idc).status());
      package.emplace_back(kind->type, idc);
      warnings.push_back(absl::StrCat("ANSI/NIST XML: ", e.Path(), " (Type-", kind->type, ", IDC ", idc,
                                      "): record type not covered by the XML reader, skipped"));
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Record rec, ReadRecord(e, kind->type, index, &summary, &warnings));
    package.emplace_back(rec.type, rec.type == 1 ? 0 : rec.idc);
    names.emplace_back(RecordName(rec.type, index, rec.idc), e.Path());
    t.records.push_back(std::move(rec));
  }
  if (package.empty()) return XmlError(nullptr, root, 0, "holds no itl:PackageInformationRecord (Type-1)");
  // The content summary lists every record element after the Type-1, in order.
  const Ctx type1{1, 1, -1};
  const XmlElement& first = root.children[0];
  if (summary.size() != package.size() - 1) {
    return XmlError(&type1, first, 3,
                    absl::StrCat("biom:TransactionContentSummary lists ", summary.size(),
                                 " records; the package holds ", package.size() - 1, " after the Type-1"));
  }
  for (size_t i = 0; i < summary.size(); ++i) {
    if (summary[i].type != package[i + 1].first || summary[i].idc != package[i + 1].second) {
      return XmlError(&type1, *summary[i].element, 3,
                      absl::StrCat("entry ", i + 1, " (Type-", summary[i].type, ", IDC ", summary[i].idc,
                                   ") differs from the package's record ", i + 2, " (",
                                   root.children[i + 1].QName(), ", Type-", package[i + 1].first, ", IDC ",
                                   package[i + 1].second, ")"));
    }
  }
  // The traditional rewrite: LEN and CNT computed, and the same checks.
  absl::StatusOr<std::string> bytes = WriteTransaction(t);
  if (!bytes.ok()) return Reframe(bytes.status(), names);
  absl::StatusOr<Transaction> parsed = ParseTransaction(*bytes);
  if (!parsed.ok()) return Reframe(parsed.status(), names);
  parsed->warnings.insert(parsed->warnings.begin(), warnings.begin(), warnings.end());
  return parsed;
}

absl::StatusOr<std::string> WriteXmlTransaction(const Transaction& t) {
  if (t.records.empty() || t.records[0].type != 1) {
    return absl::InvalidArgumentError("ANSI/NIST transaction: the first record must be Type-1");
  }
  XmlElement root = Make(kItl, kPackage);
  bool uses_fields = false;
  for (size_t i = 0; i < t.records.size(); ++i) {
    if (i > 0 && t.records[i].type == 1) {
      return absl::InvalidArgumentError(absl::StrCat("record ", i + 1, ": a second Type-1"));
    }
    TESSERA_ASSIGN_OR_RETURN(XmlElement e, WriteRecord(t, i, &uses_fields));
    root.children.push_back(std::move(e));
  }
  std::vector<std::pair<std::string, std::string>> namespaces;
  for (Ns ns : {kItl, kBiom, kNc, kTsr}) {
    if (ns == kTsr && !uses_fields) continue;
    namespaces.emplace_back(std::string(PrefixOf(ns)), std::string(Uri(ns)));
  }
  return WriteXmlDocument(root, namespaces);
}

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
