// common/call_auth.h: the bearer token file every daemon and zbppctl read,
// and the tokens it refuses (too weak, the old Kubernetes placeholder).

#include "common/call_auth.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A token file holding `contents`, removed with the object.
class TokenFile {
 public:
  explicit TokenFile(const std::string& contents) {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/zbpp_call_auth_test." +
            std::to_string(::getpid()) + "." + std::to_string(count_++);
    std::ofstream(path_) << contents;
  }
  ~TokenFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int count_ = 0;
  std::string path_;
};

TEST(TokenEntropy, LengthTimesTheAlphabetOfTheClassesPresent) {
  EXPECT_EQ(TokenEntropyBits(""), 0);
  EXPECT_EQ(TokenEntropyBits("aaaa"), 4 * std::log2(26));
  EXPECT_NEAR(TokenEntropyBits(std::string(32, 'f') + "0"), 33 * std::log2(36), 1e-9);
  EXPECT_NEAR(TokenEntropyBits("aZ9-"), 4 * std::log2(26 + 26 + 10 + 33), 1e-9);
}

// Before: a 1-byte token and the Kubernetes base's placeholder were taken
// without a word. Every reader of a token (coordinator, worker, zbppctl)
// goes through ReadTokenFile.
TEST(ReadTokenFile, RefusesWeakTokensAndThePlaceholderWithoutPrintingThem) {
  for (const std::string weak : {"x", "s3cret", "correcthorsebatterystaple", "0123456789abcdef"}) {
    SCOPED_TRACE(weak);
    const TokenFile file(weak + "\n");
    const absl::StatusOr<std::string> token = ReadTokenFile(file.path());
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(token.status().message()),
                HasSubstr("token file " + file.path() + ": the token is too weak"));
    EXPECT_THAT(std::string(token.status().message()), HasSubstr("at least 128 needed"));
    EXPECT_THAT(std::string(token.status().message()), HasSubstr("openssl rand -hex 32"));
    EXPECT_THAT(std::string(token.status().message()), Not(HasSubstr(": " + weak)));
  }
  const TokenFile placeholder(std::string(kPlaceholderToken) + "\n");
  const absl::StatusOr<std::string> token = ReadTokenFile(placeholder.path());
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(token.status().message()),
              HasSubstr("holds the placeholder token of the Kubernetes example"));
}

TEST(ReadTokenFile, AcceptsARandomTokenWithoutItsWhitespace) {
  // openssl rand -hex 16: 32 hex digits, about 165 bits by the estimate.
  const std::string strong = "5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90";
  const TokenFile file("  " + strong + "\n");
  const absl::StatusOr<std::string> token = ReadTokenFile(file.path());
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, strong);
  EXPECT_EQ(ReadTokenFile(TokenFile(" \n").path()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp
