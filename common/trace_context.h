// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` header
// ("00-<32 hex trace id>-<16 hex span id>-<2 hex flags>") and the trace a thread works for.
//
// The current trace is the one thread-local of the server (CurrentTrace, ScopedTraceContext):
// the gRPC server's trace interceptor (services/server/trace_interceptor.h) makes a call's trace
// current on the handler's thread, and a worker running a job makes the job's trace current on
// the job's thread. Log lines (common/log.h) then carry `trace_id=<hex>`, and outgoing calls
// (CreateBearerChannel) send a `traceparent` with the same trace id and a new span id. Threads
// a handler starts do not inherit it: pass the TraceContext along and scope it there.
#ifndef TESSERA_COMMON_TRACE_CONTEXT_H_
#define TESSERA_COMMON_TRACE_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

inline constexpr char kTraceparentHeader[] = "traceparent";

struct TraceContext {
  std::string trace_id;  // 32 lowercase hex digits, not all zero
  std::string span_id;   // 16 lowercase hex digits, not all zero: the sender's span (the parent)
  uint8_t flags = 1;     // bit 0: sampled
};

// A `traceparent` value; nullopt when malformed: another length or separator, a digit that is
// not lowercase hex, an all-zero trace or span id, version ff. A later version (01..fe) is read
// by its version-00 prefix, as the spec asks. A caller starts a new trace instead (NewTrace):
// a bad header never fails a call.
std::optional<TraceContext> ParseTraceparent(const std::string& value);
// "00-<trace>-<span>-<flags>".
std::string FormatTraceparent(const TraceContext& context);

// Random ids from the kernel (getrandom): no generator state is shared between threads.
std::string NewTraceId();  // 32 hex, never all zero
std::string NewSpanId();   // 16 hex, never all zero
// A new trace (sampled) with a new span.
TraceContext NewTrace();
// The same trace with a new span id: what a hop sends on, or a server's own span.
TraceContext ChildSpan(const TraceContext& parent);

// The trace the calling thread works for; null when none.
const TraceContext* CurrentTrace();
// Its trace id; "" when none.
std::string CurrentTraceId();

// Makes `context` current on this thread until destroyed (then the previous one is again).
// An empty trace id makes no trace current (a job submitted before traces were recorded).
class ScopedTraceContext {
 public:
  explicit ScopedTraceContext(const TraceContext& context);
  ~ScopedTraceContext();
  ScopedTraceContext(const ScopedTraceContext&) = delete;
  ScopedTraceContext& operator=(const ScopedTraceContext&) = delete;

 private:
  std::optional<TraceContext> previous_;
  bool active_ = false;
};

// The trace with id `trace_id` (a job's JobInfo.trace_id) under a new span; a context with an
// empty trace id when `trace_id` is not a valid one (ScopedTraceContext then scopes nothing).
TraceContext ContinueTrace(const std::string& trace_id);

// For the server's trace interceptor, whose call's trace is current from its first hook to its
// status (not one C++ scope): makes `context` (nullopt: none) current and returns the one it
// replaces. Everyone else uses ScopedTraceContext.
std::optional<TraceContext> ExchangeCurrentTrace(std::optional<TraceContext> context);

// true for 32 lowercase hex digits, not all zero (a JobInfo.trace_id as stored).
bool IsValidTraceId(const std::string& trace_id);

}  // namespace tessera

#endif  // TESSERA_COMMON_TRACE_CONTEXT_H_
