#include "services/fingerprint/shard_router.h"

#include "services/server/bearer_channel.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include <grpc/grpc.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/parallel.h"
#include "services/fingerprint/metadata_proto.h"
#include "services/fingerprint/search/tenprint_search.h"
#include "services/fingerprint/shard_merge.h"
#include "services/fingerprint/transaction_enroll.h"
#include "services/fingerprint/transaction_response.h"
#include "services/server/gallery_names.h"

namespace tessera {
namespace fingerprint {

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

int ShardForId(absl::string_view id, int shards) {
  return shards <= 1 ? 0 : static_cast<int>(Fnv1a64(id) % static_cast<uint64_t>(shards));
}

}  // namespace fingerprint

namespace {

constexpr char kRetryPushback[] = "grpc-retry-pushback-ms";
constexpr char kSearchConsequence[] =
    "; a search needs every shard (without this one's templates it could silently miss the mate)";
constexpr char kWriteConsequence[] = "; the template was not written";
constexpr char kEnrollStreamConsequence[] =
    "; items sent to the other shards may be stored: re-send with replace, or count ALREADY_EXISTS as done";

double MsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// One unary call to one shard, made through the async API so that all of a
// fan-out's calls run at once from the handler's thread.
template <typename Response>
struct ShardCall {
  int shard = 0;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
  Response response;
  grpc::Status status;
};

template <typename Response>
std::vector<ShardCall<Response>> CallsTo(const std::vector<int>& shards) {
  std::vector<ShardCall<Response>> calls(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) calls[i].shard = shards[i];
  return calls;
}

std::vector<int> AllShards(int n) {
  std::vector<int> out(n);
  for (int s = 0; s < n; ++s) out[s] = s;
  return out;
}

// Starts `start(shard, client context, cq)` (or `start(i, shard, client
// context, cq)`, i the call's index, for calls that differ) for every call (each inheriting
// the caller's deadline and cancellation) and waits for all of them. With
// `cancel_on_failure`, the first call to fail cancels the others (their
// answers are not going to be used). Returns the index of the first failed
// call in completion order (the cause; later ones may be the cancelled
// rest), or -1.
template <typename Response, typename Start>
int FanOut(const grpc::ServerContext& caller, std::vector<ShardCall<Response>>& calls, Start start,
           bool cancel_on_failure = true) {
  grpc::CompletionQueue cq;
  for (size_t i = 0; i < calls.size(); ++i) {
    calls[i].context = grpc::ClientContext::FromServerContext(caller);
    if constexpr (std::is_invocable_v<Start, size_t, int, grpc::ClientContext*, grpc::CompletionQueue*>) {
      calls[i].reader = start(i, calls[i].shard, calls[i].context.get(), &cq);
    } else {
      calls[i].reader = start(calls[i].shard, calls[i].context.get(), &cq);
    }
    calls[i].reader->StartCall();
    calls[i].reader->Finish(&calls[i].response, &calls[i].status, reinterpret_cast<void*>(i));
  }
  int first_failure = -1;
  for (size_t done = 0; done < calls.size(); ++done) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;  // only after Shutdown
    const size_t i = reinterpret_cast<size_t>(tag);
    if (calls[i].status.ok() || first_failure >= 0) continue;
    first_failure = static_cast<int>(i);
    if (cancel_on_failure) {
      for (auto& c : calls) c.context->TryCancel();  // a no-op on finished calls
    }
  }
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return first_failure;
}

// A shard's "retry after" hint (RESOURCE_EXHAUSTED from its search queue)
// passed on to the caller.
void ForwardRetryHint(const grpc::ClientContext& shard_call, grpc::ServerContext* caller) {
  const auto& trailers = shard_call.GetServerTrailingMetadata();
  auto it = trailers.find(kRetryPushback);
  if (it != trailers.end())
    caller->AddTrailingMetadata(kRetryPushback, std::string(it->second.data(), it->second.size()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FingerprintShardRouter>> FingerprintShardRouter::Create(
    std::vector<FingerprintShard> shards) {
  if (shards.empty()) return absl::InvalidArgumentError("a fingerprint shard router needs at least one shard");
  std::set<std::string> names;
  std::vector<Shard> out;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (shards[s].channel == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("fingerprint shard ", s, " (", shards[s].name, ") has no channel"));
    }
    if (!names.insert(shards[s].name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("fingerprint shard '", shards[s].name, "' given twice (each shard is one gallery part)"));
    }
    out.push_back({shards[s].name, v1::FingerprintService::NewStub(shards[s].channel)});
  }
  return std::unique_ptr<FingerprintShardRouter>(new FingerprintShardRouter(std::move(out)));
}

absl::StatusOr<std::unique_ptr<FingerprintShardRouter>> FingerprintShardRouter::CreateForAddresses(
    const std::vector<std::string>& addresses, int max_message_bytes, const PeerChannelSecurity& peer) {
  std::vector<FingerprintShard> shards;
  for (const std::string& address : addresses) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("fingerprint shard '", address, "': expected HOST:PORT"));
    }
    grpc::ChannelArguments args;
    if (max_message_bytes > 0) {
      args.SetMaxReceiveMessageSize(max_message_bytes);
      args.SetMaxSendMessageSize(max_message_bytes);
    }
    // A restarted shard is back within seconds (gRPC's default backoff
    // grows to two minutes, failing every call meanwhile).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    shards.push_back({address, CreatePeerChannel(address, peer, args)});
  }
  return Create(std::move(shards));
}

grpc::Status FingerprintShardRouter::ShardFailure(int shard, const grpc::Status& status,
                                                  const grpc::ServerContext& context,
                                                  absl::string_view consequence) const {
  switch (status.error_code()) {
    // What the request caused: what one server would have said.
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    // The caller's own deadline (the shard call inherits it).
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return status;
    case grpc::StatusCode::CANCELLED:
      if (context.IsCancelled()) return status;  // the caller went
      break;                                     // the shard cancelled it (e.g. shutting down)
    default:
      break;
  }
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("fingerprint shard ", shard, " of ", shards_.size(), " (", shards_[shard].name,
                   ") failed: ", absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
                   status.error_message(), consequence));
}

int64_t FingerprintShardRouter::TotalGallerySize(grpc::ServerContext* context, std::vector<int64_t> known,
                                                 const std::string& gallery) {
  std::vector<int> ask;
  for (int s = 0; s < shard_count(); ++s) {
    if (known[s] < 0) ask.push_back(s);
  }
  if (!ask.empty()) {
    v1::ListRequest one;
    one.set_page_size(1);
    one.set_gallery(gallery);
    auto calls = CallsTo<v1::ListResponse>(ask);
    FanOut(
        *context, calls,
        [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
          return shards_[s].stub->PrepareAsyncList(c, one, cq);
        },
        /*cancel_on_failure=*/false);
    for (const auto& c : calls) {
      if (c.status.ok()) {
        known[c.shard] = c.response.gallery_size();
      } else {
        TESSERA_LOG(WARNING) << "fingerprint shard " << c.shard << " (" << shards_[c.shard].name
                             << ") did not report its gallery size (left out of gallery_size): "
                             << c.status.error_message();
      }
    }
  }
  int64_t total = 0;
  for (int64_t n : known) total += std::max<int64_t>(n, 0);
  return total;
}

grpc::Status FingerprintShardRouter::Enroll(grpc::ServerContext* context, const v1::EnrollRequest* request,
                                            v1::EnrollResponse* response) {
  const int s = fingerprint::ShardForId(request->id(), shard_count());
  std::unique_ptr<grpc::ClientContext> call = grpc::ClientContext::FromServerContext(*context);
  grpc::Status status = shards_[s].stub->Enroll(call.get(), *request, response);
  if (!status.ok()) return ShardFailure(s, status, *context, kWriteConsequence);
  std::vector<int64_t> known(shard_count(), -1);
  known[s] = response->gallery_size();
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::EnrollStream(grpc::ServerContext* context,
                                                  grpc::ServerReader<v1::EnrollRequest>* reader,
                                                  v1::EnrollStreamResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  struct Out {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientWriter<v1::EnrollRequest>> writer;
    v1::EnrollStreamResponse response;
    std::vector<int64_t> positions;  // the caller's index of each item sent here
  };
  std::vector<Out> outs(shard_count());
  // Ends every open stream; the first failure (`failed`, if known, first)
  // becomes the call's status.
  auto finish_all = [&](int failed, grpc::Status failed_status) -> grpc::Status {
    int first = failed;
    grpc::Status first_status = std::move(failed_status);
    if (first < 0) {
      for (Out& o : outs) {
        if (o.writer) o.writer->WritesDone();
      }
    }
    for (int s = 0; s < shard_count(); ++s) {
      Out& o = outs[s];
      if (!o.writer || s == failed) continue;
      if (first >= 0) o.context->TryCancel();
      grpc::Status st = o.writer->Finish();
      if (!st.ok() && first < 0) {
        first = s;
        first_status = st;
        for (Out& other : outs) {
          if (other.context) other.context->TryCancel();
        }
      }
    }
    if (first >= 0) return ShardFailure(first, first_status, *context, kEnrollStreamConsequence);
    return grpc::Status::OK;
  };
  v1::EnrollRequest item;
  int64_t index = 0;
  std::string stream_gallery;  // the first item's (the shards hold every item to it)
  while (reader->Read(&item)) {
    if (index == 0) stream_gallery = item.gallery();
    // Every item goes to its shard, even a bad one: the shard reports it
    // with the same per-item error one server would.
    const int s = fingerprint::ShardForId(item.id(), shard_count());
    Out& o = outs[s];
    if (!o.writer) {
      o.context = grpc::ClientContext::FromServerContext(*context);
      o.writer = shards_[s].stub->EnrollStream(o.context.get(), &o.response);
    }
    o.positions.push_back(index++);
    if (!o.writer->Write(item)) {
      grpc::Status st = o.writer->Finish();
      if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the shard closed the stream early");
      return finish_all(s, st);  // cancels the other streams
    }
  }
  grpc::Status finished = finish_all(-1, grpc::Status::OK);
  if (!finished.ok()) return finished;

  constexpr size_t kMaxReportedErrors = 1000;  // as one server: the first 1000
  std::vector<v1::EnrollError> errors;
  std::vector<int64_t> known(shard_count(), -1);
  for (int s = 0; s < shard_count(); ++s) {
    Out& o = outs[s];
    if (!o.writer) continue;
    response->set_enrolled(response->enrolled() + o.response.enrolled());
    response->set_failed(response->failed() + o.response.failed());
    known[s] = o.response.gallery_size();
    for (v1::EnrollError& e : *o.response.mutable_errors()) {
      // Each shard reports its first 1000 by its own count; the caller's
      // first 1000 are among them (fewer than 1000 precede any of them).
      if (e.index() >= 0 && e.index() < static_cast<int64_t>(o.positions.size())) e.set_index(o.positions[e.index()]);
      errors.push_back(std::move(e));
    }
  }
  std::sort(errors.begin(), errors.end(),
            [](const v1::EnrollError& a, const v1::EnrollError& b) { return a.index() < b.index(); });
  if (errors.size() > kMaxReportedErrors) errors.resize(kMaxReportedErrors);
  for (v1::EnrollError& e : errors) *response->add_errors() = std::move(e);
  response->set_received(index);
  response->set_gallery_size(TotalGallerySize(context, std::move(known), stream_gallery));
  response->set_seconds(MsSince(start) / 1000.0);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::Delete(grpc::ServerContext* context, const v1::DeleteRequest* request,
                                            v1::DeleteResponse* response) {
  const int s = fingerprint::ShardForId(request->id(), shard_count());
  std::unique_ptr<grpc::ClientContext> call = grpc::ClientContext::FromServerContext(*context);
  grpc::Status status = shards_[s].stub->Delete(call.get(), *request, response);
  if (!status.ok()) return ShardFailure(s, status, *context, "; nothing was deleted");
  std::vector<int64_t> known(shard_count(), -1);
  known[s] = response->gallery_size();
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::List(grpc::ServerContext* context, const v1::ListRequest* request,
                                          v1::ListResponse* response) {
  const int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 0 || page_size > 10000) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", page_size)));
  }
  v1::ListRequest page;
  page.set_page_size(page_size);
  page.set_page_token(request->page_token());
  page.set_gallery(request->gallery());
  auto calls = CallsTo<v1::ListResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncList(c, page, cq);
  });
  if (failed >= 0)
    return ShardFailure(calls[failed].shard, calls[failed].status, *context, "; listing needs every shard");
  std::vector<std::string> ids;
  bool more = false;
  int64_t size = 0;
  for (auto& c : calls) {
    size += c.response.gallery_size();
    more = more || !c.response.next_page_token().empty();
    for (std::string& id : *c.response.mutable_ids()) ids.push_back(std::move(id));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());  // an id on two shards (being moved) once
  if (static_cast<int>(ids.size()) > page_size) {
    ids.resize(page_size);
    more = true;
  }
  // A shard with more left has given page_size ids, all merged here, so its
  // rest comes after this page's last id.
  for (std::string& id : ids) response->add_ids(std::move(id));
  if (more && response->ids_size() > 0) response->set_next_page_token(response->ids(response->ids_size() - 1));
  response->set_gallery_size(size);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::ExtractImageProbe(const grpc::ServerContext& context,
                                                       v1::FingerprintTemplate* probe, const std::string& what) {
  if (!probe->has_image() || !probe->data().empty()) return grpc::Status::OK;  // a template (or both: refused there)
  v1::ExtractRequest request;
  *request.mutable_image() = probe->image();
  v1::ExtractResponse extracted;
  grpc::Status status = OnAnyShard(context, [&](int s, grpc::ClientContext* call) {
    return shards_[s].stub->Extract(call, request, &extracted);
  });
  if (!status.ok()) {
    // The shard names the field "image"; one server would name the probe.
    std::string message = status.error_message();
    if (message.rfind("image: ", 0) == 0) message = message.substr(7);
    return grpc::Status(status.error_code(), absl::StrCat(what, ": ", message));
  }
  if (extracted.below_min_quality()) {
    const int minimum = probe->image().min_quality();
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat(what, ": image quality ", extracted.quality(), " is below the ",
                                     minimum > 0 ? absl::StrCat("minimum ", minimum) : "server's minimum"));
  }
  probe->clear_image();
  probe->set_data(std::move(*extracted.mutable_record()));
  probe->set_format(v1::TEMPLATE_FORMAT_ISO19794);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::Search(grpc::ServerContext* context, const v1::SearchRequest* original,
                                            v1::SearchResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  v1::SearchRequest resolved = *original;
  if (grpc::Status s = ExtractImageProbe(*context, resolved.mutable_probe(), "probe"); !s.ok()) return s;
  if (grpc::Status s = SearchShards(context, resolved, response); !s.ok()) return s;
  response->mutable_timing()->set_total_ms(MsSince(start));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::SearchShards(grpc::ServerContext* context, const v1::SearchRequest& request,
                                                  v1::SearchResponse* response) {
  // Each shard batches concurrent Search calls with its own (results
  // identical to unbatched ones), so the router sends Search, not SearchBatch.
  // The request goes whole: filters and `explain` reach every shard.
  auto calls = CallsTo<v1::SearchResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncSearch(c, request, cq);
  });
  if (failed >= 0) {
    ForwardRetryHint(*calls[failed].context, context);
    return ShardFailure(calls[failed].shard, calls[failed].status, *context, kSearchConsequence);
  }
  std::vector<v1::SearchBatchResponse> shards(calls.size());
  for (size_t s = 0; s < calls.size(); ++s) {
    *shards[s].add_results()->mutable_candidates() = std::move(*calls[s].response.mutable_candidates());
    *shards[s].mutable_timing() = calls[s].response.timing();
  }
  absl::StatusOr<v1::SearchBatchResponse> merged =
      fingerprint::MergeShardResponses(shards, request.top_k() == 0 ? 10 : request.top_k());
  if (!merged.ok()) return ToGrpcStatus(merged.status());
  if (merged->results_size() != 1) return grpc::Status(grpc::StatusCode::INTERNAL, "shards answered no probe");
  *response->mutable_candidates() = std::move(*merged->mutable_results(0)->mutable_candidates());
  *response->mutable_timing() = merged->timing();
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::SearchBatch(grpc::ServerContext* context,
                                                 const v1::SearchBatchRequest* original,
                                                 v1::SearchBatchResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  v1::SearchBatchRequest resolved = *original;
  // Image probes extracted concurrently (each by one shard); the first
  // failure in probe order is the answer, as on one server.
  std::vector<grpc::Status> extracted(resolved.probes_size());
  const bool images = std::any_of(resolved.probes().begin(), resolved.probes().end(),
                                  [](const v1::FingerprintTemplate& t) { return t.has_image(); });
  if (images) ParallelForDynamic(resolved.probes_size(), 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const std::string what = resolved.probes_size() == 1 ? "probe" : absl::StrCat("probe ", i);
      extracted[i] = ExtractImageProbe(*context, resolved.mutable_probes(static_cast<int>(i)), what);
    }
  });
  for (const grpc::Status& s : extracted) {
    if (!s.ok()) return s;
  }
  const v1::SearchBatchRequest* request = &resolved;
  auto calls = CallsTo<v1::SearchBatchResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncSearchBatch(c, *request, cq);
  });
  if (failed >= 0) {
    ForwardRetryHint(*calls[failed].context, context);
    return ShardFailure(calls[failed].shard, calls[failed].status, *context, kSearchConsequence);
  }
  std::vector<v1::SearchBatchResponse> shards(calls.size());
  for (size_t s = 0; s < calls.size(); ++s) shards[s] = std::move(calls[s].response);
  absl::StatusOr<v1::SearchBatchResponse> merged =
      fingerprint::MergeShardResponses(shards, request->top_k() == 0 ? 10 : request->top_k());
  if (!merged.ok()) return ToGrpcStatus(merged.status());
  *response = std::move(*merged);
  response->mutable_timing()->set_total_ms(MsSince(start));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                                            v1::VerifyResponse* response) {
  switch (request->against_case()) {
    case v1::VerifyRequest::kId: {
      const int s = fingerprint::ShardForId(request->id(), shard_count());
      std::unique_ptr<grpc::ClientContext> call = grpc::ClientContext::FromServerContext(*context);
      grpc::Status status = shards_[s].stub->Verify(call.get(), *request, response);
      return status.ok() ? status : ShardFailure(s, status, *context, "");
    }
    case v1::VerifyRequest::kReference:
      return OnAnyShard(*context, [&](int s, grpc::ClientContext* call) {
        return shards_[s].stub->Verify(call, *request, response);
      });
    default:
      return ToGrpcStatus(absl::InvalidArgumentError("give an enrolled id or a reference template"));
  }
}

grpc::Status FingerprintShardRouter::Extract(grpc::ServerContext* context, const v1::ExtractRequest* request,
                                             v1::ExtractResponse* response) {
  return OnAnyShard(*context, [&](int s, grpc::ClientContext* call) {
    return shards_[s].stub->Extract(call, *request, response);
  });
}

grpc::Status FingerprintShardRouter::OnAnyShard(
    const grpc::ServerContext& context, const std::function<grpc::Status(int, grpc::ClientContext*)>& call_shard) {
  const int n = shard_count();
  const int first = static_cast<int>(next_any_shard_.fetch_add(1) % static_cast<uint64_t>(n));
  grpc::Status last;
  for (int i = 0; i < n; ++i) {
    const int s = (first + i) % n;
    std::unique_ptr<grpc::ClientContext> call = grpc::ClientContext::FromServerContext(context);
    grpc::Status status = call_shard(s, call.get());
    if (status.ok()) return status;
    last = ShardFailure(s, status, context, i + 1 < n ? "" : "; every shard failed");
    if (last.error_code() != grpc::StatusCode::UNAVAILABLE) return last;
  }
  return last;
}

grpc::Status FingerprintShardRouter::DeleteGallery(grpc::ServerContext* context,
                                                   const v1::DeleteGalleryRequest* request,
                                                   v1::GalleryInfo* response) {
  // On every shard; one that no longer has it (an earlier, partly failed delete) is fine, so a
  // retry completes it. NOT_FOUND only when no shard had it.
  auto calls = CallsTo<v1::GalleryInfo>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncDeleteGallery(c, *request, cq);
      },
      /*cancel_on_failure=*/false);
  int missing = 0;
  int64_t templates = 0;
  for (const auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++missing;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context, "; retry: shards that deleted it already are skipped");
    } else {
      templates += c.response.size();
    }
  }
  if (missing == shard_count()) return calls[0].status;
  response->set_gallery(request->gallery());
  response->set_size(templates);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::CreateGallery(grpc::ServerContext* context,
                                                   const v1::CreateGalleryRequest* request,
                                                   v1::GalleryInfo* response) {
  // On every shard; one that has it already (an earlier, partly failed create) is fine, so a
  // retry completes the set. ALREADY_EXISTS only when every shard had it.
  auto calls = CallsTo<v1::GalleryInfo>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncCreateGallery(c, *request, cq);
      },
      /*cancel_on_failure=*/false);
  int existed = 0;
  for (const auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
      ++existed;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context, "; retry: shards that have it already are skipped");
    }
  }
  if (existed == shard_count()) return calls[0].status;
  response->set_gallery(request->gallery());
  response->set_size(0);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::ListGalleries(grpc::ServerContext* context,
                                                   const v1::ListGalleriesRequest* request,
                                                   v1::ListGalleriesResponse* response) {
  auto calls = CallsTo<v1::ListGalleriesResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncListGalleries(c, *request, cq);
  });
  if (failed >= 0) return ShardFailure(calls[failed].shard, calls[failed].status, *context, "");
  std::map<std::string, int64_t> sizes;  // a gallery on any shard, its parts summed
  for (const auto& c : calls) {
    for (const v1::GalleryInfo& g : c.response.galleries()) sizes[g.gallery()] += g.size();
  }
  for (const auto& [name, size] : sizes) {
    v1::GalleryInfo* info = response->add_galleries();
    info->set_gallery(name);
    info->set_size(size);
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::GetSubject(grpc::ServerContext* context, const v1::GetSubjectRequest* request,
                                                v1::GetSubjectResponse* response) {
  // A subject's templates are on the shards their ids hash to: ask them all.
  auto calls = CallsTo<v1::GetSubjectResponse>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncGetSubject(c, *request, cq);
      },
      /*cancel_on_failure=*/false);  // NOT_FOUND from some shards is an answer
  int missing = 0;
  std::vector<v1::SubjectTemplate> templates;
  for (auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++missing;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context, "; a subject's templates may be on any shard");
    } else {
      for (v1::SubjectTemplate& t : *c.response.mutable_templates()) templates.push_back(std::move(t));
    }
  }
  if (missing == shard_count()) return calls[0].status;  // what one server says (none, or no such gallery)
  std::sort(templates.begin(), templates.end(),
            [](const v1::SubjectTemplate& a, const v1::SubjectTemplate& b) { return a.id() < b.id(); });
  templates.erase(std::unique(templates.begin(), templates.end(),  // an id on two shards (being moved) once
                              [](const v1::SubjectTemplate& a, const v1::SubjectTemplate& b) { return a.id() == b.id(); }),
                  templates.end());
  for (v1::SubjectTemplate& t : templates) *response->add_templates() = std::move(t);
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::ListSubjects(grpc::ServerContext* context, const v1::ListSubjectsRequest* request,
                                                  v1::ListSubjectsResponse* response) {
  const int page_size = request->page_size() == 0 ? 1000 : request->page_size();
  if (page_size < 1 || page_size > 10000) {
    return ToGrpcStatus(
        absl::InvalidArgumentError(absl::StrCat("page_size must be 1-10000, got ", request->page_size())));
  }
  v1::ListSubjectsRequest page = *request;
  page.set_page_size(page_size);
  auto calls = CallsTo<v1::ListSubjectsResponse>(AllShards(shard_count()));
  const int failed = FanOut(*context, calls, [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
    return shards_[s].stub->PrepareAsyncListSubjects(c, page, cq);
  });
  if (failed >= 0)
    return ShardFailure(calls[failed].shard, calls[failed].status, *context, "; listing needs every shard");
  std::map<std::string, int64_t> counts;  // byte order; a subject's parts summed
  bool more = false;
  for (const auto& c : calls) {
    more = more || !c.response.next_page_token().empty();
    for (const v1::SubjectSummary& s : c.response.subjects()) counts[s.subject_id()] += s.templates();
  }
  // A shard with more left has given page_size subjects, all merged here, so
  // its rest comes after this page's last subject (and no subject kept here
  // has templates there beyond what it gave).
  if (static_cast<int>(counts.size()) > page_size) more = true;
  for (const auto& [subject, n] : counts) {
    if (response->subjects_size() >= page_size) break;
    v1::SubjectSummary* s = response->add_subjects();
    s->set_subject_id(subject);
    s->set_templates(n);
  }
  if (more && response->subjects_size() > 0) {
    response->set_next_page_token(response->subjects(response->subjects_size() - 1).subject_id());
  }
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::DeleteSubject(grpc::ServerContext* context,
                                                   const v1::DeleteSubjectRequest* request,
                                                   v1::DeleteSubjectResponse* response) {
  // On every shard; one without the subject (none of its templates hash
  // there, or an earlier, partly failed delete took them) is fine, so a retry
  // completes a partial delete. NOT_FOUND only when no shard had any.
  auto calls = CallsTo<v1::DeleteSubjectResponse>(AllShards(shard_count()));
  FanOut(
      *context, calls,
      [&](int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncDeleteSubject(c, *request, cq);
      },
      /*cancel_on_failure=*/false);
  int missing = 0;
  int64_t deleted = 0;
  std::vector<int64_t> known(shard_count(), -1);
  for (const auto& c : calls) {
    if (c.status.error_code() == grpc::StatusCode::NOT_FOUND) {
      ++missing;
    } else if (!c.status.ok()) {
      return ShardFailure(c.shard, c.status, *context,
                          "; the other shards may have deleted their part of the subject: retry to complete the "
                          "delete (shards that deleted it already are skipped)");
    } else {
      deleted += c.response.deleted();
      known[c.shard] = c.response.gallery_size();
    }
  }
  if (missing == shard_count()) return calls[0].status;
  response->set_deleted(deleted);
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::EnrollTransaction(grpc::ServerContext* context,
                                                       const v1::EnrollTransactionRequest* request,
                                                       v1::EnrollTransactionResponse* response) {
  // A bad gallery name before the card's images are extracted (the shards
  // would refuse it after); an unknown gallery is the shards' NOT_FOUND.
  if (absl::Status name = CheckGalleryName(GalleryOrDefault(request->gallery())); !name.ok()) {
    return ToGrpcStatus(name);
  }
  absl::StatusOr<fingerprint::TransactionCard> card =
      fingerprint::ReadRequestCard(request->transaction(), request->ppi(), request->min_quality(), image_limits_);
  if (!card.ok()) return ToGrpcStatus(card.status());
  std::vector<std::pair<std::string, std::string>> attributes(request->attributes().begin(),
                                                              request->attributes().end());
  absl::StatusOr<fingerprint::TransactionEnrollment> plan = fingerprint::PlanTransactionEnroll(
      *card, request->subject_id(), request->id_prefix(), std::move(attributes));
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  // Each finger's template to its id's shard, all at once.
  std::vector<int> shard_of(plan->items.size());
  std::vector<v1::EnrollRequest> enrolls(plan->items.size());
  for (size_t j = 0; j < plan->items.size(); ++j) {
    const fingerprint::EnrollItem& item = plan->items[j];
    shard_of[j] = fingerprint::ShardForId(item.id, shard_count());
    v1::EnrollRequest& e = enrolls[j];
    e.set_id(item.id);
    e.mutable_record()->set_data(item.bytes);
    e.mutable_record()->set_format(v1::TEMPLATE_FORMAT_ISO19794);
    e.set_replace(request->replace());
    e.set_gallery(request->gallery());
    fingerprint::MetadataToProto(item.metadata, e.mutable_metadata());
  }
  auto calls = CallsTo<v1::EnrollResponse>(shard_of);
  FanOut(
      *context, calls,
      [&](size_t j, int s, grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return shards_[s].stub->PrepareAsyncEnroll(c, enrolls[j], cq);
      },
      /*cancel_on_failure=*/false);  // a refused finger is that finger's result
  std::vector<absl::Status> stored(calls.size());
  std::vector<int64_t> known(shard_count(), -1);
  for (size_t j = 0; j < calls.size(); ++j) {
    const auto& c = calls[j];
    switch (c.status.error_code()) {
      case grpc::StatusCode::OK:
        // The largest size a shard reported is the one after all of this card's fingers there.
        known[c.shard] = std::max(known[c.shard], c.response.gallery_size());
        break;
      // What the finger itself caused: its result, as one server's EnrollBatch gives it.
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::ALREADY_EXISTS:
      case grpc::StatusCode::OUT_OF_RANGE:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        stored[j] = absl::Status(static_cast<absl::StatusCode>(c.status.error_code()), c.status.error_message());
        break;
      default:
        // NOT_FOUND (no such gallery), the caller's deadline or cancel: as
        // they are; anything else: the shard failed.
        return ShardFailure(c.shard, c.status, *context,
                            "; fingers sent to the other shards may be stored: re-send with replace");
    }
  }
  fingerprint::SetEnrollTransactionResponse(*card, plan->subject_id, plan->ids, plan->finger_of_item, stored,
                                            response);
  response->set_gallery_size(TotalGallerySize(context, std::move(known), request->gallery()));
  return grpc::Status::OK;
}

grpc::Status FingerprintShardRouter::SearchTransaction(grpc::ServerContext* context,
                                                       const v1::SearchTransactionRequest* request,
                                                       v1::SearchTransactionResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status name = CheckGalleryName(GalleryOrDefault(request->gallery())); !name.ok()) {
    return ToGrpcStatus(name);
  }
  // top_k and matcher checked as one server (with the default limits) checks them.
  fingerprint::SearchLimits limits;
  limits.image = image_limits_;
  absl::StatusOr<fingerprint::ParsedSearch> parsed =
      fingerprint::ParseSearch({}, request->top_k(), request->matcher(), limits);
  if (!parsed.ok()) return ToGrpcStatus(parsed.status());
  absl::StatusOr<fingerprint::TenPrintFusion> fusion = fingerprint::TenPrintFusionFromProto(request->fusion());
  if (!fusion.ok()) return ToGrpcStatus(fusion.status());
  absl::StatusOr<fingerprint::TransactionCard> card =
      fingerprint::ReadRequestCard(request->transaction(), request->ppi(), request->min_quality(), image_limits_);
  if (!card.ok()) return ToGrpcStatus(card.status());
  absl::StatusOr<fingerprint::TransactionProbes> probes = fingerprint::PrepareTransactionSearch(*card, response);
  if (!probes.ok()) return ToGrpcStatus(probes.status());
  // Probe j's search: its finger's ISO template, as the card gave it.
  auto probe_request = [&](size_t j, int top_k) {
    v1::SearchRequest r;
    const std::vector<uint8_t>& record = card->fingers[probes->searched[j]].record;
    r.mutable_probe()->set_data(std::string(record.begin(), record.end()));
    r.mutable_probe()->set_format(v1::TEMPLATE_FORMAT_ISO19794);
    r.set_top_k(top_k);
    r.set_matcher(request->matcher());
    r.set_gallery(request->gallery());
    return r;
  };
  v1::SearchTiming* timing = response->mutable_timing();
  auto add_timing = [timing](const v1::SearchTiming& t) {  // the probes ran one after the other
    timing->set_prepare_ms(timing->prepare_ms() + t.prepare_ms());
    timing->set_score_ms(timing->score_ms() + t.score_ms());
    timing->set_gallery_size(t.gallery_size());
    timing->set_backend(t.backend());
    timing->set_matcher(t.matcher());
  };
  if (probes->latent) {
    for (size_t j = 0; j < probes->searched.size(); ++j) {
      v1::SearchRequest r = probe_request(j, parsed->top_k);
      r.set_explain(request->explain());
      v1::SearchResponse found;
      if (grpc::Status s = SearchShards(context, r, &found); !s.ok()) return s;
      *response->mutable_probes(probes->searched[j])->mutable_candidates() = std::move(*found.mutable_candidates());
      add_timing(found.timing());
    }
  } else {
    std::vector<fingerprint::CardFinger> fingers;
    for (size_t j = 0; j < probes->searched.size(); ++j) {
      fingers.push_back({card->fingers[probes->searched[j]].position, probes->minutiae[j]});
    }
    constexpr int kMaxShardTopK = 1000;  // the largest top_k a shard takes (SearchRequest)
    fingerprint::TenPrintOptions options;
    options.top_k = parsed->top_k;
    options.fusion = *fusion;
    options.per_finger_candidates = std::min(std::max(100, 10 * parsed->top_k), kMaxShardTopK);
    grpc::Status shard_status;  // a finger search's failure, returned as it is
    fingerprint::FingerSearchFn search = [&](const std::vector<fingerprint::MinutiaPoint>& probe,
                                             const fingerprint::TemplateFilter& filter, int k)
        -> absl::StatusOr<std::vector<fingerprint::SearchCandidate>> {
      size_t j = 0;  // which card finger (TenPrintSearch passes each finger's own minutiae)
      while (j < fingers.size() && &fingers[j].minutiae != &probe) ++j;
      if (j == fingers.size()) return absl::InternalError("ten-print search of an unknown finger");
      v1::SearchRequest r = probe_request(j, k);
      for (int p : filter.finger_positions) r.add_finger_positions(p);
      for (int t : filter.impression_types) r.add_impression_types(t);
      v1::SearchResponse found;
      shard_status = SearchShards(context, r, &found);
      if (!shard_status.ok()) {
        return absl::Status(static_cast<absl::StatusCode>(shard_status.error_code()), shard_status.error_message());
      }
      add_timing(found.timing());
      std::vector<fingerprint::SearchCandidate> out;
      out.reserve(found.candidates_size());
      for (const v1::Candidate& c : found.candidates()) out.push_back(fingerprint::CandidateFromProto(c));
      return out;
    };
    absl::StatusOr<std::vector<fingerprint::SubjectMatch>> subjects =
        fingerprint::TenPrintSearch(fingers, options, search);
    if (!subjects.ok()) return shard_status.ok() ? ToGrpcStatus(subjects.status()) : shard_status;
    fingerprint::AddSubjectCandidates(*subjects, response);
  }
  timing->set_total_ms(MsSince(start));
  timing->set_batch_size(static_cast<int32_t>(probes->minutiae.size()));
  return grpc::Status::OK;
}

}  // namespace tessera
