// How model files from outside are read (model/core/archive_probe.h): bounded before a byte
// is read, held once, and stopped as soon as the load's caller has gone.
#include "model/core/archive_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// A file of `size` bytes, every one of them `fill`.
std::string WriteFile(const ScopedTempDir& dir, const std::string& name, size_t size, char fill) {
  const std::string path = dir.Sub(name);
  std::ofstream(path, std::ios::binary) << std::string(size, fill);
  return path;
}

class ReadModelFileTest : public ::testing::Test {
 protected:
  void TearDown() override { SetArchiveLoadLimits(ArchiveLoadLimits()); }
  ScopedTempDir dir_;
};

TEST_F(ReadModelFileTest, TheBytesAreHeldOnceInAnAnonymousFileAChildCanMap) {
  const std::string path = WriteFile(dir_, "model.pt", 10 << 20, 'x');
  absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->view(), std::string(10 << 20, 'x'));
  struct stat info;
  ASSERT_EQ(fstat(bytes->fd(), &info), 0);
  EXPECT_EQ(info.st_size, 10 << 20);  // what a probe child maps
  ModelBytes moved = *std::move(bytes);
  EXPECT_EQ(moved.view().size(), size_t{10} << 20);

  absl::StatusOr<ModelBytes> empty = ReadModelFile(WriteFile(dir_, "empty.pt", 0, 'x'));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->view().empty());
}

TEST_F(ReadModelFileTest, AFileOverTheLimitIsRefusedBeforeItIsRead) {
  ArchiveLoadLimits limits;
  limits.max_bytes = 4096;
  SetArchiveLoadLimits(limits);
  // Sparse: 12 GB on no disk, as `truncate -s 12G` makes it.
  const std::string path = dir_.Sub("huge.pth");
  ASSERT_EQ(truncate(WriteFile(dir_, "huge.pth", 0, 'x').c_str(), int64_t{12} << 30), 0);
  const absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bytes.status().message()),
              HasSubstr("is 12884901888 bytes; the limit is 4096 (--max-model-bytes)"));
  EXPECT_TRUE(ReadModelFile(WriteFile(dir_, "small.pt", 4096, 'x')).ok());
}

// The read looks at its caller after every step: one whose caller has gone stops after the
// first step, not after the whole file (2 GB read on 2.4 s past a 1 s deadline).
TEST_F(ReadModelFileTest, AReadWhoseCallerHasGoneStopsAfterItsFirstStep) {
  const std::string path = WriteFile(dir_, "model.pt", 32 << 20, 'x');
  int asked = 0;
  const ArchiveLoadScope scope([&] { return ++asked < 2; });
  const absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(bytes.status().message()),
              HasSubstr("stopped after 8388608 of 33554432 bytes"));
  EXPECT_EQ(asked, 2);
}

TEST_F(ReadModelFileTest, WhatIsNotARegularFileIsRefusedByWhatItIs) {
  ASSERT_EQ(mkfifo(dir_.Sub("fifo").c_str(), 0600), 0);
  EXPECT_THAT(std::string(ReadModelFile(dir_.Sub("fifo")).status().message()),
              HasSubstr("is not a regular file (a FIFO)"));
  EXPECT_THAT(std::string(ReadModelFile("/dev/zero").status().message()), HasSubstr("(a device)"));
  EXPECT_EQ(ReadModelFile(dir_.Sub("missing")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grail
