// FingerprintShardRouter: a tessera.v1.FingerprintService that owns no
// gallery and fronts N shard servers (FingerprintService endpoints, each with
// its own gallery), so that the shards together behave as one gallery.
//
//   Enroll, Delete, Verify{id}  -> the id's shard: ShardForId(id, N), FNV-1a
//                                  64 of the id's bytes mod N (stable across
//                                  processes, platforms and releases)
//   EnrollStream                -> one stream per shard that gets items; the
//                                  per-item errors merged back in request
//                                  order (indices are the caller's)
//   Verify{reference}, Extract  -> any shard (round robin; the next one if
//                                  that one is unavailable: it is stateless)
//   List                        -> every shard, merged in byte order; the
//                                  page token is the last id of the page, as
//                                  on one server (see List below)
//   Search, SearchBatch         -> every shard in parallel, merged with
//                                  MergeShardResponses (shard_merge.h)
//   CreateGallery               -> every shard (a retry completes a partial create)
//   DeleteGallery               -> every shard (a retry completes a partial delete)
//   ListGalleries               -> every shard, sizes summed per name
//   GetSubject                  -> every shard (a subject's templates are
//                                  spread over the shards by id), merged by
//                                  id; NOT_FOUND only when every shard says so
//   ListSubjects                -> every shard, merged in byte order with the
//                                  counts summed per subject; the page token
//                                  is the page's last subject, as on one
//                                  server (see ListSubjects below)
//   DeleteSubject               -> every shard, counts and sizes summed;
//                                  NOT_FOUND only when every shard says so (a
//                                  retry completes a partial delete)
//   EnrollTransaction           -> the card read (and its images extracted)
//                                  here, on the router's CPU; each finger's
//                                  ISO template an Enroll to its id's shard
//   SearchTransaction           -> the card read here; each probe a Search
//                                  over every shard as above (latent), or a
//                                  ten-print search whose per-finger searches
//                                  are such Searches, fused here
// Requests are forwarded whole: metadata (Enroll, EnrollStream), filters
// and `explain` (Search, SearchBatch, Verify) reach the shards as sent, and
// merged candidates keep their metadata and explanation.
// Image probes of Search and SearchBatch are extracted once, by one shard
// (Extract, round robin), and the template goes to every shard: N shards do
// not extract the same image N times. A transaction's images are extracted
// by the router itself, under its own image limits and default quality gate
// (set_image_limits; what one server takes from its options, e.g.
// --fp-min-quality).
// Requests go to the shards as they came, so their `gallery` names the same
// gallery there (each shard holds its part of every gallery; the router's
// peer token must be granted the galleries it forwards, e.g. galleries=*).
//
// Every shard call inherits the caller's deadline and cancellation
// (grpc::ClientContext::FromServerContext): a client that goes cancels the
// shards' work too.
//
// Failure policy: a shard that fails a search fails the whole call with
// UNAVAILABLE naming the shard, and the other shards' calls are cancelled. A
// partial answer is never returned: the missing shard could hold the mate,
// and a top-k without it would look complete while silently missing it.
// The same holds for every call that needs all shards (List, the subject
// calls, transactions): a shard that fails it fails the call (UNAVAILABLE
// naming it), and what a write had already stored elsewhere is said in the
// message (a retry completes it).
// Errors the request itself caused pass through unchanged (INVALID_ARGUMENT,
// NOT_FOUND, ALREADY_EXISTS, OUT_OF_RANGE, RESOURCE_EXHAUSTED with the
// shard's retry hint, and DEADLINE_EXCEEDED / CANCELLED when the caller's
// deadline passed or it cancelled), so a client sees what one server would
// have said.
//
// The routing depends on N and on the order of the shards: keep the list
// fixed (tessera serve --fp-shard flags, in order). Changing it needs the
// templates moved to their new shards (not done here).
#ifndef TESSERA_SERVICES_FINGERPRINT_SHARD_ROUTER_H_
#define TESSERA_SERVICES_FINGERPRINT_SHARD_ROUTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "services/fingerprint/search_request.h"
#include "services/server/bearer_channel.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace fingerprint {

// FNV-1a, 64 bits, of `bytes` (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3). Fixed for good: it decides where every template lives.
uint64_t Fnv1a64(absl::string_view bytes);

// The shard (0..shards-1) that holds template `id`.
int ShardForId(absl::string_view id, int shards);

}  // namespace fingerprint

struct FingerprintShard {
  std::string name;  // for messages and logs, e.g. "10.0.0.7:50051"
  std::shared_ptr<grpc::Channel> channel;
};

class FingerprintShardRouter final : public v1::FingerprintService::Service {
 public:
  // INVALID_ARGUMENT without shards, with a null channel or with two shards
  // of the same name.
  static absl::StatusOr<std::unique_ptr<FingerprintShardRouter>> Create(std::vector<FingerprintShard> shards);

  // Shards given as HOST:PORT (`max_message_bytes` for both directions, e.g.
  // ServerOptions::max_receive_message_bytes), reached as `peer` says:
  // plaintext or TLS, and with a token every call carries it as its bearer
  // token (shards started with --token-file: the router's own principal,
  // which must hold the roles of what it forwards; the router's host audits
  // the caller). INVALID_ARGUMENT for an address without a port, or as Create.
  static absl::StatusOr<std::unique_ptr<FingerprintShardRouter>> CreateForAddresses(
      const std::vector<std::string>& addresses, int max_message_bytes, const PeerChannelSecurity& peer = {});

  grpc::Status Enroll(grpc::ServerContext* context, const v1::EnrollRequest* request,
                      v1::EnrollResponse* response) override;
  // A shard that fails mid-stream fails the call (UNAVAILABLE naming it);
  // items already sent to the other shards may be stored (they commit in
  // groups): re-send with replace, or count ALREADY_EXISTS as done.
  grpc::Status EnrollStream(grpc::ServerContext* context, grpc::ServerReader<v1::EnrollRequest>* reader,
                            v1::EnrollStreamResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                      v1::DeleteResponse* response) override;
  // Ids are partitioned, and each shard lists its ids in byte order after a
  // token that is the last id of the previous page (FingerprintServiceImpl's
  // own paging). So the router asks every shard for a page after the same
  // token, merges, keeps the first page_size and hands out the last of them
  // as its token: the same tokens and pages as one server holding all ids,
  // with no state in the router (any replica can serve the next page).
  grpc::Status List(grpc::ServerContext* context, const v1::ListRequest* request, v1::ListResponse* response) override;
  // Timing: total_ms is the router's whole call; gallery_size the sum over
  // the shards; the rest as MergeShardResponses (slowest shard's prepare and
  // score times).
  grpc::Status Search(grpc::ServerContext* context, const v1::SearchRequest* original,
                      v1::SearchResponse* response) override;
  grpc::Status SearchBatch(grpc::ServerContext* context, const v1::SearchBatchRequest* original,
                           v1::SearchBatchResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Extract(grpc::ServerContext* context, const v1::ExtractRequest* request,
                       v1::ExtractResponse* response) override;
  grpc::Status DeleteGallery(grpc::ServerContext* context, const v1::DeleteGalleryRequest* request,
                             v1::GalleryInfo* response) override;
  grpc::Status CreateGallery(grpc::ServerContext* context, const v1::CreateGalleryRequest* request,
                             v1::GalleryInfo* response) override;
  grpc::Status ListGalleries(grpc::ServerContext* context, const v1::ListGalleriesRequest* request,
                             v1::ListGalleriesResponse* response) override;
  grpc::Status GetSubject(grpc::ServerContext* context, const v1::GetSubjectRequest* request,
                          v1::GetSubjectResponse* response) override;
  // Subjects are not partitioned (a subject's templates are on the shards
  // their ids hash to), but each shard lists its subjects in byte order after
  // a token that is the last subject of the previous page, with its own
  // count. So, as List: every shard's page after the same token, merged with
  // the counts summed per subject, the first page_size kept, the last of them
  // the token. A kept subject is complete from every shard: a shard that had
  // more than it gave gave page_size subjects before the cut, all before it.
  grpc::Status ListSubjects(grpc::ServerContext* context, const v1::ListSubjectsRequest* request,
                            v1::ListSubjectsResponse* response) override;
  // A shard that fails (UNAVAILABLE naming it) may leave the subject deleted
  // on the others: a retry completes the delete (shards without the subject
  // any more answer NOT_FOUND, which counts as done).
  grpc::Status DeleteSubject(grpc::ServerContext* context, const v1::DeleteSubjectRequest* request,
                             v1::DeleteSubjectResponse* response) override;
  // The card is read here (ReadTransactionCard, PlanTransactionEnroll: the
  // same ids, metadata and per-finger results as one server); each finger's
  // template goes to its shard as an Enroll (record: the ISO template). A
  // finger a shard refuses (ALREADY_EXISTS, INVALID_ARGUMENT, ...) has that
  // result; a shard that fails fails the call (UNAVAILABLE naming it): the
  // fingers sent to the other shards may be stored, so re-send with replace.
  grpc::Status EnrollTransaction(grpc::ServerContext* context, const v1::EnrollTransactionRequest* request,
                                 v1::EnrollTransactionResponse* response) override;
  // The card is read here; latent mode: each probe searched over every shard
  // (with `explain`), merged; ten-print mode: TenPrintSearch whose finger
  // searches are such searches (the finger's position as filter), fused
  // here: the same subjects and scores as one server for top_k <= 100 (the
  // per-finger candidate lists, max(100, 10 * top_k), are capped at 1000,
  // the shards' largest top_k). Timing: per-finger prepare/score times added.
  grpc::Status SearchTransaction(grpc::ServerContext* context, const v1::SearchTransactionRequest* request,
                                 v1::SearchTransactionResponse* response) override;

  // What the router takes in a transaction's images (it extracts them):
  // bytes and pixels, and the quality gate when a request sets none. Set
  // before serving.
  void set_image_limits(const fingerprint::ImageLimits& limits) { image_limits_ = limits; }

  int shard_count() const { return static_cast<int>(shards_.size()); }
  const std::string& shard_name(int shard) const { return shards_[shard].name; }

 private:
  struct Shard {
    std::string name;
    std::unique_ptr<v1::FingerprintService::Stub> stub;
  };
  explicit FingerprintShardRouter(std::vector<Shard> shards) : shards_(std::move(shards)) {}

  // The sum of every shard's gallery size, asking (List, one id) those whose
  // size is not known yet (known[s] < 0). Best effort, for the gallery_size
  // of writes: a shard that does not answer is left out (and logged), since
  // the write itself has succeeded.
  int64_t TotalGallerySize(grpc::ServerContext* context, std::vector<int64_t> known, const std::string& gallery);
  // A shard's failure as the router's status (the policy above).
  grpc::Status ShardFailure(int shard, const grpc::Status& status, const grpc::ServerContext& context,
                            absl::string_view consequence) const;

  const std::vector<Shard> shards_;
  // Stateless calls (Verify{reference}, Extract): any shard computes them;
  // round robin, and the next shard when one is unavailable.
  grpc::Status OnAnyShard(const grpc::ServerContext& context,
                          const std::function<grpc::Status(int shard, grpc::ClientContext*)>& call_shard);
  // An image probe replaced by its ISO template, extracted by one shard; the
  // shard's errors (and a quality below the minimum, FAILED_PRECONDITION)
  // name the probe as `what`. Templates are left as they are.
  grpc::Status ExtractImageProbe(const grpc::ServerContext& context, v1::FingerprintTemplate* probe,
                                 const std::string& what);
  // Search's fan-out and merge for a request whose probe is a template
  // (no image); timing as Search's but total_ms.
  grpc::Status SearchShards(grpc::ServerContext* context, const v1::SearchRequest& request,
                            v1::SearchResponse* response);
  std::atomic<uint64_t> next_any_shard_{0};
  fingerprint::ImageLimits image_limits_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SHARD_ROUTER_H_
