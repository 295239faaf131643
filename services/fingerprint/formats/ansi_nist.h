// ANSI/NIST-ITL transactions in the traditional (binary/tagged) encoding:
// ANSI/NIST-ITL 1-2000, 1-2007 and 1-2011 (Type-1 versions "0300", "0400",
// "0500"), the form of FBI EBTS and Interpol INT-I files (.an2, .an2k, .eft).
//
// A file is a Type-1 record followed by the records its CNT field (1.003)
// lists, in that order. Tagged records (Types 1, 2, 9, 10-99) are text
// fields "T.NNN:value" separated by GS (0x1D), subfields by RS (0x1E), items
// by US (0x1F), ending with FS (0x1C); the first field (T.001 LEN) gives the
// record's length in bytes, and T.999 (image data) runs to the FS. Binary
// records (Types 3-8) are read by the 4-byte big-endian length they start
// with; their fixed header is exposed as the numbered fields NBIS uses
// (Type-4: 4.001 LEN, 4.002 IDC, 4.003 IMP, 4.004 FGP (one subfield of 6 items), 4.005
// ISR, 4.006 HLL, 4.007 VLL, 4.008 GCA, 4.999 DATA), so every record has the
// same shape.
//
// The reader never trusts a length: each is checked against the bytes left
// before anything is allocated, so nothing it allocates outgrows the input.
// Every malformed input is INVALID_ARGUMENT naming the record and field, e.g.
//   "Type-14 record 3 (IDC 2): field 14.013 (FGP): '77' is not a finger position".
// The typed views (ansi_nist_views.h) are checked as part of parsing.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {

// The separators of the traditional encoding.
inline constexpr char kFS = 0x1C;  // ends a record
inline constexpr char kGS = 0x1D;  // between fields
inline constexpr char kRS = 0x1E;  // between subfields
inline constexpr char kUS = 0x1F;  // between items

// Field numbers shared by every tagged record.
inline constexpr int kLenField = 1;
inline constexpr int kIdcField = 2;  // except Type-1, where x.002 is VER
inline constexpr int kDataField = 999;

using Subfield = std::vector<std::string>;  // its items

// One field. Text fields keep every subfield and item as written (leading
// zeros included); the binary ones (x.999 and the binary records' data) hold
// their bytes in `binary` with no subfields.
struct Field {
  int number = 0;  // NNN of "T.NNN"
  std::vector<Subfield> subfields;
  std::string binary;
  bool is_binary = false;

  // The first item of the first subfield ("" if none): the value of the
  // usual single-valued field.
  const std::string& value() const;
  bool operator==(const Field& o) const {
    return number == o.number && subfields == o.subfields && binary == o.binary && is_binary == o.is_binary;
  }
};

struct Record {
  int type = 0;  // 1, 2, 4, 9, 13, 14, ...
  int idc = 0;   // information designation character (Type-1: 0)
  std::vector<Field> fields;  // in file order; LEN (x.001) first

  // The first field numbered `number`, or nullptr.
  const Field* Find(int number) const;
  bool operator==(const Record& o) const { return type == o.type && idc == o.idc && fields == o.fields; }
};

struct Transaction {
  std::vector<Record> records;  // records[0] is the Type-1 record
  // Deviations the reader tolerated (a field tagged with another record
  // type, a repeated field number); not part of equality.
  std::vector<std::string> warnings;

  // Type-1 VER (1.002), e.g. "0400"; "" if absent.
  std::string Version() const;
  bool operator==(const Transaction& o) const { return records == o.records; }
};

// True for the record types stored as binary (3-8).
bool IsBinaryRecordType(int type);

// "Type-14 record 3 (IDC 2)": how errors name a record (index is 1-based
// file order, the Type-1 record being 1).
std::string RecordName(int type, int index, int idc);

// "14.013 (FGP)": a field's number with its mnemonic where one is known.
std::string FieldLabel(int record_type, int field);

// INVALID_ARGUMENT "<RecordName>: field <FieldLabel>: <message>".
absl::Status FieldError(int type, int index, int idc, int field, absl::string_view message);

// Parses a whole file. INVALID_ARGUMENT for anything malformed or truncated
// (see the file comment); the typed views are validated too.
absl::StatusOr<Transaction> ParseTransaction(absl::string_view bytes);

// Writes `t` in the traditional encoding. LEN fields are recomputed, and so
// is the Type-1 CNT (1.003) from the records that follow; every other field
// is written as given (Type-2 fields such as 2.001 included, LEN rewritten).
// Supports tagged records of any type and binary Type-3/4/5/6 records.
// INVALID_ARGUMENT when a record or field cannot be encoded (a separator
// inside an item, a missing field of a binary header, a value out of range).
// ParseTransaction(WriteTransaction(t)) == t for any t the reader returns
// whose LEN and CNT values are consistent.
absl::StatusOr<std::string> WriteTransaction(const Transaction& t);

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_H_
