// What makes two submits "the same request" for idempotency: a SHA-256 of the
// request message as the client sent it, without its own idempotency key.
// A service stores a durable copy of a request (uploads replaced by server
// files), so the stored spec cannot be compared with a retry; the
// fingerprint of the original can (JobSpec.request_fingerprint).
#ifndef TESSERA_SERVICES_JOBS_REQUEST_FINGERPRINT_H_
#define TESSERA_SERVICES_JOBS_REQUEST_FINGERPRINT_H_

#include <string>

#include <google/protobuf/any.pb.h>
#include <google/protobuf/message.h>

namespace tessera::jobs {

// 64 hex digits over the message's full type name and its deterministic
// serialization (map entries sorted), with the top-level string fields
// `request_id` and `job_id` cleared: those name the job, not the work.
std::string RequestFingerprint(const google::protobuf::Message& request);

// RequestFingerprint of the message packed in `spec` when this process knows
// its type (so the same request packed by any client matches); otherwise a
// digest of the type URL and the bytes as sent.
std::string SpecFingerprint(const google::protobuf::Any& spec);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_REQUEST_FINGERPRINT_H_
