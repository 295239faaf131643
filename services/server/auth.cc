#include "services/server/auth.h"

#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"

namespace tessera {

Sha256Digest Sha256(absl::string_view data) {
  Sha256Digest out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string Sha256Hex(absl::string_view data) {
  static const char kHex[] = "0123456789abcdef";
  const Sha256Digest d = Sha256(data);
  std::string hex;
  hex.reserve(64);
  for (unsigned char c : d) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kReader: return "reader";
    case Role::kEnroller: return "enroller";
    case Role::kAdmin: return "admin";
    default: return "none";
  }
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "reader") return Role::kReader;
  if (name == "enroller") return Role::kEnroller;
  if (name == "admin") return Role::kAdmin;
  return absl::InvalidArgumentError(absl::StrCat("unknown role '", name.substr(0, 32),
                                                 "' (reader, enroller or admin)"));
}

Role RequiredRole(absl::string_view full_method) {
  const auto& table = MethodRoleTable();
  auto it = table.find(std::string(full_method));
  return it == table.end() ? Role::kNone : it->second;
}

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto store = Parse(ss.str());
  if (!store.ok()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": ", store.status().message()));
  return store;
}

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::Parse(absl::string_view text) {
  auto store = std::make_shared<TokenStore>();
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (f.empty()) continue;
    if (f.size() < 3 || f.size() > 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected TOKEN PRINCIPAL ROLE[,ROLE] [expires=RFC3339]"));
    }
    if (f[0].size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": token shorter than 16 characters"));
    }
    Entry e;
    e.hash = Sha256(f[0]);
    e.principal = std::string(f[1]);
    for (absl::string_view r : absl::StrSplit(f[2], ',', absl::SkipEmpty())) {
      auto role = ParseRole(r);
      if (!role.ok()) return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", role.status().message()));
      if (*role > e.role) e.role = *role;
    }
    if (e.role == Role::kNone) return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": no role"));
    if (f.size() == 4) {
      if (!absl::StartsWith(f[3], "expires=")) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": the 4th field must be expires=RFC3339"));
      }
      absl::Time t;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, std::string(f[3].substr(8)), &t, &err)) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": bad expires time: ", err));
      }
      e.expires = t;
    }
    store->entries_.push_back(std::move(e));
  }
  return std::shared_ptr<const TokenStore>(std::move(store));
}

absl::StatusOr<CallIdentity> TokenStore::Lookup(absl::string_view token, absl::Time now) const {
  const Sha256Digest h = Sha256(token);
  // Constant time in the token: every entry is compared in full.
  const Entry* match = nullptr;
  for (const Entry& e : entries_) {
    const bool same = CRYPTO_memcmp(e.hash.data(), h.data(), h.size()) == 0;
    if (same && match == nullptr) match = &e;
  }
  if (match == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  if (match->expires.has_value() && now >= *match->expires) {
    return absl::UnauthenticatedError("bearer token expired");
  }
  CallIdentity id;
  id.principal = match->principal;
  id.role = match->role;
  return id;
}

namespace {
std::pair<int64_t, int64_t> FileStamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {-1, -1};
  return {int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, st.st_size};
}
}  // namespace

absl::StatusOr<std::shared_ptr<Authorizer>> Authorizer::FromFile(const std::string& token_file,
                                                                 absl::Duration reload_interval) {
  const auto stamp = FileStamp(token_file);
  absl::StatusOr<std::shared_ptr<const TokenStore>> tokens = TokenStore::Load(token_file);
  if (!tokens.ok()) return tokens.status();
  auto authorizer = std::make_shared<Authorizer>(std::move(*tokens));
  authorizer->path_ = token_file;
  authorizer->reload_interval_ = reload_interval;
  authorizer->stamp_ = stamp;
  authorizer->next_check_ = absl::Now() + reload_interval;
  return authorizer;
}

std::shared_ptr<const TokenStore> Authorizer::Tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return tokens_;
  const absl::Time now = absl::Now();
  if (now < next_check_) return tokens_;
  next_check_ = now + reload_interval_;
  const auto stamp = FileStamp(path_);
  if (stamp == stamp_) return tokens_;
  absl::StatusOr<std::shared_ptr<const TokenStore>> tokens = TokenStore::Load(path_);
  if (!tokens.ok()) {
    TESSERA_LOG(ERROR) << "token file changed but cannot be used, keeping the previous tokens: " << tokens.status();
    return tokens_;
  }
  stamp_ = stamp;
  tokens_ = std::move(*tokens);
  TESSERA_LOG(INFO) << "token file " << path_ << " reloaded: " << tokens_->size() << " token(s)";
  return tokens_;
}

absl::Status Authorizer::Check(absl::string_view full_method, const grpc::ServerContextBase& context,
                               CallIdentity* identity) const {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  std::optional<absl::string_view> auth;
  if (it != md.end()) auth = absl::string_view(it->second.data(), it->second.size());
  return CheckToken(full_method, auth, identity);
}

absl::Status Authorizer::CheckToken(absl::string_view full_method, std::optional<absl::string_view> authorization,
                                    CallIdentity* identity) const {
  identity->method = std::string(full_method);
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  }
  absl::string_view v = *authorization;
  if (v.size() < 7 || !absl::EqualsIgnoreCase(v.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError("authorization metadata must be 'Bearer <token>'");
  }
  v = absl::StripAsciiWhitespace(v.substr(7));
  absl::StatusOr<CallIdentity> found = Tokens()->Lookup(v, absl::Now());
  if (!found.ok()) return found.status();
  identity->principal = found->principal;
  identity->role = found->role;
  const Role required = RequiredRole(full_method);
  if (required == Role::kNone) {
    return absl::PermissionDeniedError("method not in the access table (denied by default)");
  }
  if (identity->role < required) {
    return absl::PermissionDeniedError(absl::StrCat("requires role '", RoleName(required), "'; principal '",
                                                    identity->principal, "' has '", RoleName(identity->role), "'"));
  }
  return absl::OkStatus();
}

CallRegistry& CallRegistry::Get() {
  static auto* registry = new CallRegistry();
  return *registry;
}

void CallRegistry::Set(const grpc::ServerContextBase* context, CallIdentity identity, absl::Status decision) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_[context] = {std::move(identity), std::move(decision)};
}

absl::Status CallRegistry::Decision(const grpc::ServerContextBase* context, CallIdentity* identity) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(context);
  if (it == calls_.end()) return absl::NotFoundError("call not authenticated");
  if (identity != nullptr) *identity = it->second.first;
  return it->second.second;
}

void CallRegistry::Erase(const grpc::ServerContextBase* context) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(context);
}

std::string CallPrincipal(const grpc::ServerContextBase* context) {
  CallIdentity id;
  CallRegistry::Get().Decision(context, &id).IgnoreError();
  return id.principal;
}

}  // namespace tessera
