// Bearer-token and client-certificate authentication, role-based and
// per-gallery authorization for the server.
//
// Token file (`tessera serve --token-file FILE`), one principal source per line:
//   TOKEN PRINCIPAL ROLE[,ROLE] [expires=RFC3339] [galleries=G[:ROLE],...]
//   cert:CN=NAME PRINCIPAL ROLE[,ROLE] [expires=...] [galleries=...]
//   cert:SAN=NAME PRINCIPAL ...
// '#' starts a comment; blank lines are ignored. Roles: reader, enroller, admin
// (each includes the ones before it). Only SHA-256 hashes of the tokens are kept
// in memory and lookups compare hashes in constant time.
//
// cert: lines map a verified client certificate (mutual TLS: serve --tls-client-ca)
// to a principal, by its subject CN or one of its subject alternative names
// (gRPC's AuthContext properties x509_common_name / x509_subject_alternative_name;
// NAME has no spaces). They are used only for calls without an authorization
// header, and only when the server verifies client certificates.
//
// galleries= grants fingerprint galleries (gallery_names.h): a comma list of names
// or '*' (every gallery), each optionally capped at a role ("national:reader":
// search there, enroll nowhere else unless granted). The principal's role on a
// gallery is the smaller of its own role and that cap. Without galleries= a line
// grants only the gallery "default" (what servers hosted before named galleries),
// so an existing token file keeps its meaning and a new gallery is closed until
// granted. One file for both (rather than a separate ACL file): a principal's
// identity, role and galleries are read, reloaded and revoked together.
//
// Every hosted method states its required role in its .proto (the
// tessera.v1.required_role option, protos/tessera/v1/access.proto); a method
// without one, or one this binary does not link, is denied (fail closed). grpc.health.v1 and
// reflection are not hosted services and stay open.
#ifndef TESSERA_SERVICES_SERVER_AUTH_H_
#define TESSERA_SERVICES_SERVER_AUTH_H_

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tessera {

using Sha256Digest = std::array<unsigned char, 32>;
Sha256Digest Sha256(absl::string_view data);
std::string Sha256Hex(absl::string_view data);

enum class Role { kNone = 0, kReader = 1, kEnroller = 2, kAdmin = 3 };
const char* RoleName(Role role);
absl::StatusOr<Role> ParseRole(absl::string_view name);

// The required role of a hosted method ("/tessera.v1.FingerprintService/Search"),
// from its required_role option; kNone (then it is denied) for an unknown
// method or one without the option.
Role RequiredRole(absl::string_view full_method);

// The galleries= field of a token file line.
struct GalleryGrants {
  // Gallery name, or "*" for every gallery -> the highest role there.
  std::map<std::string, Role, std::less<>> caps;

  // {"default": admin}: a line without galleries=.
  static GalleryGrants DefaultOnly();
  // "a,b:reader,*:reader"; INVALID_ARGUMENT naming a bad name or role.
  static absl::StatusOr<GalleryGrants> Parse(absl::string_view value);
  // min(role, cap of `gallery` or of "*"); kNone when not granted.
  Role RoleOn(absl::string_view gallery, Role role) const;
};

// Who is calling: filled by the auth interceptor for every call.
struct CallIdentity {
  std::string principal;  // "" when unauthenticated
  Role role = Role::kNone;
  std::string peer;
  std::string method;
  GalleryGrants galleries = GalleryGrants::DefaultOnly();
  std::string source;  // "token" or "certificate"
  // The gallery the call's request names (checked by the interceptor) or, for
  // a call about a job, the job's (AnnotateCallGallery): its audit record's.
  std::string gallery;
  // The call's W3C trace id (trace_interceptor.h; "" when no trace interceptor ran): a job the
  // call submits records it (JobInfo.trace_id), and so does the call's audit record.
  std::string trace_id;
};

// May `identity` call `full_method` on `gallery` (a request's gallery field;
// "" is "default")? INVALID_ARGUMENT for a bad name (before any access
// decision, so a malformed name is never looked up), PERMISSION_DENIED naming
// the principal, the right and the gallery ("principal 'rita' may not search
// gallery 'b'") when its role there is below the method's. Existence is the
// service's business: an unknown gallery passes here, so NOT_FOUND reaches
// only principals that may use the name.
absl::Status CheckGalleryAccess(const CallIdentity& identity, absl::string_view full_method,
                                absl::string_view gallery);

class TokenStore {
 public:
  // INVALID_ARGUMENT naming the first bad line (as `tessera serve` starts:
  // a typo must not go unnoticed).
  static absl::StatusOr<std::shared_ptr<const TokenStore>> Load(const std::string& path);
  static absl::StatusOr<std::shared_ptr<const TokenStore>> Parse(absl::string_view text);
  // Every good line; each bad one's error ("line 3: ...") into `bad_lines`
  // (a reload: the file as it is now holds, never the previous one).
  static absl::StatusOr<std::shared_ptr<const TokenStore>> LoadSkippingBadLines(const std::string& path,
                                                                               std::vector<absl::Status>* bad_lines);
  static std::shared_ptr<const TokenStore> ParseSkippingBadLines(absl::string_view text,
                                                                 std::vector<absl::Status>* bad_lines);

  // UNAUTHENTICATED for unknown or expired tokens; the message never quotes the token.
  absl::StatusOr<CallIdentity> Lookup(absl::string_view token, absl::Time now) const;
  // A verified client certificate's subject CNs and SANs: the first cert: line
  // that matches (CN lines first). UNAUTHENTICATED when none does or it expired.
  absl::StatusOr<CallIdentity> LookupCertificate(const std::vector<std::string>& common_names,
                                                 const std::vector<std::string>& alt_names, absl::Time now) const;
  size_t size() const { return tokens_.size() + certs_.size(); }
  size_t certificate_lines() const { return certs_.size(); }

 private:
  struct Grant {
    std::string principal;
    Role role = Role::kNone;
    std::optional<absl::Time> expires;
    GalleryGrants galleries = GalleryGrants::DefaultOnly();
  };
  struct TokenEntry {
    Sha256Digest hash;
    Grant grant;
  };
  struct CertEntry {
    bool san = false;  // matches a subject alternative name, else the CN
    std::string name;
    Grant grant;
  };
  static absl::StatusOr<CallIdentity> Identity(const Grant& grant, absl::Time now, absl::string_view what);
  static absl::StatusOr<std::shared_ptr<const TokenStore>> ParseLines(absl::string_view text,
                                                                      std::vector<absl::Status>* bad_lines);
  absl::Status AddLine(absl::string_view line, int line_no);
  std::vector<TokenEntry> tokens_;
  std::vector<CertEntry> certs_;
};

// Authenticates and authorizes one call from its metadata ("authorization:
// Bearer TOKEN") or, without that header, from its verified client certificate
// (cert: lines, when AcceptClientCertificates). OK: the caller's identity.
// UNAUTHENTICATED (no, unknown or expired token; a certificate no line maps) or
// PERMISSION_DENIED (naming the missing role) otherwise. Galleries are checked
// once the request is read (CheckGalleryAccess, by the auth interceptor).
class Authorizer {
 public:
  explicit Authorizer(std::shared_ptr<const TokenStore> tokens) : tokens_(std::move(tokens)) {}
  // Loads `token_file` (every line must parse) and re-reads it when it changes (checked at most
  // every `reload_interval`), so removing a line revokes that token without a restart. A reload
  // fails closed: the good lines of the new file hold and each bad line is logged with its line
  // number and grants nothing (an added or changed line that does not parse gives its principal
  // no access until fixed; a removed line is gone whatever else is wrong); a file that cannot be
  // read holds no token (every call refused) until it can. Never the previous tokens.
  static absl::StatusOr<std::shared_ptr<Authorizer>> FromFile(const std::string& token_file,
                                                              absl::Duration reload_interval = absl::Seconds(1));
  absl::Status Check(absl::string_view full_method, const grpc::ServerContextBase& context,
                     CallIdentity* identity) const;
  absl::Status CheckToken(absl::string_view full_method, std::optional<absl::string_view> authorization,
                          CallIdentity* identity) const;
  // A call's verified client certificate names (as gRPC's AuthContext gives them).
  absl::Status CheckCertificate(absl::string_view full_method, const std::vector<std::string>& common_names,
                                const std::vector<std::string>& alt_names, CallIdentity* identity) const;
  // Only a server that verifies client certificates (mutual TLS) may set this:
  // cert: lines are ignored otherwise.
  void AcceptClientCertificates(bool accept) { accept_certificates_ = accept; }
  bool accepts_client_certificates() const { return accept_certificates_; }
  size_t certificate_lines() const { return Tokens()->certificate_lines(); }

 private:
  std::shared_ptr<const TokenStore> Tokens() const;
  // Takes the identity a token or certificate was `found` to have (its error
  // otherwise) and checks its role against the method's.
  static absl::Status Authorize(absl::string_view full_method, absl::StatusOr<CallIdentity> found,
                                CallIdentity* identity);

  bool accept_certificates_ = false;

  std::string path_;  // "" : no reloading
  absl::Duration reload_interval_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const TokenStore> tokens_;
  mutable absl::Time next_check_ = absl::InfinitePast();
  mutable std::pair<int64_t, int64_t> stamp_{-1, -1};  // mtime ns, size
};

// The identity of calls in flight, keyed by their ServerContext: set by the
// auth interceptor when the call starts, read by the gate and by handlers.
class CallRegistry {
 public:
  static CallRegistry& Get();
  void Set(const grpc::ServerContextBase* context, CallIdentity identity, absl::Status decision);
  // Sets the call's gallery (CallIdentity::gallery) when it has none yet.
  void AnnotateGallery(const grpc::ServerContextBase* context, const std::string& gallery);
  // The decision and identity; NOT_FOUND decision when the call is unknown.
  absl::Status Decision(const grpc::ServerContextBase* context, CallIdentity* identity = nullptr) const;
  void Erase(const grpc::ServerContextBase* context);

 private:
  mutable std::mutex mu_;
  std::map<const grpc::ServerContextBase*, std::pair<CallIdentity, absl::Status>> calls_;
};

// The authenticated principal of a call ("" when auth is off or unknown).
std::string CallPrincipal(const grpc::ServerContextBase* context);
// The identity of a call (principal "" when auth is off or unknown).
CallIdentity CallerIdentity(const grpc::ServerContextBase* context);
// A call about a job names the job's gallery in its audit record.
void AnnotateCallGallery(const grpc::ServerContextBase* context, const std::string& gallery);

// The auth decision of a call so far; OK when no auth interceptor saw it (auth off). The gate
// (auth_interceptor.h) enforces it before unary handlers run. A client-streaming handler must
// check it after each Read: the interceptor authorizes a stream's gallery when the first
// message arrives, after the handler has started.
absl::Status CallDecision(const grpc::ServerContextBase* context);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_AUTH_H_
