// The gRPC calls the gateway has in flight for its HTTP clients, so that
// stopping the gateway cancels them (a Server-Sent Events stream would
// otherwise hold its HTTP thread until its job ends). One per gateway.
#ifndef TESSERA_SERVICES_GATEWAY_ACTIVE_CALLS_H_
#define TESSERA_SERVICES_GATEWAY_ACTIVE_CALLS_H_

#include <mutex>
#include <set>

#include <grpcpp/client_context.h>

namespace tessera::gateway {

class ActiveCalls {
 public:
  // Registers `context` (cancelled at once when already stopping).
  void Add(grpc::ClientContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) context->TryCancel();
    calls_.insert(context);
  }
  void Remove(grpc::ClientContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(context);
  }
  // Cancels every registered call and any added later.
  void CancelAll() {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (grpc::ClientContext* c : calls_) c->TryCancel();
  }

 private:
  std::mutex mu_;
  std::set<grpc::ClientContext*> calls_;
  bool stopping_ = false;
};

// Registers a context for its scope.
class ScopedActiveCall {
 public:
  ScopedActiveCall(ActiveCalls& calls, grpc::ClientContext* context) : calls_(calls), context_(context) {
    calls_.Add(context_);
  }
  ~ScopedActiveCall() { calls_.Remove(context_); }
  ScopedActiveCall(const ScopedActiveCall&) = delete;
  ScopedActiveCall& operator=(const ScopedActiveCall&) = delete;

 private:
  ActiveCalls& calls_;
  grpc::ClientContext* context_;
};

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_ACTIVE_CALLS_H_
