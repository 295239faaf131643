// ChunkAssembler, VolumeHeaderOf, VolumeStore limits and expiry,
// ResolveOutputDirUnderRoots.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/common/volume_store.h"

namespace tessera {
namespace {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

v1::ArrayChunk Chunk(int64_t offset, const std::string& data) {
  v1::ArrayChunk chunk;
  chunk.set_offset(offset);
  chunk.set_data(data);
  return chunk;
}

TEST(ChunkAssemblerTest, ReassemblesAndChecks) {
  Volume volume;
  volume.data = NDArray::Allocate({2, 3, 2}, DType::kInt16).value();
  for (int i = 0; i < 12; ++i) volume.data.data<int16_t>()[i] = static_cast<int16_t>(i * 100 - 300);
  volume.geometry.spacing = {1, 2, 3};
  const v1::VolumeHeader header = VolumeHeaderOf(volume.data, &volume.geometry, "x");
  EXPECT_EQ(header.dims_size(), 3);
  EXPECT_EQ(header.dtype(), v1::DTYPE_INT16);
  EXPECT_EQ(header.spacing(2), 3);
  EXPECT_EQ(header.direction_size(), 9);

  const std::string bytes(static_cast<const char*>(volume.data.raw_data()), volume.data.nbytes());
  ChunkAssembler assembler(1 << 20);
  v1::ArrayChunk first = Chunk(0, bytes.substr(0, 5));
  *first.mutable_header() = header;
  int checked = 0;
  ASSERT_TRUE(assembler.Add(first, [&](const ArrayHeader& h) {
                         ++checked;
                         EXPECT_EQ(h.nbytes, 24);
                         return absl::OkStatus();
                       }).ok());
  EXPECT_EQ(checked, 1);
  EXPECT_EQ(assembler.Add(Chunk(4, "x")).code(), absl::StatusCode::kInvalidArgument);  // not contiguous
  ASSERT_TRUE(assembler.Add(Chunk(5, bytes.substr(5, 10))).ok());
  EXPECT_EQ(assembler.Finish().status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(assembler.Add(Chunk(15, bytes.substr(15))).ok());
  EXPECT_EQ(assembler.Add(Chunk(24, "z")).code(), absl::StatusCode::kInvalidArgument);  // past the end
  absl::StatusOr<NDArray> array = assembler.Finish();
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(std::memcmp(array->raw_data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(assembler.header().geometry.spacing[1], 2);

  ChunkAssembler refused(1 << 20);
  EXPECT_EQ(refused.Add(first, [](const ArrayHeader&) { return absl::ResourceExhaustedError("full"); }).code(),
            absl::StatusCode::kResourceExhausted);
  ChunkAssembler small(10);
  EXPECT_EQ(small.Add(first).code(), absl::StatusCode::kResourceExhausted);
  ChunkAssembler headerless(1 << 20);
  EXPECT_EQ(headerless.Add(Chunk(0, "")).code(), absl::StatusCode::kInvalidArgument);
}

Volume Floats(int n) {
  Volume v;
  v.data = NDArray::Allocate({n}, DType::kFloat32).value();
  return v;
}

TEST(VolumeStoreTest, BoundsBytesAndExpires) {
  VolumeStore store({/*max_total_bytes=*/100, /*ttl=*/absl::Seconds(60), /*max_entries=*/3});
  auto r1 = store.Reserve(40);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(store.Reserve(70).status().code(), absl::StatusCode::kResourceExhausted);
  auto e1 = store.Commit(*std::move(r1), Floats(10));
  ASSERT_TRUE(e1.ok()) << e1.status();
  EXPECT_EQ(store.used_bytes(), 40);
  {
    auto r2 = store.Reserve(60);
    ASSERT_TRUE(r2.ok());
    EXPECT_EQ(store.used_bytes(), 100);
  }  // released unused
  EXPECT_EQ(store.used_bytes(), 40);
  auto r3 = store.Reserve(8);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(store.Commit(*std::move(r3), Floats(10)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.used_bytes(), 40);

  absl::StatusOr<Volume> got = store.Get(e1->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->data.num_elements(), 10);
  EXPECT_EQ(store.Get("up-unknown").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store.Remove(e1->id));
  EXPECT_EQ(store.used_bytes(), 0);

  VolumeStore expiring({100, absl::Milliseconds(20), 3});
  auto e = expiring.Commit(expiring.Reserve(4).value(), Floats(1)).value();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_EQ(expiring.Get(e.id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(expiring.used_bytes(), 0);

  VolumeStore few({1000, absl::Seconds(60), 2});
  ASSERT_TRUE(few.Commit(few.Reserve(4).value(), Floats(1)).ok());
  auto held = few.Reserve(4);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(few.Reserve(4).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(DataRootsTest, OutputDirectories) {
  const std::string root = TmpDir() + "/roots";
  mkdir(root.c_str(), 0755);
  mkdir((root + "/exists").c_str(), 0755);
  auto roots = CanonicalDataRoots({root});
  ASSERT_TRUE(roots.ok()) << roots.status();
  const std::string real = (*roots)[0];

  auto dir = ResolveOutputDirUnderRoots("exists", *roots);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, real + "/exists");
  dir = ResolveOutputDirUnderRoots(root + "/new", *roots);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, real + "/new");
  EXPECT_EQ(ResolveOutputDirUnderRoots("a/b/c", *roots).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ResolveOutputDirUnderRoots("../escape", *roots).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveOutputDirUnderRoots("/etc", *roots).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveOutputDirUnderRoots("x", {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ResolveOutputDirUnderRoots("", *roots).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CanonicalDataRoots({root + "/missing"}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
