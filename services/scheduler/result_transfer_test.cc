// Result files of a worker process reach the scheduler's disk whole, in
// pieces, and nothing half-received is ever published.
#include "services/scheduler/result_transfer.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::scheduler {
namespace {
namespace fs = std::filesystem;

class ResultTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ / "worker" / "job1");
    fs::create_directories(root_ / "scheduler");
  }
  // A file of `bytes` random bytes in the worker's folder, named in `files`.
  std::string AddFile(const std::string& name, size_t bytes) {
    std::mt19937 rng(static_cast<unsigned>(bytes) + 7);
    std::string content(bytes, '\0');
    for (char& c : content) c = static_cast<char>(rng());
    const fs::path path = root_ / "worker" / "job1" / name;
    std::ofstream(path, std::ios::binary) << content;
    v1::ResultFile* f = files_.Add();
    f->set_name(name);
    f->set_path(path.string());
    f->set_bytes(static_cast<int64_t>(bytes));
    return content;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Everything SendResultFiles writes, as the updates a scheduler reads.
  std::vector<v1::ExecuteUpdate> Sent(int64_t chunk_bytes) {
    std::vector<v1::ExecuteUpdate> sent;
    EXPECT_TRUE(SendResultFiles(files_, chunk_bytes, [&](const v1::ExecuteUpdate& u) {
                  sent.push_back(u);
                  return true;
                }).ok());
    return sent;
  }

  fs::path root_;
  google::protobuf::RepeatedPtrField<v1::ResultFile> files_;
};

TEST_F(ResultTransferTest, FilesArriveWholeInPiecesAndArePublishedAtOnce) {
  const std::string big = AddFile("warped.nii.gz", 2500000);  // 3 pieces of 1 MiB
  const std::string empty = AddFile("empty.txt", 0);
  const std::vector<v1::ExecuteUpdate> sent = Sent(kResultChunkBytes);
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[2].file_chunk().offset(), 2 * kResultChunkBytes);
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 2);
    for (const v1::ExecuteUpdate& u : sent) ASSERT_TRUE(receiver.Add(u.file_chunk()).ok());
    EXPECT_FALSE(fs::exists(root_ / "scheduler" / "job1"));  // not before the outcome
    EXPECT_TRUE(fs::exists(root_ / "scheduler" / "job1.attempt-2.tmp"));
    google::protobuf::RepeatedPtrField<v1::ResultFile> named = files_;
    for (v1::ResultFile& f : named) f.clear_path();
    ASSERT_TRUE(receiver.Publish(&named).ok());
    EXPECT_EQ(named[0].path(), (root_ / "scheduler" / "job1" / "warped.nii.gz").string());
  }
  EXPECT_EQ(Read((root_ / "scheduler" / "job1" / "warped.nii.gz").string()), big);
  EXPECT_EQ(Read((root_ / "scheduler" / "job1" / "empty.txt").string()), empty);
  EXPECT_FALSE(fs::exists(root_ / "scheduler" / "job1.attempt-2.tmp"));
  RemoveResultFolder(files_);
  EXPECT_FALSE(fs::exists(root_ / "worker" / "job1"));
}

// A DICOM series: one folder deep, hundreds of files, none held open.
TEST_F(ResultTransferTest, SeriesFilesInOneFolderArriveAndArePublished) {
  fs::create_directories(root_ / "worker" / "job1" / "warped_dicom");
  std::vector<std::string> contents;
  for (int i = 0; i < 300; ++i) contents.push_back(AddFile("warped_dicom/IM" + std::to_string(10000 + i) + ".dcm", 100 + i));
  AddFile("0GenericAffine.mat", 50);
  const std::vector<v1::ExecuteUpdate> sent = Sent(64);
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
    for (const v1::ExecuteUpdate& u : sent) ASSERT_TRUE(receiver.Add(u.file_chunk()).ok());
    google::protobuf::RepeatedPtrField<v1::ResultFile> named = files_;
    for (v1::ResultFile& f : named) f.clear_path();
    ASSERT_TRUE(receiver.Publish(&named).ok());
    EXPECT_EQ(named[0].path(), (root_ / "scheduler" / "job1" / "warped_dicom" / "IM10000.dcm").string());
  }
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(Read((root_ / "scheduler" / "job1" / "warped_dicom" / ("IM" + std::to_string(10000 + i) + ".dcm")).string()),
              contents[i]);
  }
  RemoveResultFolder(files_);  // the job's folder, though the first file lies one deeper
  EXPECT_FALSE(fs::exists(root_ / "worker" / "job1"));
}

TEST_F(ResultTransferTest, AnUnpublishedAttemptLeavesNothing) {
  AddFile("a.bin", 3000);
  const std::vector<v1::ExecuteUpdate> sent = Sent(1000);
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
    ASSERT_TRUE(receiver.Add(sent[0].file_chunk()).ok());
  }  // the stream broke: no outcome
  EXPECT_TRUE(fs::is_empty(root_ / "scheduler"));
}

TEST_F(ResultTransferTest, ShortMissingOrUnexpectedFilesAreDataLoss) {
  AddFile("a.bin", 3000);
  const std::vector<v1::ExecuteUpdate> sent = Sent(1000);
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
    ASSERT_TRUE(receiver.Add(sent[0].file_chunk()).ok());
    ASSERT_TRUE(receiver.Add(sent[1].file_chunk()).ok());
    google::protobuf::RepeatedPtrField<v1::ResultFile> named = files_;
    const absl::Status short_file = receiver.Publish(&named);
    EXPECT_EQ(short_file.code(), absl::StatusCode::kDataLoss) << short_file;
    EXPECT_NE(short_file.message().find("2000 of its 3000 bytes"), std::string::npos) << short_file;
  }
  EXPECT_FALSE(fs::exists(root_ / "scheduler" / "job1"));
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
    google::protobuf::RepeatedPtrField<v1::ResultFile> named = files_;
    EXPECT_EQ(receiver.Publish(&named).code(), absl::StatusCode::kDataLoss);  // never sent
  }
  {
    ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
    for (const v1::ExecuteUpdate& u : sent) ASSERT_TRUE(receiver.Add(u.file_chunk()).ok());
    google::protobuf::RepeatedPtrField<v1::ResultFile> none;
    EXPECT_EQ(receiver.Publish(&none).code(), absl::StatusCode::kDataLoss);  // sent, never named
  }
}

TEST_F(ResultTransferTest, BadNamesAndPiecesOutOfOrderAreRefused) {
  ResultReceiver receiver((root_ / "scheduler").string(), "job1", 1);
  for (const char* name : {"", ".", "..", "../escape", "a/../../escape", "/escape", "a/b/c", "a/", "a//b", "a/..",
                           "bell\a"}) {
    v1::ResultChunk chunk;
    chunk.set_name(name);
    chunk.set_data("x");
    EXPECT_EQ(receiver.Add(chunk).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_FALSE(fs::exists(root_ / "escape"));
  v1::ResultChunk first;
  first.set_name("a.bin");
  first.set_data("abc");
  ASSERT_TRUE(receiver.Add(first).ok());
  v1::ResultChunk gap = first;
  gap.set_offset(10);
  EXPECT_EQ(receiver.Add(gap).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ResultTransferTest, AnUnreadableFileIsDataLossForTheSender) {
  AddFile("a.bin", 10);
  files_[0].set_bytes(11);  // the engine said more than the file holds
  const absl::Status sent = SendResultFiles(files_, 4, [](const v1::ExecuteUpdate&) { return true; });
  EXPECT_EQ(sent.code(), absl::StatusCode::kDataLoss) << sent;
  files_[0].set_path((root_ / "nowhere").string());
  EXPECT_EQ(SendResultFiles(files_, 4, [](const v1::ExecuteUpdate&) { return true; }).code(),
            absl::StatusCode::kDataLoss);
  files_[0].set_path((root_ / "worker" / "job1" / "a.bin").string());
  files_[0].set_bytes(10);
  EXPECT_EQ(SendResultFiles(files_, 4, [](const v1::ExecuteUpdate&) { return false; }).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::scheduler
