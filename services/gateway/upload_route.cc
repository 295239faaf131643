#include "services/gateway/upload_route.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/gateway/http_exchange.h"
#include "tessera/v1/common.pb.h"

namespace tessera::gateway {
namespace pb = google::protobuf;

void ServeUpload(const GatewayContext& gateway, const std::string& target, const httplib::Request& request,
                 httplib::Response& response, const httplib::ContentReader* body) {
  const std::string service = target == "registration"     ? "tessera.v1.RegistrationService"
                              : target == "reconstruction" ? "tessera.v1.ReconstructionService"
                                                           : "";
  if (service.empty()) {
    SendError(response, grpc::StatusCode::NOT_FOUND,
              absl::StrCat("no upload target '", target, "': use /v1/uploads/registration or /v1/uploads/reconstruction"));
    return;
  }
  absl::StatusOr<const pb::MethodDescriptor*> method = gateway.forwarder.FindMethod(service, "UploadFile");
  if (!method.ok()) {
    SendError(response, grpc::StatusCode::UNIMPLEMENTED, absl::StrCat("this server does not host ", service));
    return;
  }
  const std::string filename = request.get_param_value("filename");
  if (filename.empty()) {
    SendError(response, grpc::StatusCode::INVALID_ARGUMENT,
              "query parameter filename is required (e.g. ?filename=scan.nii.gz): it tells the server the file type");
    return;
  }
  int64_t total = 0;
  if (!request.has_header("Content-Length") ||
      !absl::SimpleAtoi(request.get_header_value("Content-Length"), &total) || total < 0) {
    // Read (and drop) up to one chunk of the body first: closing a socket with unread bytes makes the kernel
    // reset the connection, and the client may then lose the 411 before it reads it.
    if (body != nullptr) {
      size_t drained = 0;
      (*body)([&](const char*, size_t n) {
        drained += n;
        return drained < kUploadChunkBytes;
      });
    }
    response.set_header("Connection", "close");
    SendError(response, grpc::StatusCode::INVALID_ARGUMENT,
              "an upload needs a Content-Length header (chunked bodies are refused: the server checks the size "
              "before storing anything)",
              411);
    return;
  }
  std::unique_ptr<grpc::ClientContext> context = RpcForwarder::NewContext(CallerOf(request));
  ScopedActiveCall registered(gateway.active, context.get());
  v1::UploadedFile uploaded;
  std::unique_ptr<grpc::ClientWriter<pb::Message>> writer =
      gateway.forwarder.ClientStream(**method, context.get(), &uploaded);
  v1::FileChunk chunk;
  chunk.set_filename(filename);
  chunk.set_total_bytes(total);
  chunk.mutable_data()->reserve(kUploadChunkBytes);
  int64_t offset = 0;
  bool call_open = true;  // false once the server ended the call (its status tells why)
  const auto send = [&] {
    chunk.set_offset(offset);
    offset += static_cast<int64_t>(chunk.data().size());
    call_open = writer->Write(chunk);
    chunk.clear_filename();  // only the first chunk names the file
    chunk.clear_total_bytes();
    chunk.mutable_data()->clear();
    return call_open;
  };
  bool read = true;
  if (body != nullptr && total > 0) {
    read = (*body)([&](const char* data, size_t n) {
      while (n > 0) {
        const size_t take = std::min(n, kUploadChunkBytes - chunk.data().size());
        chunk.mutable_data()->append(data, take);
        data += take;
        n -= take;
        if (chunk.data().size() == kUploadChunkBytes && !send()) return false;
      }
      return true;
    });
  }
  if (call_open && read && (!chunk.data().empty() || offset == 0)) send();
  if (call_open) writer->WritesDone();
  if (!read && call_open) context->TryCancel();  // the client's body broke off: abandon the upload
  const CallOutcome outcome = RpcForwarder::Finish(*writer, *context);
  if (!read || !call_open) response.set_header("Connection", "close");  // the rest of the body is unread
  if (!outcome.status.ok()) {
    SendError(response, outcome);
    return;
  }
  if (!read) {
    SendError(response, grpc::StatusCode::INVALID_ARGUMENT, "the request body broke off before Content-Length bytes");
    return;
  }
  SendJson(response, 200, RpcForwarder::ToJson(uploaded));
}

}  // namespace tessera::gateway
