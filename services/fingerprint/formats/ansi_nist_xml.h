// The XML encoding of ANSI/NIST-ITL 1-2011 transactions (the NIEM-conformant
// encoding of ANSI/NIST-ITL 1-2011 and its 2013 update, formerly ANSI/NIST-ITL
// 2-2008): an itl:NISTBiometricInformationExchangePackage whose record
// elements hold biom: (NIEM biometrics 1.0), nc: (NIEM core 2.0) and itl:
// elements, the image data as base64 in nc:BinaryBase64Object.
//
// Both directions map to the same Transaction model as the traditional
// encoding (ansi_nist.h): records with their type and IDC, fields numbered as
// the traditional encoding numbers them (14.006 HLL, 9.012 MRC, ...), so the
// typed views (ansi_nist_views.h) and everything built on them read either
// encoding. ParseXmlTransaction returns exactly what ParseTransaction returns
// for the traditional rewrite of the same content (LEN and CNT computed,
// fields in number order, the views checked).
//
// Covered record types and the fields with their own NIEM elements (the
// element names of NIST's 2011 XML reference files; the full table is in
// ansi_nist_xml.cc):
//   Type-1  itl:PackageInformationRecord: 1.002-1.018 (VER, CNT, TOT, DAT,
//           PRY, DAI, ORI, TCN, TCR, NSR, NTR, DOM, GMT, DCS, APS, ANM, GNS)
//   Type-2  itl:PackageDescriptiveTextRecord: IDC; its fields are domain
//           defined (EBTS, INT-I, ...), kept as numbered text fields (below)
//   Type-4  itl:PackageHighResolutionGrayscaleImageRecord (the 2011 XML has
//           it): IMP, FGP, ISR, HLL, VLL, GCA, DATA
//   Type-9  itl:PackageMinutiaeRecord: IMP, FMT, the legacy NIST standard
//           minutiae 9.005-9.012 (itl:Minutiae), EFS ROI 9.300 and minutiae
//           9.331 (biom:ExtendedFeatureSetMinutiae)
//   Type-13 itl:PackageLatentImageRecord, Type-14 itl:PackageFingerprintImageRecord,
//   Type-15 itl:PackagePalmprintImageRecord: IMP, SRC, capture date, HLL, VLL,
//           SLC, THPS, TVPS, CGA, BPX, FGP, SPD/PPD, PPC, COM, NQM, quality
//           (x.024), DATA
// Every other field of a covered record (and any field whose value the NIEM
// elements cannot carry exactly, e.g. a date that is not YYYYMMDD) is written
// as a numbered field in Tessera's own namespace, kFieldsNamespace:
//   <tsr:Fields><tsr:Field number="22"><tsr:Subfield><tsr:Item>1</tsr:Item>...
// (a field or subfield of one value may hold it as its text), at the end of
// the record element (Type-2: inside itl:UserDefinedDescriptiveDetail, where
// a domain's elements go). Round trips are exact; other readers see those
// fields as elements of an unknown domain.
//
// Reading is lenient about what it does not map: NIEM elements without a
// field here (biom:ProcessAnnotation, GEO, ...), a domain's own Type-2
// elements, and record types not covered (Type-10 faces, Type-17 iris, ...)
// are skipped with a line in Transaction::warnings. Everything else is strict:
// malformed XML, a DOCTYPE, a missing or repeated element, a value that is
// not a number, date or base64 where one is needed, a content summary (CNT)
// that does not list the package's records, and whatever the traditional
// reader refuses, are INVALID_ARGUMENT naming the element path (and line),
// the record and the field:
//   "ANSI/NIST XML: Type-14 record 2 (IDC 1): itl:NISTBiometricInformationExchangePackage/
//    itl:PackageFingerprintImageRecord/biom:FingerImpressionImage/
//    biom:ImageHorizontalLineLengthPixelQuantity (line 31): field 14.006 (HLL): ..."
// Names are matched by namespace URI, not prefix. Only the 2011 namespaces are
// read: 2-2008 documents (itl namespace .../standard/2-2008) are refused.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_XML_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_XML_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/formats/ansi_nist.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {

inline constexpr absl::string_view kItlNamespace = "http://biometrics.nist.gov/standard/2011";
inline constexpr absl::string_view kBiomNamespace = "http://niem.gov/niem/biometrics/1.0";
inline constexpr absl::string_view kNcNamespace = "http://niem.gov/niem/niem-core/2.0";
// Tessera's numbered fields (see the file comment); prefix "tsr".
inline constexpr absl::string_view kFieldsNamespace = "urn:tessera:ansi-nist-itl:fields:1";

// True when `bytes` look like the XML encoding: after an optional UTF-8 BOM,
// the XML declaration, comments and processing instructions, the first
// element is a NISTBiometricInformationExchangePackage (any prefix). Looks at
// the first 64 KiB only.
bool LooksLikeXmlTransaction(absl::string_view bytes);

// Reads an XML package into the traditional model (see the file comment).
absl::StatusOr<Transaction> ParseXmlTransaction(absl::string_view xml);

// Either encoding, told apart by content (LooksLikeXmlTransaction): what
// every reader of client files calls.
absl::StatusOr<Transaction> ParseAnyTransaction(absl::string_view bytes);

// Writes `t` as an XML package. Records of types other than 1, 2, 4, 9, 13,
// 14 and 15, and text that XML 1.0 cannot carry (invalid UTF-8, control
// characters other than tab, LF and CR), are INVALID_ARGUMENT naming the
// record and field. LEN fields are left out and CNT is written from the
// records, as WriteTransaction does.
// ParseXmlTransaction(WriteXmlTransaction(t)) equals
// ParseTransaction(WriteTransaction(t)) with each record's fields in number
// order (stable), for every t WriteTransaction accepts.
absl::StatusOr<std::string> WriteXmlTransaction(const Transaction& t);

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_XML_H_
