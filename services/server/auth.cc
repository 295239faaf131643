#include "services/server/auth.h"

#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <google/protobuf/descriptor.h>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "services/server/gallery_names.h"
#include "tessera/v1/access.pb.h"

namespace tessera {

namespace {
// A refused expired token's principal, for its audit record (Authorize).
constexpr char kExpiredPrincipalPayload[] = "type.tessera/expired-principal";
}  // namespace

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
  // "/tessera.v1.FingerprintService/Search" -> "tessera.v1.FingerprintService.Search".
  if (!absl::ConsumePrefix(&full_method, "/")) return Role::kNone;
  const size_t slash = full_method.rfind('/');
  if (slash == absl::string_view::npos) return Role::kNone;
  const std::string name = absl::StrCat(full_method.substr(0, slash), ".", full_method.substr(slash + 1));
  const google::protobuf::MethodDescriptor* method =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  if (method == nullptr) return Role::kNone;
  switch (method->options().GetExtension(v1::required_role)) {
    case v1::ROLE_READER: return Role::kReader;
    case v1::ROLE_ENROLLER: return Role::kEnroller;
    case v1::ROLE_ADMIN: return Role::kAdmin;
    default: return Role::kNone;
  }
}

namespace {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::Load(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadTokenFile(path));
  auto store = Parse(text);
  if (!store.ok()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": ", store.status().message()));
  return store;
}

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::LoadSkippingBadLines(
    const std::string& path, std::vector<absl::Status>* bad_lines) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadTokenFile(path));
  return ParseSkippingBadLines(text, bad_lines);
}

GalleryGrants GalleryGrants::DefaultOnly() {
  GalleryGrants g;
  g.caps[kDefaultGallery] = Role::kAdmin;
  return g;
}

absl::StatusOr<GalleryGrants> GalleryGrants::Parse(absl::string_view value) {
  GalleryGrants g;
  for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipEmpty())) {
    Role cap = Role::kAdmin;
    const size_t colon = item.find(':');
    absl::string_view name = item.substr(0, colon);
    if (colon != absl::string_view::npos) {
      absl::StatusOr<Role> role = ParseRole(item.substr(colon + 1));
      if (!role.ok()) return role.status();
      cap = *role;
    }
    if (name != "*") TESSERA_RETURN_IF_ERROR(CheckGalleryName(name));
    g.caps[std::string(name)] = cap;
  }
  if (g.caps.empty()) return absl::InvalidArgumentError("galleries= names no gallery");
  return g;
}

Role GalleryGrants::RoleOn(absl::string_view gallery, Role role) const {
  auto it = caps.find(gallery);
  if (it == caps.end()) it = caps.find("*");
  if (it == caps.end()) return Role::kNone;
  return std::min(role, it->second);
}

namespace {

// "Search" of "/tessera.v1.FingerprintService/Search" as what a principal may not do.
std::string RightName(absl::string_view full_method) {
  const absl::string_view m = full_method.substr(full_method.rfind('/') + 1);
  if (m == "Search" || m == "SearchBatch") return "search";
  if (m == "Verify") return "verify against";
  if (m == "Enroll" || m == "EnrollStream") return "enroll into";
  if (m == "Delete") return "delete from";
  if (m == "List") return "list";
  if (m == "CreateGallery") return "create";
  if (m == "Submit") return "submit jobs on";
  return absl::StrCat("call ", m, " on");
}

}  // namespace

absl::Status CheckGalleryAccess(const CallIdentity& identity, absl::string_view full_method,
                                absl::string_view gallery) {
  const std::string name = GalleryOrDefault(gallery);
  TESSERA_RETURN_IF_ERROR(CheckGalleryName(name));
  const Role required = RequiredRole(full_method);
  const Role there = identity.galleries.RoleOn(name, identity.role);
  if (required != Role::kNone && there >= required) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("principal '", identity.principal, "' may not ",
                                                  RightName(full_method), " gallery '", name, "' (needs role '",
                                                  RoleName(required), "' there, has '", RoleName(there), "')"));
}

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::Parse(absl::string_view text) {
  return ParseLines(text, nullptr);
}

std::shared_ptr<const TokenStore> TokenStore::ParseSkippingBadLines(absl::string_view text,
                                                                    std::vector<absl::Status>* bad_lines) {
  return *ParseLines(text, bad_lines);
}

absl::StatusOr<std::shared_ptr<const TokenStore>> TokenStore::ParseLines(absl::string_view text,
                                                                         std::vector<absl::Status>* bad_lines) {
  auto store = std::make_shared<TokenStore>();
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::Status parsed = store->AddLine(line, line_no);
    if (parsed.ok()) continue;
    if (bad_lines == nullptr) return parsed;
    bad_lines->push_back(std::move(parsed));
  }
  return std::shared_ptr<const TokenStore>(std::move(store));
}

absl::Status TokenStore::AddLine(absl::string_view line, int line_no) {
  const size_t hash = line.find('#');
  if (hash != absl::string_view::npos) line = line.substr(0, hash);
  std::vector<absl::string_view> f = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  if (f.empty()) return absl::OkStatus();
  auto bad = [line_no](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", why));
  };
  if (f.size() < 3 || f.size() > 5) {
    return bad("expected TOKEN|cert:CN=NAME|cert:SAN=NAME PRINCIPAL ROLE[,ROLE] [expires=RFC3339] "
               "[galleries=G[:ROLE],...]");
  }
  const bool cert = absl::StartsWith(f[0], "cert:");
  CertEntry c;
  if (cert) {
    absl::string_view what = f[0].substr(5);
    if (absl::StartsWith(what, "CN=")) {
      c.name = std::string(what.substr(3));
    } else if (absl::StartsWith(what, "SAN=")) {
      c.san = true;
      c.name = std::string(what.substr(4));
    } else {
      return bad("a certificate line starts cert:CN=NAME or cert:SAN=NAME");
    }
    if (c.name.empty()) return bad("empty certificate name");
  } else if (f[0].size() < 16) {
    return bad("token shorter than 16 characters");
  }
  Grant g;
  g.principal = std::string(f[1]);
  for (absl::string_view r : absl::StrSplit(f[2], ',', absl::SkipEmpty())) {
    auto role = ParseRole(r);
    if (!role.ok()) return bad(role.status().message());
    if (*role > g.role) g.role = *role;
  }
  if (g.role == Role::kNone) return bad("no role");
  bool have_expires = false, have_galleries = false;
  for (size_t i = 3; i < f.size(); ++i) {
    if (absl::StartsWith(f[i], "expires=") && !have_expires) {
      have_expires = true;
      absl::Time t;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, std::string(f[i].substr(8)), &t, &err)) {
        return bad(absl::StrCat("bad expires time: ", err));
      }
      g.expires = t;
    } else if (absl::StartsWith(f[i], "galleries=") && !have_galleries) {
      have_galleries = true;
      absl::StatusOr<GalleryGrants> grants = GalleryGrants::Parse(f[i].substr(10));
      if (!grants.ok()) return bad(grants.status().message());
      g.galleries = std::move(*grants);
    } else {
      return bad(absl::StrCat("field ", i + 1, " must be expires=RFC3339 or galleries=..., once each"));
    }
  }
  if (cert) {
    c.grant = std::move(g);
    certs_.push_back(std::move(c));
  } else {
    tokens_.push_back({Sha256(f[0]), std::move(g)});
  }
  return absl::OkStatus();
}

absl::StatusOr<CallIdentity> TokenStore::Identity(const Grant& grant, absl::Time now, absl::string_view what) {
  if (grant.expires.has_value() && now >= *grant.expires) {
    // The refusal names nobody, but its audit record names the line's principal.
    absl::Status expired = absl::UnauthenticatedError(absl::StrCat(what, " expired"));
    expired.SetPayload(kExpiredPrincipalPayload, absl::Cord(grant.principal));
    return expired;
  }
  CallIdentity id;
  id.principal = grant.principal;
  id.role = grant.role;
  id.galleries = grant.galleries;
  return id;
}

absl::StatusOr<CallIdentity> TokenStore::Lookup(absl::string_view token, absl::Time now) const {
  const Sha256Digest h = Sha256(token);
  // Constant time in the token: every entry is compared in full.
  const TokenEntry* match = nullptr;
  for (const TokenEntry& e : tokens_) {
    const bool same = CRYPTO_memcmp(e.hash.data(), h.data(), h.size()) == 0;
    if (same && match == nullptr) match = &e;
  }
  if (match == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  TESSERA_ASSIGN_OR_RETURN(CallIdentity id, Identity(match->grant, now, "bearer token"));
  id.source = "token";
  return id;
}

absl::StatusOr<CallIdentity> TokenStore::LookupCertificate(const std::vector<std::string>& common_names,
                                                           const std::vector<std::string>& alt_names,
                                                           absl::Time now) const {
  for (bool san : {false, true}) {
    const std::vector<std::string>& names = san ? alt_names : common_names;
    for (const CertEntry& e : certs_) {
      if (e.san != san || std::find(names.begin(), names.end(), e.name) == names.end()) continue;
      TESSERA_ASSIGN_OR_RETURN(CallIdentity id, Identity(e.grant, now, "client certificate mapping"));
      id.source = "certificate";
      return id;
    }
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "client certificate (CN ", common_names.empty() ? std::string("none") : QuoteBounded(common_names[0], 64),
      ") is not mapped to a principal (token file cert:CN=... or cert:SAN=... line) and no bearer token was sent"));
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
  // Fails closed: the file as it is now is what holds, its bad lines left out
  // (each logged with its line number) and an unreadable file holding no
  // token at all, so a removed line stops working whatever else the edit
  // broke. Never the previous tokens.
  stamp_ = stamp;
  std::vector<absl::Status> bad_lines;
  absl::StatusOr<std::shared_ptr<const TokenStore>> tokens = TokenStore::LoadSkippingBadLines(path_, &bad_lines);
  if (!tokens.ok()) {
    TESSERA_LOG(ERROR) << "token file " << path_ << " changed and cannot be read (" << tokens.status()
                       << "): every call is refused until it can";
    tokens_ = std::make_shared<const TokenStore>();
    return tokens_;
  }
  for (const absl::Status& bad : bad_lines) {
    TESSERA_LOG(ERROR) << "token file " << path_ << " " << bad.message() << ": that line grants nothing until fixed";
  }
  tokens_ = std::move(*tokens);
  TESSERA_LOG(INFO) << "token file " << path_ << " reloaded: " << tokens_->size() << " token(s)"
                    << (bad_lines.empty() ? "" : absl::StrCat(", ", bad_lines.size(), " bad line(s) left out"));
  return tokens_;
}

absl::Status Authorizer::Check(absl::string_view full_method, const grpc::ServerContextBase& context,
                               CallIdentity* identity) const {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  std::optional<absl::string_view> auth;
  if (it != md.end()) auth = absl::string_view(it->second.data(), it->second.size());
  if (!auth.has_value() && accept_certificates_) {
    // The TLS layer has verified the chain (mutual TLS); gRPC exposes the subject names.
    const std::shared_ptr<const grpc::AuthContext> auth_context = context.auth_context();
    if (auth_context != nullptr && auth_context->IsPeerAuthenticated()) {
      auto values = [&](const char* property) {
        std::vector<std::string> out;
        for (const grpc::string_ref& v : auth_context->FindPropertyValues(property)) {
          out.emplace_back(v.data(), v.size());
        }
        return out;
      };
      return CheckCertificate(full_method, values(GRPC_X509_CN_PROPERTY_NAME), values(GRPC_X509_SAN_PROPERTY_NAME),
                              identity);
    }
  }
  return CheckToken(full_method, auth, identity);
}

absl::Status Authorizer::CheckToken(absl::string_view full_method, std::optional<absl::string_view> authorization,
                                    CallIdentity* identity) const {
  identity->method = std::string(full_method);
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(accept_certificates_
                                          ? "missing 'authorization: Bearer <token>' metadata or a client certificate"
                                          : "missing 'authorization: Bearer <token>' metadata");
  }
  absl::string_view v = *authorization;
  if (v.size() < 7 || !absl::EqualsIgnoreCase(v.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError("authorization metadata must be 'Bearer <token>'");
  }
  v = absl::StripAsciiWhitespace(v.substr(7));
  return Authorize(full_method, Tokens()->Lookup(v, absl::Now()), identity);
}

absl::Status Authorizer::CheckCertificate(absl::string_view full_method, const std::vector<std::string>& common_names,
                                          const std::vector<std::string>& alt_names, CallIdentity* identity) const {
  identity->method = std::string(full_method);
  return Authorize(full_method, Tokens()->LookupCertificate(common_names, alt_names, absl::Now()), identity);
}

absl::Status Authorizer::Authorize(absl::string_view full_method, absl::StatusOr<CallIdentity> found,
                                   CallIdentity* identity) {
  if (!found.ok()) {
    if (absl::optional<absl::Cord> who = found.status().GetPayload(kExpiredPrincipalPayload)) {
      identity->principal = std::string(*who);
    }
    absl::Status refused = found.status();
    refused.ErasePayload(kExpiredPrincipalPayload);
    return refused;
  }
  identity->principal = found->principal;
  identity->role = found->role;
  identity->galleries = std::move(found->galleries);
  identity->source = found->source;
  const Role required = RequiredRole(full_method);
  if (required == Role::kNone) {
    return absl::PermissionDeniedError("method states no required role (denied by default)");
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

void CallRegistry::AnnotateGallery(const grpc::ServerContextBase* context, const std::string& gallery) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(context);
  if (it != calls_.end() && it->second.first.gallery.empty()) it->second.first.gallery = gallery;
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

CallIdentity CallerIdentity(const grpc::ServerContextBase* context) {
  CallIdentity id;
  CallRegistry::Get().Decision(context, &id).IgnoreError();
  return id;
}

void AnnotateCallGallery(const grpc::ServerContextBase* context, const std::string& gallery) {
  CallRegistry::Get().AnnotateGallery(context, gallery);
}

absl::Status CallDecision(const grpc::ServerContextBase* context) {
  absl::Status decision = CallRegistry::Get().Decision(context);
  // NOT_FOUND: the call was never registered, i.e. no auth interceptor runs in this server.
  return decision.code() == absl::StatusCode::kNotFound ? absl::OkStatus() : decision;
}

}  // namespace tessera
