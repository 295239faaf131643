// Tests' ANSI/NIST-ITL transactions: single-finger image records of
// synthetic prints (raw 8-bit, 500 ppi) and a Type-1 header counting them.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TESTING_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TESTING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"

namespace tessera {
namespace fingerprint {
namespace transaction_testing {

using ansi_nist_testing::F;
using ansi_nist_testing::V;

// A Type-14 (or Type-13: a latent) record of synthetic print `print`, at
// finger position `fgp` with impression type `imp`.
inline ansi_nist::Record PrintRecord(int idc, int fgp, const SyntheticPrintOptions& print, int type = 14, int imp = 1) {
  const GrayImage img = SyntheticPrint(print);
  ansi_nist::Field data;
  data.number = ansi_nist::kDataField;
  data.is_binary = true;
  data.binary.assign(img.pixels.begin(), img.pixels.end());
  return ansi_nist::Record{type, idc, {V(1, "0"), V(2, std::to_string(idc)), V(3, std::to_string(imp)), V(4, "SRC"),
                                       V(5, "20261206"), V(6, std::to_string(img.width)),
                                       V(7, std::to_string(img.height)), V(8, "1"), V(9, "500"), V(10, "500"),
                                       V(11, "NONE"), V(12, "8"), F(13, {{std::to_string(fgp)}}), data}};
}

// A transaction: Type-1 (TOT `tot`, TCN `tcn`, date 2026-12-06), an empty
// Type-2, then `records` (whose types the Type-1 CNT lists).
inline absl::StatusOr<std::string> TransactionBytes(const std::string& tot, const std::string& tcn,
                                                    std::vector<ansi_nist::Record> records) {
  ansi_nist::Transaction t;
  std::vector<ansi_nist::Subfield> cnt = {{"1", std::to_string(records.size() + 1)}, {"2", "0"}};
  for (const ansi_nist::Record& r : records) cnt.push_back({std::to_string(r.type), std::to_string(r.idc)});
  t.records.push_back(ansi_nist::Record{1, 0, {V(1, "0"), V(2, "0500"), F(3, cnt), V(4, tot), V(5, "20261206"),
                                               V(7, "DAI"), V(8, "ORI"), V(9, tcn), V(11, "19.69"), V(12, "19.69")}});
  t.records.push_back(ansi_nist::Record{2, 0, {V(1, "0"), V(2, "00")}});
  for (ansi_nist::Record& r : records) t.records.push_back(std::move(r));
  return ansi_nist::WriteTransaction(t);
}

}  // namespace transaction_testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_TRANSACTION_TESTING_H_
