#include "common/png_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Image8 RandomImage(int width, int height, int channels, uint32_t seed) {
  std::mt19937 rng(seed);
  Image8 image = Image8::Make(width, height, channels);
  for (uint8_t& p : image.pixels) p = static_cast<uint8_t>(rng());
  return image;
}

void ExpectMentions(const absl::Status& s, absl::StatusCode code, const std::string& path) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(path), absl::string_view::npos) << s;
}

TEST(PngIoTest, GrayRoundTrip) {
  const Image8 image = RandomImage(37, 23, 1, 1);
  const std::string path = TmpPath("gray.png");
  ASSERT_TRUE(WritePng(image, path).ok());
  EXPECT_EQ(ReadBytes(path).substr(1, 3), "PNG");
  absl::StatusOr<Image8> back = ReadPng(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 37);
  EXPECT_EQ(back->height, 23);
  EXPECT_EQ(back->channels, 1);
  EXPECT_EQ(back->pixels, image.pixels);
}

TEST(PngIoTest, RgbRoundTrip) {
  const Image8 image = RandomImage(19, 31, 3, 2);
  const std::string path = TmpPath("rgb.png");
  ASSERT_TRUE(WritePng(image, path).ok());
  absl::StatusOr<Image8> back = ReadPng(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 19);
  EXPECT_EQ(back->height, 31);
  EXPECT_EQ(back->channels, 3);
  EXPECT_EQ(back->pixels, image.pixels);
  EXPECT_EQ(back->at(4, 7, 2), image.at(4, 7, 2));
}

TEST(PngIoTest, InMemoryBytesAreAPngFileOfTheImage) {
  const Image8 image = RandomImage(29, 17, 3, 5);
  absl::StatusOr<std::string> bytes = EncodePngBytes(image);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->substr(1, 3), "PNG");
  const std::string path = TmpPath("memory.png");
  WriteBytes(path, *bytes);
  absl::StatusOr<Image8> back = ReadPng(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->channels, 3);
  EXPECT_EQ(back->pixels, image.pixels);
  EXPECT_EQ(EncodePngBytes(Image8::Make(0, 4, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePngBytes(Image8::Make(4, 4, 2)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PngIoTest, Gray16RoundTrip) {
  std::mt19937 rng(3);
  Image16 image;
  image.width = 21;
  image.height = 17;
  for (int i = 0; i < image.width * image.height; ++i) image.pixels.push_back(static_cast<uint16_t>(rng()));
  const std::string path = TmpPath("gray16.png");
  ASSERT_TRUE(WritePng16(image, path).ok());
  absl::StatusOr<Image16> back = ReadPng16(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 21);
  EXPECT_EQ(back->height, 17);
  EXPECT_EQ(back->pixels, image.pixels);

  // Read as 8-bit: the top byte of each sample.
  absl::StatusOr<Image8> narrow = ReadPng(path);
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  ASSERT_EQ(narrow->pixels.size(), image.pixels.size());
  for (size_t i = 0; i < image.pixels.size(); ++i) EXPECT_EQ(narrow->pixels[i], image.pixels[i] >> 8) << i;
}

TEST(PngIoTest, EightBitGrayWidensTo16) {
  const Image8 image = RandomImage(5, 4, 1, 4);
  const std::string path = TmpPath("widen.png");
  ASSERT_TRUE(WritePng(image, path).ok());
  absl::StatusOr<Image16> wide = ReadPng16(path);
  ASSERT_TRUE(wide.ok()) << wide.status();
  for (size_t i = 0; i < image.pixels.size(); ++i) EXPECT_EQ(wide->pixels[i], image.pixels[i] * 257);
  const std::string rgb = TmpPath("rgb_for16.png");
  ASSERT_TRUE(WritePng(RandomImage(3, 3, 3, 5), rgb).ok());
  ExpectMentions(ReadPng16(rgb).status(), absl::StatusCode::kInvalidArgument, rgb);
}

TEST(PngIoTest, WriteErrors) {
  const std::string bad_dir = TmpPath("no/such/dir/x.png");
  ExpectMentions(WritePng(RandomImage(4, 4, 1, 6), bad_dir), absl::StatusCode::kNotFound, bad_dir);
  const std::string path = TmpPath("bad.png");
  Image8 wrong = RandomImage(4, 4, 1, 7);
  wrong.pixels.pop_back();
  ExpectMentions(WritePng(wrong, path), absl::StatusCode::kInvalidArgument, path);
  ExpectMentions(WritePng(RandomImage(4, 4, 2, 8), path), absl::StatusCode::kInvalidArgument, path);
  ExpectMentions(WritePng(Image8{}, path), absl::StatusCode::kInvalidArgument, path);
  Image16 wrong16;
  wrong16.width = 3;
  wrong16.height = 3;
  wrong16.pixels.resize(8);
  ExpectMentions(WritePng16(wrong16, path), absl::StatusCode::kInvalidArgument, path);
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

TEST(PngIoTest, ReadErrors) {
  const std::string missing = TmpPath("missing.png");
  ExpectMentions(ReadPng(missing).status(), absl::StatusCode::kNotFound, missing);

  const std::string text = TmpPath("text.png");
  WriteBytes(text, "this is not a png file at all");
  ExpectMentions(ReadPng(text).status(), absl::StatusCode::kInvalidArgument, text);

  const std::string good = TmpPath("good.png");
  ASSERT_TRUE(WritePng(RandomImage(64, 64, 3, 9), good).ok());
  const std::string bytes = ReadBytes(good);

  const std::string truncated = TmpPath("truncated.png");
  WriteBytes(truncated, bytes.substr(0, bytes.size() / 2));
  ExpectMentions(ReadPng(truncated).status(), absl::StatusCode::kDataLoss, truncated);

  const std::string header_only = TmpPath("header_only.png");
  WriteBytes(header_only, bytes.substr(0, 20));
  ExpectMentions(ReadPng(header_only).status(), absl::StatusCode::kDataLoss, header_only);

  std::string corrupt = bytes;
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 32; ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
  const std::string corrupt_path = TmpPath("corrupt.png");
  WriteBytes(corrupt_path, corrupt);
  ExpectMentions(ReadPng(corrupt_path).status(), absl::StatusCode::kDataLoss, corrupt_path);
}

}  // namespace
}  // namespace tessera
