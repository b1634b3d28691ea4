#include "common/channel_credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

using ::testing::HasSubstr;

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// Two self-signed certificates with their keys, made with the openssl CLI
// once for the suite.
class ChannelCredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = absl::StrCat(::testing::TempDir(), "/channel_credentials_",
                        getpid());
    mkdir(dir_.c_str(), 0700);
    for (const char* name : {"a", "b"}) {
      const std::string command = absl::StrCat(
          "/usr/bin/openssl req -x509 -newkey ec -pkeyopt "
          "ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=zbpp-test-",
          name, " -keyout ", dir_, "/", name, ".key -out ", dir_, "/", name,
          ".crt 2>/dev/null");
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    WriteFile(Path("garbage.pem"), "not a certificate\n");
  }
  static std::string Path(const std::string& name) {
    return absl::StrCat(dir_, "/", name);
  }
  static std::string dir_;
};
std::string ChannelCredentialsTest::dir_;

TEST_F(ChannelCredentialsTest, GoodFilesGiveTlsCredentials) {
  EXPECT_TRUE(ReadPemFile("--tls-ca", Path("a.crt"), PemKind::kCertificate).ok());
  absl::StatusOr<PemKeyCertPair> pair =
      ReadKeyCertPair("--tls-cert", Path("a.crt"), "--tls-key", Path("a.key"));
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_THAT(pair->cert, HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(pair->key, HasSubstr("PRIVATE KEY-----"));
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials({Path("b.crt"), Path("a.crt"), Path("a.key")});
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_NE(*credentials, nullptr);
}

TEST_F(ChannelCredentialsTest, MissingFileNamesTheFlagThePathAndTheReason) {
  const std::string missing = Path("no-such.pem");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials({missing, "", ""});
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(credentials.status().message(),
            absl::StrCat("--tls-ca: cannot read ", missing,
                         ": No such file or directory"));
}

// gRPC takes any bytes as a CA and then fails every call with "empty
// address list", naming no file.
TEST_F(ChannelCredentialsTest, FileThatIsNotPemNamesItsFlag) {
  const std::string garbage = Path("garbage.pem");
  struct Case {
    ClientTlsFiles files;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{garbage, "", ""},
            "--tls-ca: " + garbage + " holds no PEM certificate"},
           {{Path("a.crt"), garbage, Path("a.key")},
            "--tls-cert: " + garbage + " holds no PEM certificate"},
           // A certificate is not a key.
           {{Path("a.crt"), Path("a.crt"), Path("a.crt")},
            "--tls-key: " + Path("a.crt") + " holds no unencrypted PEM "
            "private key"},
           // Nor a key a CA.
           {{Path("a.key"), "", ""},
            "--tls-ca: " + Path("a.key") + " holds no PEM certificate"}}) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials(c.files);
    ASSERT_FALSE(credentials.ok()) << c.message;
    EXPECT_EQ(credentials.status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(credentials.status().message()),
                HasSubstr(c.message));
  }
}

TEST_F(ChannelCredentialsTest, KeyOfAnotherCertificateNamesBothFlags) {
  absl::StatusOr<PemKeyCertPair> pair =
      ReadKeyCertPair("--tls-cert", Path("a.crt"), "--tls-key", Path("b.key"));
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pair.status().message(),
            absl::StrCat("--tls-key ", Path("b.key"), " is not the key of ",
                         "--tls-cert ", Path("a.crt")));
}

TEST_F(ChannelCredentialsTest, FlagCombinationsAreUsageErrors) {
  EXPECT_EQ(ClientCredentials({"", Path("a.crt"), Path("a.key")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClientCredentials({Path("b.crt"), Path("a.crt"), ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp
