#include "services/volume/volume_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/dicom/dicom_test_data.h"
#include "common/nifti_io.h"
#include "services/server/service_host.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using volume_internal::ResolveUnderRoots;
using volume_internal::ValidateStreamHeader;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string MakeDir(const std::string& path) {
  mkdir(path.c_str(), 0755);
  return path;
}

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

std::string Real(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? buf : path;
}

// --- path resolution --------------------------------------------------------

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = Real(MakeDir(TmpDir() + "/resolve"));
    root_ = MakeDir(base_ + "/root");
    MakeDir(root_ + "/sub");
    Touch(root_ + "/sub/in.nii");
    Touch(base_ + "/outside.nii");
    ASSERT_TRUE(symlink((base_ + "/outside.nii").c_str(), (root_ + "/escape.nii").c_str()) == 0 || errno == EEXIST);
    ASSERT_TRUE(symlink((root_ + "/sub/in.nii").c_str(), (base_ + "/link_in.nii").c_str()) == 0 || errno == EEXIST);
  }
  std::string base_, root_;
};

TEST_F(ResolveTest, AbsolutePathUnderRoot) {
  absl::StatusOr<std::string> p = ResolveUnderRoots(root_ + "/sub/in.nii", {root_});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, root_ + "/sub/in.nii");
  // Dots that stay inside are fine.
  EXPECT_TRUE(ResolveUnderRoots(root_ + "/sub/../sub/./in.nii", {root_}).ok());
}

TEST_F(ResolveTest, RelativePathIsTriedUnderEachRoot) {
  const std::string other = MakeDir(base_ + "/other");
  absl::StatusOr<std::string> p = ResolveUnderRoots("sub/in.nii", {other, root_});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, root_ + "/sub/in.nii");
}

TEST_F(ResolveTest, OutsideRootsIsPermissionDenied) {
  absl::Status s = ResolveUnderRoots(base_ + "/outside.nii", {root_}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside the server's data roots"));
  EXPECT_EQ(ResolveUnderRoots("../outside.nii", {root_}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveUnderRoots(root_ + "/../outside.nii", {root_}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A root's name as a prefix of a sibling is not "under" it.
  MakeDir(root_ + "2");
  Touch(root_ + "2/x.nii");
  EXPECT_EQ(ResolveUnderRoots(root_ + "2/x.nii", {root_}).status().code(), absl::StatusCode::kPermissionDenied);
  // Nor does /etc/passwd exist as far as the client can tell.
  EXPECT_EQ(ResolveUnderRoots("/etc/passwd", {root_}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveUnderRoots("/no/such/file.nii", {root_}).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(ResolveTest, SymlinksAreResolvedBeforeTheCheck) {
  EXPECT_EQ(ResolveUnderRoots(root_ + "/escape.nii", {root_}).status().code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<std::string> p = ResolveUnderRoots(base_ + "/link_in.nii", {root_});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, root_ + "/sub/in.nii");
}

TEST_F(ResolveTest, MissingUnderRootIsNotFound) {
  EXPECT_EQ(ResolveUnderRoots(root_ + "/sub/none.nii", {root_}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResolveUnderRoots("none.nii", {root_}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ResolveTest, OtherErrors) {
  EXPECT_EQ(ResolveUnderRoots("", {root_}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnderRoots(root_ + "/sub", {root_}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnderRoots(root_ + "/sub/in.nii", {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

// --- header validation -----------------------------------------------------

v1::VolumeHeader Header(std::vector<int64_t> dims, v1::DType dtype = v1::DTYPE_FLOAT32) {
  v1::VolumeHeader h;
  for (int64_t d : dims) h.add_dims(d);
  h.set_dtype(dtype);
  return h;
}

TEST(ValidateStreamHeaderTest, AcceptsPlainArraysAndVolumes) {
  absl::StatusOr<volume_internal::StreamHeader> h = ValidateStreamHeader(Header({4, 3, 2}), 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->nbytes, 4 * 3 * 2 * 4);
  EXPECT_FALSE(h->has_geometry);

  v1::VolumeHeader g = Header({2, 2, 2, 1, 1, 1, 3}, v1::DTYPE_INT16);
  for (double v : {1.0, 2.0, 3.0}) g.add_spacing(v);
  for (double v : {-1.0, 0.0, 5.0}) g.add_origin(v);
  for (double v : {-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0}) g.add_direction(v);
  h = ValidateStreamHeader(g, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->has_geometry);
  EXPECT_EQ(h->geometry.AxisCodes(), "LPS");
  EXPECT_EQ(h->geometry.spacing[2], 3.0);
}

TEST(ValidateStreamHeaderTest, RejectsBadHeaders) {
  auto code = [](const v1::VolumeHeader& h) { return ValidateStreamHeader(h, 1 << 20).status().code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(Header({})), kInvalid);
  EXPECT_EQ(code(Header({1, 1, 1, 1, 1, 1, 1, 1})), kInvalid);
  EXPECT_EQ(code(Header({4, 0, 2})), kInvalid);
  EXPECT_EQ(code(Header({4, -3, 2})), kInvalid);
  EXPECT_EQ(code(Header({4}, v1::DTYPE_UNSPECIFIED)), kInvalid);
  EXPECT_EQ(code(Header({4}, static_cast<v1::DType>(42))), kInvalid);

  v1::VolumeHeader h = Header({4, 4, 4});
  h.add_spacing(1);
  h.add_spacing(0);
  EXPECT_EQ(code(h), kInvalid);
  h = Header({4, 4, 4});
  for (int i = 0; i < 4; ++i) h.add_spacing(1);
  EXPECT_EQ(code(h), kInvalid);
  h = Header({4, 4, 4});
  h.add_origin(std::numeric_limits<double>::infinity());
  EXPECT_EQ(code(h), kInvalid);
  h = Header({4, 4, 4});
  for (int i = 0; i < 8; ++i) h.add_direction(i == 0 || i == 4 ? 1 : 0);
  EXPECT_EQ(code(h), kInvalid);  // 8 entries
  h = Header({4, 4, 4});
  for (double v : {1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0}) h.add_direction(v);
  absl::Status singular = ValidateStreamHeader(h, 1 << 20).status();
  EXPECT_EQ(singular.code(), kInvalid);  // unit columns 0 and 1 are equal
  EXPECT_THAT(std::string(singular.message()), HasSubstr("singular"));
  h = Header({4, 4, 4});
  for (double v : {2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0}) h.add_direction(v);
  absl::Status s = ValidateStreamHeader(h, 1 << 20).status();
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unit"));
  h = Header({4, 4, 4});
  for (double v : {1.0, 0.0, 0.0, 0.0, std::nan(""), 0.0, 0.0, 0.0, 1.0}) h.add_direction(v);
  EXPECT_EQ(code(h), kInvalid);
}

TEST(ValidateStreamHeaderTest, SizeLimitIsResourceExhaustedWithoutOverflow) {
  EXPECT_TRUE(ValidateStreamHeader(Header({256, 256, 4}), 1 << 20).ok());  // exactly 1 MiB
  EXPECT_EQ(ValidateStreamHeader(Header({256, 256, 5}), 1 << 20).status().code(),
            absl::StatusCode::kResourceExhausted);
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(ValidateStreamHeader(Header({big, big, big, big}, v1::DTYPE_FLOAT64), int64_t{1} << 62).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// --- over gRPC ---------------------------------------------------------------

class VolumeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = Real(MakeDir(TmpDir() + "/volumes"));
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.data_roots = {root_, "/usr/share/mricron"};
    if (access("/usr/share/mricron", F_OK) != 0) options.data_roots.pop_back();
    options.max_volume_bytes = 1 << 20;
    absl::StatusOr<std::unique_ptr<VolumeServiceImpl>> service = VolumeServiceImpl::Create(options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(service_.get());
    absl::StatusOr<BoundPorts> ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    stub_ = v1::VolumeService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Describe(const std::string& path, v1::VolumeSummary* summary) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::DescribeFileRequest request;
    request.set_path(path);
    return stub_->DescribeFile(&context, request, summary);
  }

  grpc::Status Stream(const std::vector<v1::ArrayChunk>& chunks, v1::VolumeSummary* summary) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    std::unique_ptr<grpc::ClientWriter<v1::ArrayChunk>> writer = stub_->DescribeStream(&context, summary);
    for (const v1::ArrayChunk& chunk : chunks) {
      if (!writer->Write(chunk)) break;  // the server has already answered
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // Splits `bytes` into chunks of `size`, the first carrying `header`.
  static std::vector<v1::ArrayChunk> Chunks(const v1::VolumeHeader& header, const std::string& bytes, size_t size) {
    std::vector<v1::ArrayChunk> chunks;
    for (size_t offset = 0; offset < bytes.size() || chunks.empty(); offset += size) {
      v1::ArrayChunk chunk;
      if (chunks.empty()) *chunk.mutable_header() = header;
      chunk.set_offset(static_cast<int64_t>(offset));
      chunk.set_data(bytes.substr(offset, size));
      chunks.push_back(chunk);
    }
    return chunks;
  }

  static std::string Floats(const std::vector<float>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }

  std::string root_;
  std::unique_ptr<VolumeServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
  std::unique_ptr<v1::VolumeService::Stub> stub_;
};

TEST_F(VolumeServiceTest, CreateChecksOptions) {
  ServerOptions options;
  options.data_roots = {root_ + "/does-not-exist"};
  EXPECT_EQ(VolumeServiceImpl::Create(options).status().code(), absl::StatusCode::kNotFound);
  Touch(root_ + "/a-file");
  options.data_roots = {root_ + "/a-file"};
  EXPECT_EQ(VolumeServiceImpl::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.data_roots = {};
  options.device = "tpu";
  EXPECT_EQ(VolumeServiceImpl::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VolumeServiceTest, DescribeFileSummarizesAWrittenVolume) {
  absl::StatusOr<NDArray> data = NDArray::Allocate({4, 3, 2}, DType::kFloat32);
  ASSERT_TRUE(data.ok());
  float* p = data->data<float>();
  for (int i = 0; i < 24; ++i) p[i] = static_cast<float>(i);  // mean 11.5
  Volume volume;
  volume.data = *data;
  volume.geometry.spacing = {2, 3, 4};
  volume.geometry.origin = {10, 20, 30};
  volume.geometry.direction = {-1, 0, 0, 0, -1, 0, 0, 0, 1};
  volume.description = "ramp";
  ASSERT_TRUE(WriteNifti(volume, root_ + "/ramp.nii.gz").ok());

  v1::VolumeSummary summary;
  grpc::Status status = Describe(root_ + "/ramp.nii.gz", &summary);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(summary.header().dims(), ::testing::ElementsAre(4, 3, 2));
  EXPECT_EQ(summary.header().dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(summary.header().description(), "ramp");
  EXPECT_EQ(summary.voxel_count(), 24);
  EXPECT_EQ(summary.nonfinite_count(), 0);
  EXPECT_DOUBLE_EQ(summary.min(), 0);
  EXPECT_DOUBLE_EQ(summary.max(), 23);
  EXPECT_NEAR(summary.mean(), 11.5, 1e-9);
  EXPECT_NEAR(summary.stddev(), std::sqrt((24.0 * 24.0 - 1) / 12.0), 1e-6);
  EXPECT_EQ(summary.orientation(), "LPS");
  ASSERT_EQ(summary.affine_size(), 16);
  EXPECT_NEAR(summary.affine(0), -2, 1e-5);   // -x * 2 mm
  EXPECT_NEAR(summary.affine(5), -3, 1e-5);
  EXPECT_NEAR(summary.affine(10), 4, 1e-5);
  EXPECT_NEAR(summary.affine(3), 10, 1e-4);
  EXPECT_NEAR(summary.affine(11), 30, 1e-4);
  EXPECT_EQ(summary.affine(15), 1);
  EXPECT_EQ(summary.format(), "NIfTI-1");
  EXPECT_EQ(summary.backend(), DeviceRegistry::Get().cuda_available() ? "cuda" : "cpu");

  // Relative paths resolve under the roots.
  v1::VolumeSummary relative;
  ASSERT_TRUE(Describe("ramp.nii.gz", &relative).ok());
  EXPECT_EQ(relative.voxel_count(), 24);
}

TEST_F(VolumeServiceTest, DescribeFileErrors) {
  v1::VolumeSummary summary;
  EXPECT_EQ(Describe("/etc/passwd", &summary).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Describe(root_ + "/missing.nii.gz", &summary).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Describe("", &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::ofstream(root_ + "/junk.nii") << std::string(1000, 'j');
  EXPECT_EQ(Describe(root_ + "/junk.nii", &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Larger than max_volume_bytes (1 MiB here): 128^3 uint8 = 2 MiB.
  absl::StatusOr<NDArray> big = NDArray::Allocate({128, 128, 128}, DType::kUInt8);
  ASSERT_TRUE(big.ok());
  std::memset(big->raw_data(), 1, big->nbytes());
  Volume volume;
  volume.data = *big;
  ASSERT_TRUE(WriteNifti(volume, root_ + "/big.nii.gz").ok());
  grpc::Status status = Describe(root_ + "/big.nii.gz", &summary);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}

// A DICOM file (here an Enhanced multi-frame object) under the roots is
// described like a NIfTI volume, format "DICOM".
TEST_F(VolumeServiceTest, DescribeFileReadsDicom) {
  const std::string data = dicom::DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom";
  std::ifstream in(data + "/known-geometry-24x38x3/multiframe/mf.dcm", std::ios::binary);
  std::ofstream(root_ + "/mf.dcm", std::ios::binary) << in.rdbuf();
  v1::VolumeSummary summary;
  grpc::Status status = Describe(root_ + "/mf.dcm", &summary);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(summary.format(), "DICOM");
  EXPECT_THAT(summary.header().dims(), ::testing::ElementsAre(24, 38, 3));
  EXPECT_EQ(summary.header().dtype(), v1::DTYPE_UINT16);
  EXPECT_EQ(summary.orientation(), "LAS");
  ASSERT_EQ(summary.affine_size(), 16);
  EXPECT_NEAR(summary.affine(10), 2.5, 1e-6);
  // A broken DICOM file is INVALID_ARGUMENT.
  std::ofstream(root_ + "/bad.dcm", std::ios::binary) << std::string(128, '\0') << "DICM" << std::string(10, 'x');
  EXPECT_EQ(Describe(root_ + "/bad.dcm", &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(VolumeServiceTest, DescribeFileReadsTheMricronTemplate) {
  const std::string path = "/usr/share/mricron/templates/ch2.nii.gz";
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " not installed";
  // 181x217x181 uint8 is 6.8 MiB: above this fixture's 1 MiB limit.
  v1::VolumeSummary summary;
  EXPECT_EQ(Describe(path, &summary).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(VolumeServiceTest, DescribeStreamSummarizesChunks) {
  std::vector<float> values(4 * 3 * 2);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 5;
  values[7] = NAN;
  values[8] = std::numeric_limits<float>::infinity();
  v1::VolumeHeader header = Header({4, 3, 2});
  header.set_description("streamed");
  for (double v : {1.0, 1.0, 2.5}) header.add_spacing(v);
  v1::VolumeSummary summary;
  grpc::Status status = Stream(Chunks(header, Floats(values), 7), &summary);  // chunks split floats
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(summary.voxel_count(), 24);
  EXPECT_EQ(summary.nonfinite_count(), 2);
  EXPECT_DOUBLE_EQ(summary.min(), -5);
  EXPECT_DOUBLE_EQ(summary.max(), 18);
  double sum = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) sum += values[i];
  }
  EXPECT_NEAR(summary.mean(), sum / 22, 1e-9);
  EXPECT_EQ(summary.format(), "stream");
  EXPECT_EQ(summary.orientation(), "RAS");
  ASSERT_EQ(summary.affine_size(), 16);
  EXPECT_DOUBLE_EQ(summary.affine(10), 2.5);
  EXPECT_EQ(summary.header().description(), "streamed");

  // One chunk holding header and all data; and a 1-D array (no geometry).
  ASSERT_TRUE(Stream(Chunks(header, Floats(values), 1 << 20), &summary).ok());
  v1::VolumeSummary flat;
  ASSERT_TRUE(Stream(Chunks(Header({24}), Floats(values), 40), &flat).ok());
  EXPECT_EQ(flat.voxel_count(), 24);
  EXPECT_EQ(flat.orientation(), "");
  EXPECT_EQ(flat.affine_size(), 0);
}

TEST_F(VolumeServiceTest, DescribeStreamErrors) {
  const std::vector<float> values(24, 1.0f);
  const std::string bytes = Floats(values);
  const v1::VolumeHeader header = Header({4, 3, 2});
  v1::VolumeSummary summary;

  // Empty stream and first chunk without header.
  EXPECT_EQ(Stream({}, &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::vector<v1::ArrayChunk> chunks = Chunks(header, bytes, 32);
  chunks[0].clear_header();
  grpc::Status status = Stream(chunks, &summary);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("header"));

  // Bad header.
  EXPECT_EQ(Stream(Chunks(Header({4, 0, 2}), bytes, 32), &summary).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Too large for the server (1 MiB limit).
  EXPECT_EQ(Stream(Chunks(Header({1024, 1024, 2}), bytes, 32), &summary).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Out of order.
  chunks = Chunks(header, bytes, 32);
  std::swap(chunks[1], chunks[2]);
  status = Stream(chunks, &summary);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("contiguous"));
  // A gap.
  chunks = Chunks(header, bytes, 32);
  chunks.erase(chunks.begin() + 1);
  EXPECT_EQ(Stream(chunks, &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Overrunning the array.
  chunks = Chunks(header, bytes + std::string(8, 'x'), 32);
  status = Stream(chunks, &summary);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("past the end"));
  // A header on a later chunk.
  chunks = Chunks(header, bytes, 32);
  *chunks[1].mutable_header() = header;
  EXPECT_EQ(Stream(chunks, &summary).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Ending short.
  chunks = Chunks(header, bytes, 32);
  chunks.pop_back();
  status = Stream(chunks, &summary);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(status.error_message(), HasSubstr("ended after 64 of 96 bytes"));
}

}  // namespace
}  // namespace tessera
