#include "services/jobs/request_fingerprint.h"

#include <memory>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "services/jobs/engine.h"

namespace tessera::jobs {

namespace {

constexpr const char* kKeyFields[] = {"request_id", "job_id"};

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace

std::string RequestFingerprint(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  const google::protobuf::Descriptor* descriptor = copy->GetDescriptor();
  for (const char* name : kKeyFields) {
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field != nullptr && field->type() == google::protobuf::FieldDescriptor::TYPE_STRING &&
        !field->is_repeated()) {
      copy->GetReflection()->ClearField(copy.get(), field);
    }
  }
  const std::string text = absl::StrCat(descriptor->full_name(), "\n", DeterministicBytes(*copy));
  return Sha256Hex(text.data(), text.size());
}

std::string SpecFingerprint(const google::protobuf::Any& spec) {
  const google::protobuf::Descriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(SpecTypeName(spec.type_url()));
  if (descriptor != nullptr) {
    const google::protobuf::Message* prototype =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(descriptor);
    std::unique_ptr<google::protobuf::Message> message(prototype == nullptr ? nullptr : prototype->New());
    if (message != nullptr && message->ParseFromString(spec.value())) return RequestFingerprint(*message);
  }
  const std::string text = absl::StrCat(spec.type_url(), "\n", spec.value());
  return Sha256Hex(text.data(), text.size());
}

}  // namespace tessera::jobs
