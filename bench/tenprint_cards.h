// Ten-print "cards" made of FVC2002 impressions and the scoring of their
// searches (bench/fingerprint_tenprint_bench.cc, issue 33).
//
// A card is one subject (an FVC2002 finger id 101-110) at one impression
// (1-8): its fingers are that impression in DB1..DB4, finger positions 1..4.
// A gallery holds impression g of every subject; each probe card is an
// impression p != g of one subject: CardPairs lists the ordered (g, p).
//
// Scoring: the per-finger candidate lists of a card are fused per subject by
// the engine's own step (tenprint_search.h FuseBySubject) over any subset of
// the card's fingers, and the true subject's rank is counted as
// latent_rank.h counts a mate's: 1 + the other subjects scoring at least as
// high (ties count against the true subject; a subject found by no finger of
// the subset is not ranked, a miss).
#ifndef TESSERA_BENCH_TENPRINT_CARDS_H_
#define TESSERA_BENCH_TENPRINT_CARDS_H_

#include <string>
#include <utility>
#include <vector>

#include "bench/latent_rank.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/search/tenprint_search.h"

namespace tessera::fingerprint {

// Every ordered (gallery impression g, probe impression p), g != p, of
// impressions 1..n: g-major, then p. n (n - 1) pairs.
std::vector<std::pair<int, int>> CardPairs(int impressions);

// The fingers of `mask` (bit f: card finger f), in card order.
std::vector<int> MaskFingers(unsigned mask);

// "DB1+DB3" style name of a finger subset, from the fingers' names.
std::string SubsetName(unsigned mask, const std::vector<std::string>& finger_names);

// The subjects of the card fingers in `mask` fused by `fusion`, all of them
// (no top-k cut): positions[f] and per_finger[f] are card finger f's
// position and candidates.
std::vector<SubjectMatch> FuseSubset(const std::vector<int>& positions,
                                     const std::vector<std::vector<SearchCandidate>>& per_finger, unsigned mask,
                                     TenPrintFusion fusion);

// `subject`'s rank in a fused list (any order), ties against it.
MateRank SubjectRank(const std::vector<SubjectMatch>& fused, const std::string& subject);

// Two-sided exact sign test (McNemar's exact test) of b cards won only by one
// rule against c won only by the other: P(|X - n/2| >= |b - n/2|), X ~
// Binomial(b + c, 1/2). 1 when b + c == 0.
double SignTestP(int b, int c);

// Open-set identification from the same searches (as NIST's FRVT/ELFT count
// it): a card's best non-mate subject score stands for the top of a
// non-mated search (the same search with the subject not enrolled), so the
// threshold t that at most floor(fpir * n) of the n non-mated tops reach or
// pass gives FPIR <= fpir, and TPIR = the share of cards whose subject is
// rank 1 with a score above t. mated[k]: card k's subject score when it is
// rank 1, else NaN; nonmated_top[k]: its best non-mate's score (-inf when
// there is none). *threshold (may be null): t (-inf when every card may pass).
double TpirAtFpir(const std::vector<float>& mated, std::vector<float> nonmated_top, double fpir,
                  float* threshold = nullptr);

// (errors_a - errors_b) / errors_a: the share of a's errors that b removes
// (negative when b errs more); 0 when a makes none.
double ErrorReduction(int errors_a, int errors_b);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_TENPRINT_CARDS_H_
