#include "services/fingerprint/formats/ansi_nist.h"

#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "services/fingerprint/formats/ansi_nist_views.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

// Binary image records (Types 3-6): LEN(4) IDC(1) IMP(1) FGP(6) ISR(1)
// HLL(2) VLL(2) GCA(1), then the image.
constexpr size_t kBinaryImageHeader = 18;
constexpr size_t kType7Header = 5;   // LEN(4) IDC(1)
constexpr size_t kType8Header = 12;  // LEN(4) IDC(1) SIG(1) SRT(1) ISR(1) HLL(2) VLL(2)

// A tag's numbers are short; more digits than this is garbage, not a number.
constexpr size_t kMaxTagDigits = 9;

// What ends a text field: GS, or FS for a record's last field.
constexpr absl::string_view kFieldEnds("\x1d\x1c", 2);

std::string Shown(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 24)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 24) out += "...";
  return out;
}

// Unsigned decimal of 1..max_digits digits.
bool ParseDigits(absl::string_view s, size_t max_digits, uint64_t* v) {
  if (s.empty() || s.size() > max_digits) return false;
  uint64_t r = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    r = r * 10 + static_cast<uint64_t>(c - '0');
  }
  *v = r;
  return true;
}

// "T.NNN:" at the start of `s`: sets the numbers and the tag's length.
bool ParseTag(absl::string_view s, int* type, int* number, size_t* length) {
  const size_t dot = s.substr(0, kMaxTagDigits + 1).find('.');
  if (dot == absl::string_view::npos) return false;
  const size_t colon = s.substr(0, dot + kMaxTagDigits + 2).find(':', dot + 1);
  if (colon == absl::string_view::npos) return false;
  uint64_t t = 0, n = 0;
  if (!ParseDigits(s.substr(0, dot), 2, &t) || !ParseDigits(s.substr(dot + 1, colon - dot - 1), 3, &n)) return false;
  *type = static_cast<int>(t);
  *number = static_cast<int>(n);
  *length = colon + 1;
  return true;
}

Field TextField(int number, absl::string_view value) {
  Field f;
  f.number = number;
  for (absl::string_view sub : absl::StrSplit(value, kRS)) {
    Subfield items;
    for (absl::string_view item : absl::StrSplit(sub, kUS)) items.emplace_back(item);
    f.subfields.push_back(std::move(items));
  }
  return f;
}

Field NumberField(int number, uint64_t v) { return TextField(number, absl::StrCat(v)); }

class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}

  absl::StatusOr<Transaction> Read();

 private:
  absl::Status ReadTagged(int type, int index, int cnt_idc, Record* rec);
  absl::Status ReadBinary(int type, int index, int cnt_idc, Record* rec);

  absl::string_view bytes_;
  size_t pos_ = 0;
  Transaction t_;
};

absl::Status Reader::ReadTagged(int type, int index, int cnt_idc, Record* rec) {
  const std::string name = RecordName(type, index, cnt_idc);
  const absl::string_view rest = bytes_.substr(pos_);
  rec->type = type;
  int tag_type = 0, number = 0;
  size_t tag_len = 0;
  if (!ParseTag(rest, &tag_type, &number, &tag_len)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": at byte ", pos_, ": no field tag (expected ", type,
                                                   ".001:), found '", Shown(rest), "'"));
  }
  if (tag_type != type || number != kLenField) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": at byte ", pos_, ": starts with field ", tag_type, ".",
                                                   absl::StrFormat("%03d", number), ", not ", type,
                                                   ".001 (LEN) as 1.003 (CNT) says"));
  }
  const size_t len_end = rest.substr(0, tag_len + 12).find_first_of(kFieldEnds, tag_len);
  uint64_t len = 0;
  if (len_end == absl::string_view::npos || !ParseDigits(rest.substr(tag_len, len_end - tag_len), 10, &len)) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("'", Shown(rest.substr(tag_len, 12)), "' is not a record length"));
  }
  if (len > rest.size()) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("record length ", len, " overruns the file (", rest.size(), " bytes remain)"));
  }
  if (len < len_end + 1) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("record length ", len, " ends inside the LEN field itself"));
  }
  const absl::string_view r = rest.substr(0, len);
  const size_t end = len - 1;  // where the FS must be
  if (r[end] != kFS) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("the record of ", len, " bytes does not end with FS (0x1C)"));
  }
  rec->fields.push_back(NumberField(kLenField, len));
  std::map<int, int> seen{{kLenField, 1}};
  size_t p = len_end + (r[len_end] == kGS ? 1 : 0);
  int last = kLenField;
  while (p < end) {
    if (!ParseTag(r.substr(p, end - p), &tag_type, &number, &tag_len)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": after field ", FieldLabel(type, last), ": '",
                                                     Shown(r.substr(p, end - p)), "' is not a field tag"));
    }
    if (tag_type != type) {
      t_.warnings.push_back(absl::StrCat(name, ": field ", number, " is tagged ", tag_type, ".",
                                         absl::StrFormat("%03d", number), "; read as ", type, ".",
                                         absl::StrFormat("%03d", number)));
    }
    if (number == kLenField) {
      return FieldError(type, index, cnt_idc, kLenField, "appears twice");
    }
    if (number < 1) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": after field ", FieldLabel(type, last),
                                                     ": field number 0 in tag '", Shown(r.substr(p, tag_len)), "'"));
    }
    if (seen[number] > 0 && (number == kIdcField || (type == 1 && number == 3))) {
      return FieldError(type, index, cnt_idc, number, "appears twice");  // which one would count?
    }
    if (++seen[number] == 2) {
      t_.warnings.push_back(absl::StrCat(name, ": field ", FieldLabel(type, number), " appears more than once"));
    }
    const size_t q = p + tag_len;
    if (number == kDataField) {  // binary to the end of the record
      Field f;
      f.number = number;
      f.is_binary = true;
      f.binary = std::string(r.substr(q, end - q));
      rec->fields.push_back(std::move(f));
      p = end;
      break;
    }
    const size_t e = r.find_first_of(kFieldEnds, q);
    if (r[e] == kFS && e != end) {
      return FieldError(type, index, cnt_idc, number,
                        absl::StrCat("FS (end of record) at byte ", e, " of a record whose LEN says ", len));
    }
    rec->fields.push_back(TextField(number, r.substr(q, e - q)));
    last = number;
    p = r[e] == kGS ? e + 1 : e;
  }
  pos_ += len;
  if (type == 1) return absl::OkStatus();
  const Field* idc = rec->Find(kIdcField);
  if (idc == nullptr) return FieldError(type, index, cnt_idc, kIdcField, "missing");
  uint64_t v = 0;
  if (!ParseDigits(idc->value(), 2, &v) || idc->subfields.size() != 1 || idc->subfields[0].size() != 1) {
    return FieldError(type, index, cnt_idc, kIdcField, absl::StrCat("'", Shown(idc->value()), "' is not an IDC"));
  }
  rec->idc = static_cast<int>(v);
  return absl::OkStatus();
}

absl::Status Reader::ReadBinary(int type, int index, int cnt_idc, Record* rec) {
  const absl::string_view rest = bytes_.substr(pos_);
  rec->type = type;
  const size_t header = (type == 7) ? kType7Header : (type == 8) ? kType8Header : kBinaryImageHeader;
  if (rest.size() < header) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("the ", header, "-byte header at byte ", pos_, " is cut off (", rest.size(),
                                   " bytes remain)"));
  }
  auto u8 = [&rest](size_t at) { return static_cast<uint64_t>(static_cast<uint8_t>(rest[at])); };
  auto u16 = [&u8](size_t at) { return (u8(at) << 8) | u8(at + 1); };
  const uint64_t len = (u16(0) << 16) | u16(2);
  if (len < header) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("record length ", len, " is shorter than its ", header, "-byte header"));
  }
  if (len > rest.size()) {
    return FieldError(type, index, cnt_idc, kLenField,
                      absl::StrCat("record length ", len, " overruns the file (", rest.size(), " bytes remain)"));
  }
  rec->idc = static_cast<int>(u8(4));
  rec->fields.push_back(NumberField(1, len));
  rec->fields.push_back(NumberField(2, static_cast<uint64_t>(rec->idc)));
  if (type == 8) {
    rec->fields.push_back(NumberField(3, u8(5)));   // SIG
    rec->fields.push_back(NumberField(4, u8(6)));   // SRT
    rec->fields.push_back(NumberField(5, u8(7)));   // ISR
    rec->fields.push_back(NumberField(6, u16(8)));  // HLL
    rec->fields.push_back(NumberField(7, u16(10))); // VLL
  } else if (type != 7) {
    rec->fields.push_back(NumberField(3, u8(5)));  // IMP
    Field fgp;  // one subfield of 6 items, as NBIS an2k2txt shows it
    fgp.number = 4;
    fgp.subfields.emplace_back();
    for (size_t i = 0; i < 6; ++i) fgp.subfields[0].push_back(absl::StrCat(u8(6 + i)));
    rec->fields.push_back(std::move(fgp));
    rec->fields.push_back(NumberField(5, u8(12)));   // ISR
    rec->fields.push_back(NumberField(6, u16(13)));  // HLL
    rec->fields.push_back(NumberField(7, u16(15)));  // VLL
    rec->fields.push_back(NumberField(8, u8(17)));   // GCA
  }
  Field data;
  data.number = kDataField;
  data.is_binary = true;
  data.binary = std::string(rest.substr(header, len - header));
  rec->fields.push_back(std::move(data));
  pos_ += len;
  return absl::OkStatus();
}

absl::StatusOr<Transaction> Reader::Read() {
  if (bytes_.empty()) return absl::InvalidArgumentError("ANSI/NIST transaction: the file is empty");
  Record type1;
  TESSERA_RETURN_IF_ERROR(ReadTagged(1, 1, -1, &type1));
  const Field* cnt = type1.Find(3);
  if (cnt == nullptr) return FieldError(1, 1, -1, 3, "missing");
  // CNT: "1<US>n" then n subfields "type<US>IDC".
  uint64_t count = 0;
  if (cnt->subfields[0].size() != 2 || cnt->subfields[0][0] != "1" ||
      !ParseDigits(cnt->subfields[0][1], 6, &count)) {
    return FieldError(1, 1, -1, 3,
                      absl::StrCat("first subfield '", Shown(absl::StrJoin(cnt->subfields[0], ",")),
                                   "' is not '1,<number of other records>'"));
  }
  if (count != cnt->subfields.size() - 1) {
    return FieldError(1, 1, -1, 3,
                      absl::StrCat("says ", count, " records follow but lists ", cnt->subfields.size() - 1));
  }
  t_.records.push_back(std::move(type1));
  for (size_t i = 1; i < cnt->subfields.size(); ++i) {
    const Subfield& entry = t_.records[0].Find(3)->subfields[i];
    uint64_t type = 0, idc = 0;
    if (entry.size() != 2 || !ParseDigits(entry[0], 2, &type) || !ParseDigits(entry[1], 3, &idc) || type < 2 ||
        idc > 255) {
      return FieldError(1, 1, -1, 3,
                        absl::StrCat("entry ", i, " '", Shown(absl::StrJoin(entry, ",")),
                                     "' is not '<record type>,<IDC>'"));
    }
    const int index = static_cast<int>(i) + 1;
    if (pos_ == bytes_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(RecordName(static_cast<int>(type), index, static_cast<int>(idc)),
                                                     ": missing: the file ends after ", index - 1,
                                                     " records (1.003 (CNT) lists ", count + 1, ")"));
    }
    Record rec;
    if (IsBinaryRecordType(static_cast<int>(type))) {
      TESSERA_RETURN_IF_ERROR(ReadBinary(static_cast<int>(type), index, static_cast<int>(idc), &rec));
    } else {
      TESSERA_RETURN_IF_ERROR(ReadTagged(static_cast<int>(type), index, static_cast<int>(idc), &rec));
    }
    if (rec.idc != static_cast<int>(idc)) {
      return FieldError(rec.type, index, static_cast<int>(idc), kIdcField,
                        absl::StrCat("IDC ", rec.idc, " differs from ", idc, " in entry ", i, " of 1.003 (CNT)"));
    }
    t_.records.push_back(std::move(rec));
  }
  if (pos_ != bytes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ANSI/NIST transaction: ", bytes_.size() - pos_,
                                                   " bytes after the last record that 1.003 (CNT) lists (record ",
                                                   t_.records.size(), ", ending at byte ", pos_, ")"));
  }
  TESSERA_RETURN_IF_ERROR(Images(t_).status());
  TESSERA_RETURN_IF_ERROR(Minutiae(t_).status());
  return std::move(t_);
}

// ---- writing ----

absl::Status CheckText(const Record& rec, int index, const Field& f) {
  if (f.subfields.empty()) return FieldError(rec.type, index, rec.idc, f.number, "has no subfields");
  for (const Subfield& s : f.subfields) {
    if (s.empty()) return FieldError(rec.type, index, rec.idc, f.number, "has a subfield with no items");
    for (const std::string& item : s) {
      if (item.find_first_of("\x1c\x1d\x1e\x1f") != std::string::npos) {
        return FieldError(rec.type, index, rec.idc, f.number,
                          absl::StrCat("item '", Shown(item), "' contains a separator (FS, GS, RS or US)"));
      }
    }
  }
  return absl::OkStatus();
}

std::string JoinField(const Field& f) {
  std::string out;
  for (size_t s = 0; s < f.subfields.size(); ++s) {
    if (s) out += kRS;
    for (size_t i = 0; i < f.subfields[s].size(); ++i) {
      if (i) out += kUS;
      out += f.subfields[s][i];
    }
  }
  return out;
}

absl::StatusOr<std::string> WriteTagged(const Record& rec, int index, const Field* cnt_override) {
  std::string body;  // every field after LEN, each preceded by GS
  bool has_idc = rec.type == 1;
  for (const Field& f : rec.fields) {
    if (f.number == kLenField) continue;
    if (f.number < 1 || f.number > 999) {
      return FieldError(rec.type, index, rec.idc, f.number, "field number outside 1..999");
    }
    body += kGS;
    body += absl::StrFormat("%d.%03d:", rec.type, f.number);
    if (f.is_binary) {
      if (f.number != kDataField) return FieldError(rec.type, index, rec.idc, f.number, "binary but not x.999");
      if (&f != &rec.fields.back()) {
        return FieldError(rec.type, index, rec.idc, f.number, "binary data must be the record's last field");
      }
      body += f.binary;
      continue;
    }
    const Field& text = (cnt_override != nullptr && f.number == 3) ? *cnt_override : f;
    TESSERA_RETURN_IF_ERROR(CheckText(rec, index, text));
    if (rec.type != 1 && f.number == kIdcField) {
      uint64_t v = 0;
      if (!ParseDigits(f.value(), 2, &v) || static_cast<int>(v) != rec.idc) {
        return FieldError(rec.type, index, rec.idc, kIdcField,
                          absl::StrCat("'", Shown(f.value()), "' differs from the record's IDC ", rec.idc));
      }
      has_idc = true;
    }
    body += JoinField(text);
  }
  if (!has_idc) return FieldError(rec.type, index, rec.idc, kIdcField, "missing");
  const std::string tag = absl::StrFormat("%d.001:", rec.type);
  // The length counts its own digits: find the fixed point.
  size_t digits = 1;
  size_t total = 0;
  for (;;) {
    total = tag.size() + digits + body.size() + 1;
    const size_t need = absl::StrCat(total).size();
    if (need == digits) break;
    digits = need;
  }
  std::string out = absl::StrCat(tag, total, body);
  out += kFS;
  return out;
}

absl::StatusOr<uint64_t> HeaderValue(const Record& rec, int index, int number, uint64_t max) {
  const Field* f = rec.Find(number);
  uint64_t v = 0;
  if (f == nullptr) return FieldError(rec.type, index, rec.idc, number, "missing");
  if (!ParseDigits(f->value(), 10, &v) || v > max) {
    return FieldError(rec.type, index, rec.idc, number, absl::StrCat("'", Shown(f->value()), "' is not 0..", max));
  }
  return v;
}

absl::StatusOr<std::string> WriteBinary(const Record& rec, int index) {
  const Field* data = rec.Find(kDataField);
  if (data == nullptr || !data->is_binary) return FieldError(rec.type, index, rec.idc, kDataField, "missing");
  if (rec.idc < 0 || rec.idc > 255) {
    return FieldError(rec.type, index, rec.idc, kIdcField, "IDC outside 0..255 (one byte)");
  }
  std::string head;
  auto u8 = [&head](uint64_t v) { head += static_cast<char>(v & 0xff); };
  auto u16 = [&u8](uint64_t v) {
    u8(v >> 8);
    u8(v);
  };
  if (rec.type == 8) {
    for (int n : {3, 4, 5}) {
      TESSERA_ASSIGN_OR_RETURN(uint64_t v, HeaderValue(rec, index, n, 255));
      u8(v);
    }
    for (int n : {6, 7}) {
      TESSERA_ASSIGN_OR_RETURN(uint64_t v, HeaderValue(rec, index, n, 65535));
      u16(v);
    }
  } else if (rec.type != 7) {
    TESSERA_ASSIGN_OR_RETURN(uint64_t imp, HeaderValue(rec, index, 3, 255));
    u8(imp);
    const Field* fgp = rec.Find(4);
    if (fgp == nullptr || fgp->subfields.size() != 1 || fgp->subfields[0].size() != 6) {
      return FieldError(rec.type, index, rec.idc, 4, "needs one subfield of exactly 6 items (one per byte)");
    }
    for (const std::string& item : fgp->subfields[0]) {
      uint64_t v = 0;
      if (!ParseDigits(item, 3, &v) || v > 255) {
        return FieldError(rec.type, index, rec.idc, 4, absl::StrCat("'", Shown(item), "' is not a byte (0..255)"));
      }
      u8(v);
    }
    TESSERA_ASSIGN_OR_RETURN(uint64_t isr, HeaderValue(rec, index, 5, 255));
    u8(isr);
    for (int n : {6, 7}) {
      TESSERA_ASSIGN_OR_RETURN(uint64_t v, HeaderValue(rec, index, n, 65535));
      u16(v);
    }
    TESSERA_ASSIGN_OR_RETURN(uint64_t gca, HeaderValue(rec, index, 8, 255));
    u8(gca);
  }
  const uint64_t len = 5 + head.size() + data->binary.size();
  if (len > 0xffffffffu) return FieldError(rec.type, index, rec.idc, kLenField, "record over 4 GiB");
  std::string out;
  for (int shift : {24, 16, 8, 0}) out += static_cast<char>((len >> shift) & 0xff);
  out += static_cast<char>(rec.idc);
  out += head;
  out += data->binary;
  return out;
}

}  // namespace

const std::string& Field::value() const {
  static const std::string* const kEmpty = new std::string();
  if (subfields.empty() || subfields[0].empty()) return *kEmpty;
  return subfields[0][0];
}

const Field* Record::Find(int number) const {
  for (const Field& f : fields) {
    if (f.number == number) return &f;
  }
  return nullptr;
}

std::string Transaction::Version() const {
  if (records.empty() || records[0].type != 1) return "";
  const Field* ver = records[0].Find(2);
  return ver == nullptr ? "" : ver->value();
}

bool IsBinaryRecordType(int type) { return type >= 3 && type <= 8; }

std::string RecordName(int type, int index, int idc) {
  std::string s = absl::StrCat("Type-", type, " record ", index);
  if (idc >= 0 && type != 1) absl::StrAppend(&s, " (IDC ", idc, ")");
  return s;
}

std::string FieldLabel(int type, int field) {
  const char* name = nullptr;
  if (field == kLenField) name = "LEN";
  if (field == kIdcField) name = type == 1 ? "VER" : "IDC";
  if (field == kDataField) name = "DATA";
  if (type == 1) {
    static const char* const kType1[] = {nullptr, nullptr, nullptr, "CNT", "TOT", "DAT", "PRY", "DAI",
                                         "ORI",   "TCN",   "TCR",   "NSR", "NTR", "DOM", "GMT", "DCS"};
    if (field >= 3 && field <= 15) name = kType1[field];
  } else if (IsBinaryRecordType(type) && type != 7 && type != 8) {
    static const char* const kType4[] = {nullptr, nullptr, nullptr, "IMP", "FGP", "ISR", "HLL", "VLL", "GCA"};
    if (field >= 3 && field <= 8) name = kType4[field];
  } else if (type == 9) {
    static const char* const kType9[] = {nullptr, nullptr, nullptr, "IMP", "FMT", "OFR", "FGP",
                                         "FPC",   "CRP",   "DLT",   "MIN", "RDG", "MRC"};
    if (field >= 3 && field <= 12) name = kType9[field];
    if (field == 300) name = "ROI";
    if (field == 331) name = "MIN (EFS)";
  } else if (type >= 13 && type <= 15) {
    static const char* const kImage[] = {nullptr, nullptr, nullptr, "IMP", "SRC", "CD",  "HLL",
                                         "VLL",   "SLC",   "THPS",  "TVPS", "CGA", "BPX", "FGP"};
    if (field >= 3 && field <= 13) name = kImage[field];
    if (type == 15 && field == 13) name = "PLP";
  }
  std::string s = absl::StrFormat("%d.%03d", type, field);
  if (name != nullptr) absl::StrAppend(&s, " (", name, ")");
  return s;
}

absl::Status FieldError(int type, int index, int idc, int field, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(RecordName(type, index, idc), ": field ", FieldLabel(type, field), ": ", message));
}

absl::StatusOr<Transaction> ParseTransaction(absl::string_view bytes) { return Reader(bytes).Read(); }

absl::StatusOr<std::string> WriteTransaction(const Transaction& t) {
  if (t.records.empty() || t.records[0].type != 1) {
    return absl::InvalidArgumentError("ANSI/NIST transaction: the first record must be Type-1");
  }
  Field cnt;
  cnt.number = 3;
  cnt.subfields.push_back({"1", absl::StrCat(t.records.size() - 1)});
  for (size_t i = 1; i < t.records.size(); ++i) {
    const Record& r = t.records[i];
    if (r.type < 2 || r.type > 99) {
      return absl::InvalidArgumentError(absl::StrCat(RecordName(r.type, static_cast<int>(i) + 1, r.idc),
                                                     ": record type outside 2..99"));
    }
    if (r.idc < 0 || r.idc > 99) {
      return FieldError(r.type, static_cast<int>(i) + 1, r.idc, kIdcField, "IDC outside 0..99");
    }
    cnt.subfields.push_back({absl::StrCat(r.type), absl::StrFormat("%02d", r.idc)});
  }
  if (t.records[0].Find(3) == nullptr) return FieldError(1, 1, -1, 3, "missing");
  std::string out;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const Record& r = t.records[i];
    const int index = static_cast<int>(i) + 1;
    if (i > 0 && r.type == 1) return absl::InvalidArgumentError(absl::StrCat("record ", index, ": a second Type-1"));
    absl::StatusOr<std::string> bytes;
    if (IsBinaryRecordType(r.type)) {
      if (r.type != 3 && r.type != 4 && r.type != 5 && r.type != 6) {
        return absl::InvalidArgumentError(absl::StrCat(RecordName(r.type, index, r.idc), ": writing is not supported"));
      }
      bytes = WriteBinary(r, index);
    } else {
      bytes = WriteTagged(r, index, i == 0 ? &cnt : nullptr);
    }
    if (!bytes.ok()) return bytes.status();
    out += *bytes;
  }
  return out;
}

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
