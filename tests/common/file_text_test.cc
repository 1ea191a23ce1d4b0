// The small files flags name (certificates, keys, token lists) are read bounded, and only
// from a regular file.
#include "common/file_text.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

TEST(ReadFileTextTest, ReadsAFileWholeAndRefusesWhatIsNotOneOrTooLarge) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("cert.pem");
  std::ofstream(path, std::ios::binary) << std::string(70000, 'c');
  absl::StatusOr<std::string> text = ReadFileText(path, "--tls-cert");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string(70000, 'c'));

  const absl::Status large = ReadFileText(path, "--tls-cert", 65536).status();
  EXPECT_EQ(large.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(large.message()), HasSubstr("larger than 65536 bytes"));
  // /dev/zero never ends, and a FIFO blocks until a writer comes: neither is read.
  EXPECT_THAT(std::string(ReadFileText("/dev/zero", "--auth-tokens").status().message()),
              HasSubstr("--auth-tokens /dev/zero: not a regular file"));
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadFileText(dir.Sub("fifo"), "--tls-key").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileText(dir.Sub("missing"), "--tls-key").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grail
