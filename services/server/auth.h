// Bearer-token authentication and role-based authorization for the server.
//
// Token file (`tessera serve --token-file FILE`), one token per line:
//   TOKEN PRINCIPAL ROLE[,ROLE] [expires=RFC3339]
// '#' starts a comment; blank lines are ignored. Roles: reader, enroller, admin
// (each includes the ones before it). Only SHA-256 hashes of the tokens are kept
// in memory and lookups compare hashes in constant time.
//
// Every hosted method has a required role in one table (method_roles.cc); a
// method missing from the table is denied (fail closed). grpc.health.v1 and
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

// The required role of every hosted method ("/tessera.v1.FingerprintService/Search").
const std::map<std::string, Role>& MethodRoleTable();
// kNone when the method is not in the table (then it is denied).
Role RequiredRole(absl::string_view full_method);

// Who is calling: filled by the auth interceptor for every call.
struct CallIdentity {
  std::string principal;  // "" when unauthenticated
  Role role = Role::kNone;
  std::string peer;
  std::string method;
};

class TokenStore {
 public:
  static absl::StatusOr<std::shared_ptr<const TokenStore>> Load(const std::string& path);
  static absl::StatusOr<std::shared_ptr<const TokenStore>> Parse(absl::string_view text);

  // UNAUTHENTICATED for unknown or expired tokens; the message never quotes the token.
  absl::StatusOr<CallIdentity> Lookup(absl::string_view token, absl::Time now) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Sha256Digest hash;
    std::string principal;
    Role role = Role::kNone;
    std::optional<absl::Time> expires;
  };
  std::vector<Entry> entries_;
};

// Authenticates and authorizes one call from its metadata ("authorization:
// Bearer TOKEN"). OK: the caller's identity. UNAUTHENTICATED (no, unknown or
// expired token) or PERMISSION_DENIED (naming the missing role) otherwise.
class Authorizer {
 public:
  explicit Authorizer(std::shared_ptr<const TokenStore> tokens) : tokens_(std::move(tokens)) {}
  // Loads `token_file` and re-reads it when it changes (checked at most every `reload_interval`),
  // so removing a line revokes that token without a restart. A file that no longer parses keeps
  // the previous tokens and logs an error.
  static absl::StatusOr<std::shared_ptr<Authorizer>> FromFile(const std::string& token_file,
                                                              absl::Duration reload_interval = absl::Seconds(1));
  absl::Status Check(absl::string_view full_method, const grpc::ServerContextBase& context,
                     CallIdentity* identity) const;
  absl::Status CheckToken(absl::string_view full_method, std::optional<absl::string_view> authorization,
                          CallIdentity* identity) const;

 private:
  std::shared_ptr<const TokenStore> Tokens() const;

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
  // The decision and identity; NOT_FOUND decision when the call is unknown.
  absl::Status Decision(const grpc::ServerContextBase* context, CallIdentity* identity = nullptr) const;
  void Erase(const grpc::ServerContextBase* context);

 private:
  mutable std::mutex mu_;
  std::map<const grpc::ServerContextBase*, std::pair<CallIdentity, absl::Status>> calls_;
};

// The authenticated principal of a call ("" when auth is off or unknown).
std::string CallPrincipal(const grpc::ServerContextBase* context);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_AUTH_H_
