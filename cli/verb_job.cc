// `tessera job`: a client of the SchedulerService.
//   tessera job submit --server HOST:PORT [--id ID] [--priority N] [--deadline-s S] [--max-attempts N] [--watch]
//                      VERB ARGS...          (register ..., som train ..., fp search ..., recon ct|pet|mri|us ...)
//   tessera job watch  --server HOST:PORT [--after SEQ] ID
//   tessera job cancel|get|result --server HOST:PORT ID
//   tessera job list   --server HOST:PORT [--state S] [--kind K] [--limit N]
//   tessera job workers --server HOST:PORT
//   tessera job download --server HOST:PORT [--name F] [--out DIR] ID
// Results and job rows print as JSON on stdout; watch prints one line per
// event and exits 0 only when the job SUCCEEDED.
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/job_download.h"
#include "cli/job_specs.h"
#include "cli/verbs.h"
#include "services/server/bearer_channel.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

int Usage(FILE* out, int rc) {
  std::fprintf(out,
               "usage:\n"
               "  tessera job submit --server HOST:PORT [--id ID] [--priority N] [--deadline-s S]\n"
               "                     [--max-attempts N] [--watch] VERB ARGS...\n"
               "        VERB ARGS: register ... | som train ... | fp search ... | recon ct|pet|mri|us ... |\n"
               "                   apply-transforms ... [--registration-job ID [--inverse]] (flags as when run locally;\n"
               "        paths are server paths, relative ones made absolute here)\n"
               "  tessera job watch   --server HOST:PORT [--after SEQ] ID\n"
               "  tessera job get|cancel|result|delete --server HOST:PORT ID\n"
               "        delete: an ended job's results and result files (owner or admin); the job stays listed\n"
               "  tessera job list    --server HOST:PORT [--state queued|running|succeeded|failed|cancelled]\n"
               "                      [--kind KIND] [--owner PRINCIPAL] [--gallery NAME] [--limit N]\n"
               "        with --token-file: a non-admin lists its own jobs; jobs of others are not found\n"
               "  tessera job workers --server HOST:PORT\n"
               "  tessera job download --server HOST:PORT [--name FILE] [--out DIR] ID\n"
               "        a succeeded job's result files (all, or the one named as in `job result`) into DIR\n"
               "        (default .); a partly downloaded file resumes from its size\n"
               "  every verb takes --token-file FILE: the bearer token for a server started with --token-file,\n"
               "  and --tls-ca PEM [--tls-cert PEM --tls-key PEM]: TLS to a server started with --tls-cert\n"
               "  (the CA that signed it; a client certificate for mutual TLS)\n");
  return rc;
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

int Fail(const char* what, const grpc::Status& s) {
  std::fprintf(stderr, "tessera job %s: %s (%d)\n", what, s.error_message().c_str(), static_cast<int>(s.error_code()));
  return s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1;
}

// --name value / --name=value / boolean --name, up to the first plain word.
struct Flags {
  std::map<std::string, std::string> values;
  std::vector<std::string> rest;  // from the first plain word on
};

absl::StatusOr<Flags> ParseLeadingFlags(int argc, char** argv, int first, const std::set<std::string>& booleans,
                                        const std::set<std::string>& known) {
  Flags out;
  int i = first;
  for (; i < argc; ++i) {
    std::string w = argv[i];
    if (!absl::StartsWith(w, "--")) break;
    std::string name = w.substr(2), value = "true";
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (!booleans.count(name)) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = argv[++i];
    }
    if (!known.count(name) && !booleans.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    out.values[name] = value;
  }
  for (; i < argc; ++i) out.rest.push_back(argv[i]);
  return out;
}

int Watch(v1::SchedulerService::Stub& stub, const std::string& id, int64_t after) {
  grpc::ClientContext context;
  v1::WatchJobRequest request;
  request.set_job_id(id);
  request.set_after_sequence(after);
  auto reader = stub.Watch(&context, request);
  v1::JobEvent e;
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&e)) {
    last = e.state();
    const v1::Progress& p = e.progress();
    std::string line = absl::StrCat(e.sequence(), " ", v1::JobState_Name(e.state()).substr(10));
    if (!e.message().empty()) absl::StrAppend(&line, " ", e.message());
    if (!p.stage().empty() && e.message().empty()) {
      absl::StrAppend(&line, " ", p.stage(), " ", p.step(), p.total_steps() ? absl::StrCat("/", p.total_steps()) : "",
                      " (", static_cast<int>(p.fraction() * 100), "%)");
      for (const auto& [k, v] : p.metrics()) absl::StrAppend(&line, " ", k, "=", v);
      if (!p.message().empty()) absl::StrAppend(&line, " ", p.message());
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Fail("watch", s);
  return last == v1::JOB_STATE_SUCCEEDED ? 0 : 1;
}

}  // namespace

int RunJob(int argc, char** argv) {
  // argv[0] is "job".
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "help") {
    return Usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
  }
  const std::string sub = argv[1];
  const std::set<std::string> known = {"server", "token-file", "tls-ca", "tls-cert", "tls-key", "id", "priority",
                                       "deadline-s", "max-attempts", "after", "state", "kind", "limit", "owner",
                                       "gallery", "name", "out"};
  absl::StatusOr<Flags> flags = ParseLeadingFlags(argc, argv, 2, {"watch"}, known);
  if (!flags.ok()) {
    std::fprintf(stderr, "tessera job %s: %s\n", sub.c_str(), std::string(flags.status().message()).c_str());
    return Usage(stderr, 2);
  }
  const auto get = [&](const std::string& name, const std::string& fallback = "") {
    auto it = flags->values.find(name);
    return it == flags->values.end() ? fallback : it->second;
  };
  const std::string server = get("server");
  if (server.empty()) {
    std::fprintf(stderr, "tessera job %s: --server HOST:PORT is required\n", sub.c_str());
    return 2;
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);
  channel_args.SetMaxSendMessageSize(256 << 20);
  std::string token;
  if (!get("token-file").empty()) {
    absl::StatusOr<std::string> t = ReadClientTokenFile(get("token-file"));
    if (!t.ok()) {
      std::fprintf(stderr, "tessera job %s: %s\n", sub.c_str(), std::string(t.status().message()).c_str());
      return 2;
    }
    token = *t;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials({get("tls-ca"), get("tls-cert"), get("tls-key")});
  if (!credentials.ok()) {
    std::fprintf(stderr, "tessera job %s: %s\n", sub.c_str(), std::string(credentials.status().message()).c_str());
    return 2;
  }
  auto stub = v1::SchedulerService::NewStub(CreateBearerChannel(server, *credentials, channel_args, token));
  const auto int_flag = [&](const std::string& name, int64_t fallback, int64_t* out) {
    const std::string v = get(name);
    if (v.empty()) {
      *out = fallback;
      return true;
    }
    if (absl::SimpleAtoi(v, out)) return true;
    std::fprintf(stderr, "tessera job %s: --%s takes an integer\n", sub.c_str(), name.c_str());
    return false;
  };

  if (sub == "submit") {
    absl::StatusOr<v1::JobSpec> spec = JobSpecFromCommandLine(flags->rest);
    if (!spec.ok()) {
      std::fprintf(stderr, "tessera job submit: %s\n", std::string(spec.status().message()).c_str());
      return 2;
    }
    v1::SubmitJobRequest request;
    *request.mutable_spec() = *spec;
    request.set_request_id(get("id"));
    int64_t priority = 0, deadline_s = 0, attempts = 0;
    if (!int_flag("priority", 0, &priority) || !int_flag("deadline-s", 0, &deadline_s) ||
        !int_flag("max-attempts", 0, &attempts)) {
      return 2;
    }
    request.set_priority(static_cast<int32_t>(priority));
    request.set_max_attempts(static_cast<int32_t>(attempts));
    if (deadline_s > 0) request.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Seconds(deadline_s)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::JobInfo info;
    grpc::Status s = stub->Submit(&context, request, &info);
    if (!s.ok()) return Fail("submit", s);
    std::printf("%s\n", Json(info).c_str());
    std::fflush(stdout);
    if (get("watch") == "true") return Watch(*stub, info.job_id(), 0);
    return 0;
  }
  if (sub == "watch" || sub == "get" || sub == "cancel" || sub == "result" || sub == "delete") {
    if (flags->rest.size() != 1) {
      std::fprintf(stderr, "tessera job %s: name one job id\n", sub.c_str());
      return 2;
    }
    const std::string id = flags->rest[0];
    if (sub == "watch") {
      int64_t after = 0;
      if (!int_flag("after", 0, &after)) return 2;
      return Watch(*stub, id, after);
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::JobRef ref;
    ref.set_job_id(id);
    if (sub == "result") {
      v1::JobResult result;
      grpc::Status s = stub->GetResult(&context, ref, &result);
      if (!s.ok()) return Fail("result", s);
      std::printf("%s\n", Json(result).c_str());
      return 0;
    }
    v1::JobInfo info;
    grpc::Status s = sub == "get"      ? stub->Get(&context, ref, &info)
                     : sub == "delete" ? stub->Delete(&context, ref, &info)
                                       : stub->Cancel(&context, ref, &info);
    if (!s.ok()) return Fail(sub.c_str(), s);
    std::printf("%s\n", Json(info).c_str());
    return 0;
  }
  if (sub == "download") {
    if (flags->rest.size() != 1) {
      std::fprintf(stderr, "tessera job download: name one job id\n");
      return 2;
    }
    absl::StatusOr<std::vector<DownloadedFile>> files =
        DownloadJobFiles(*stub, flags->rest[0], get("name"), get("out", "."));
    if (!files.ok()) {
      std::fprintf(stderr, "tessera job download: %s\n", std::string(files.status().message()).c_str());
      return files.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    for (const DownloadedFile& f : *files) {
      std::printf("%s\t%lld bytes\t%s%s\n", f.name.c_str(), static_cast<long long>(f.bytes), f.path.c_str(),
                  f.received < f.bytes ? absl::StrCat(" (resumed, ", f.received, " fetched)").c_str() : "");
    }
    return 0;
  }
  if (sub == "list") {
    v1::ListJobsRequest request;
    if (!get("state").empty()) {
      v1::JobState state;
      if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(get("state")), &state)) {
        std::fprintf(stderr, "tessera job list: --state must be queued, running, succeeded, failed or cancelled\n");
        return 2;
      }
      request.add_states(state);
    }
    request.set_kind(get("kind"));
    request.set_owner(get("owner"));
    request.set_gallery_filter(get("gallery"));
    int64_t limit = 100;
    if (!int_flag("limit", 100, &limit)) return 2;
    request.set_page_size(static_cast<int32_t>(std::min<int64_t>(limit, 1000)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::ListJobsResponse response;
    grpc::Status s = stub->List(&context, request, &response);
    if (!s.ok()) return Fail("list", s);
    std::printf("%s\n", Json(response).c_str());
    return 0;
  }
  if (sub == "workers") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::ListWorkersResponse response;
    grpc::Status s = stub->ListWorkers(&context, v1::ListWorkersRequest(), &response);
    if (!s.ok()) return Fail("workers", s);
    std::printf("%s\n", Json(response).c_str());
    return 0;
  }
  std::fprintf(stderr, "tessera job: unknown subcommand '%s'\n", sub.c_str());
  return Usage(stderr, 2);
}

}  // namespace tessera::cli
