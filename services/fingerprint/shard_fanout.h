// The shard router's fan-out plumbing (shard_router.h): one async unary call
// per shard, all started from the handler's thread, inheriting the caller's
// deadline and cancellation. Internal to the router's .cc files.
#ifndef TESSERA_SERVICES_FINGERPRINT_SHARD_FANOUT_H_
#define TESSERA_SERVICES_FINGERPRINT_SHARD_FANOUT_H_

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

namespace tessera {
namespace shard_fanout {

inline constexpr char kRetryPushback[] = "grpc-retry-pushback-ms";
inline constexpr char kSearchConsequence[] =
    "; a search needs every shard (without this one's templates it could silently miss the mate)";
inline constexpr char kWriteConsequence[] = "; the template was not written";
inline constexpr char kEnrollStreamConsequence[] =
    "; items sent to the other shards may be stored: re-send with replace, or count ALREADY_EXISTS as done";

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

inline std::vector<int> AllShards(int n) {
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
inline void ForwardRetryHint(const grpc::ClientContext& shard_call, grpc::ServerContext* caller) {
  const auto& trailers = shard_call.GetServerTrailingMetadata();
  auto it = trailers.find(kRetryPushback);
  if (it != trailers.end())
    caller->AddTrailingMetadata(kRetryPushback, std::string(it->second.data(), it->second.size()));
}


}  // namespace shard_fanout
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SHARD_FANOUT_H_
