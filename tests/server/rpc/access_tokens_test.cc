#include "server/rpc/access_tokens.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kRead = "r-0123456789abcdefghij";
const std::string kWrite = "w-0123456789abcdefghij";
const std::string kAdmin = "a-0123456789abcdefghij";

TEST(TokenFileTest, ParsesScopesNamesCommentsAndBlankLines) {
  absl::StatusOr<std::vector<TokenEntry>> entries =
      ParseTokenFile("# comment\n\n" + kRead + " read reader\n\t" + kWrite + "\twrite  writer \n" +
                     kAdmin + " admin\n");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "reader");
  EXPECT_EQ((*entries)[0].scope, Scope::kRead);
  EXPECT_EQ((*entries)[1].name, "writer");
  EXPECT_EQ((*entries)[1].scope, Scope::kWrite);
  EXPECT_EQ((*entries)[2].scope, Scope::kAdmin);
  // Unnamed: a prefix of the digest, stable and not the secret.
  EXPECT_THAT((*entries)[2].name, StartsWith("sha256-"));
  EXPECT_EQ((*entries)[2].name.size(), 7u + 12u);
  EXPECT_EQ((*entries)[2].digest, DigestToken(kAdmin));
}

TEST(TokenFileTest, ErrorsNameTheLineAndNeverTheToken) {
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {kRead + "\n", "line 1: expected 'TOKEN SCOPE [NAME]', got 1"},
      {"# x\n" + kRead + " root\n", "line 2: unknown scope 'root'"},
      {"short read\n", "line 1: a token is 16 to 4096"},
      {kRead + " read bad/name\n", "line 1: a name is 1 to 64"},
      {kRead + " read a\n" + kRead + " write b\n", "line 2: the same token appears twice"},
      {kRead + " read a\n" + kWrite + " write a\n", "line 2: the name 'a' appears twice"},
      {kRead + " read a extra\n", "got 4 field(s)"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(c.text);
    ASSERT_FALSE(entries.ok()) << c.text;
    EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(entries.status().message(), HasSubstr(c.error));
    EXPECT_THAT(entries.status().message(), Not(HasSubstr(kRead)));
  }
}

class AccessTokensTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) {
    std::ofstream(dir_.Sub("tokens.tmp"), std::ios::trunc) << text;
    std::filesystem::rename(dir_.Sub("tokens.tmp"), path());
  }
  std::string path() const { return dir_.Sub("tokens"); }
  ScopedTempDir dir_;
};

TEST_F(AccessTokensTest, ScopesAreOrderedReadWriteAdmin) {
  Write(kRead + " read reader\n" + kWrite + " write writer\n" + kAdmin + " admin root\n");
  absl::StatusOr<std::unique_ptr<AccessTokens>> tokens = AccessTokens::Open(path());
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::string tokens_by_scope[] = {kRead, kWrite, kAdmin};
  const std::string names[] = {"reader", "writer", "root"};
  for (int held = 0; held < 3; ++held) {
    for (int needed = 0; needed < 3; ++needed) {
      const AccessDecision decision =
          (*tokens)->Check("Bearer " + tokens_by_scope[held], static_cast<Scope>(needed));
      if (held >= needed) {
        EXPECT_TRUE(decision.status.ok()) << held << " " << needed;
        EXPECT_EQ(decision.outcome, "ok");
      } else {
        EXPECT_EQ(decision.status.code(), absl::StatusCode::kPermissionDenied);
        EXPECT_EQ(decision.outcome, "insufficient_scope");
      }
      EXPECT_EQ(decision.token_name, names[held]);
    }
  }
}

TEST_F(AccessTokensTest, MissingMalformedAndUnknownTokensAreUnauthenticated) {
  Write(kRead + " read reader\n");
  absl::StatusOr<std::unique_ptr<AccessTokens>> tokens = AccessTokens::Open(path());
  ASSERT_TRUE(tokens.ok());
  const AccessDecision missing = (*tokens)->Check(std::nullopt, Scope::kRead);
  EXPECT_EQ(missing.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(missing.outcome, "missing");
  for (const std::string header : {std::string("Basic ") + kRead, kRead, std::string("Bearer ")}) {
    const AccessDecision malformed = (*tokens)->Check(header, Scope::kRead);
    EXPECT_EQ(malformed.status.code(), absl::StatusCode::kUnauthenticated) << header;
    EXPECT_EQ(malformed.outcome, "malformed") << header;
  }
  const AccessDecision unknown = (*tokens)->Check("Bearer " + kRead + "x", Scope::kRead);
  EXPECT_EQ(unknown.status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(unknown.outcome, "unknown");
  EXPECT_TRUE(unknown.token_name.empty());
  // The scheme is case-insensitive (RFC 7235).
  EXPECT_TRUE((*tokens)->Check("bearer " + kRead, Scope::kRead).status.ok());
}

TEST_F(AccessTokensTest, ReloadPicksUpChangesAndKeepsTheOldTableOnErrors) {
  Write(kRead + " read reader\n");
  absl::StatusOr<std::unique_ptr<AccessTokens>> opened = AccessTokens::Open(path());
  ASSERT_TRUE(opened.ok());
  AccessTokens& tokens = **opened;
  absl::StatusOr<bool> unchanged = tokens.Reload(false);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(*unchanged);

  Write(kWrite + " write writer\n");  // a new inode: seen as changed
  absl::StatusOr<bool> changed = tokens.Reload(false);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_THAT(tokens.names(), ElementsAre("writer"));
  EXPECT_EQ(tokens.Check("Bearer " + kRead, Scope::kRead).outcome, "unknown");

  Write(kRead + " sudo\n");
  absl::StatusOr<bool> broken = tokens.Reload(false);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(broken.status().message(), HasSubstr("line 1"));
  EXPECT_THAT(tokens.names(), ElementsAre("writer"));

  Write("# nobody\n");
  EXPECT_EQ(tokens.Reload(true).status().code(), absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove(path());
  EXPECT_EQ(tokens.Reload(true).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(tokens.Check("Bearer " + kWrite, Scope::kWrite).status.ok());
}

TEST_F(AccessTokensTest, OpenRefusesAFileWithoutTokens) {
  Write("# empty\n");
  EXPECT_EQ(AccessTokens::Open(path()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(AccessTokens::Open(dir_.Sub("absent")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grail
