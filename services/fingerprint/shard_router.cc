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
#include "services/fingerprint/shard_fanout.h"
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

using namespace shard_fanout;  // NOLINT: the router's own plumbing
using fingerprint::MsSince;

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

}  // namespace tessera
