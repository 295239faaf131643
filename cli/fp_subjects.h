// `tessera fp` pieces for subjects and finger positions (verb_fp_subjects.cc):
// metadata from flags, candidates and metadata as JSON, ten-print search of a
// card file, and the subject subcommands.
#ifndef TESSERA_CLI_FP_SUBJECTS_H_
#define TESSERA_CLI_FP_SUBJECTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/transaction_response.h"

namespace tessera::cli {

// The flags these pieces read (added to `tessera fp`'s).
std::vector<FlagSpec> FpSubjectFlags();

// --subject, --finger, --impression, --attr k=v,...: the metadata enrolled
// with plain template and image files (INVALID_ARGUMENT naming the flag).
absl::StatusOr<fingerprint::TemplateMetadata> MetadataFromFlags(const Args& args);
// --attr alone (added to every finger of a transaction).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> AttributesFromFlags(const Args& args);
// --finger-positions, --impression-types.
absl::StatusOr<fingerprint::TemplateFilter> FilterFromFlags(const Args& args);

// {"id": ..., "score": ..., "subject": ..., "finger": ..., ...}
std::string CandidateJson(const fingerprint::SearchCandidate& c);

// A card file (not a latent submission): its fingers searched by position
// and fused per subject (--fusion sum|max); the JSON entry of the file.
// `probes`: the card's SearchableProbes.
absl::StatusOr<std::string> TenPrintSearchJson(const std::string& name, const fingerprint::TransactionCard& card,
                                               const fingerprint::TransactionProbes& probes, const Args& args,
                                               int top_k, fingerprint::GallerySearcher& searcher);

// `fp subjects`, `fp subject ID...`, `fp delete-subject ID...`.
int ListSubjects(fingerprint::FingerprintGallery& gallery);
int ShowSubjects(const Args& args, fingerprint::FingerprintGallery& gallery);
int DeleteSubjects(const Args& args, fingerprint::FingerprintGallery& gallery);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_FP_SUBJECTS_H_
