// common/read_file.h: whole-file reads and their errors.

#include "common/read_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(ReadFile, ReturnsTheBytesAsTheyAre) {
  const std::string path = TempDir() + "/zbpp_read_file_test." + std::to_string(::getpid());
  // A NUL, a CR LF and more than one read buffer (64 KiB).
  const std::string bytes = std::string("a\0b\r\n", 5) + std::string(200000, 'x');
  std::ofstream(path, std::ios::binary) << bytes;
  absl::StatusOr<std::string> read = ReadFileToString(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST(ReadFile, AMissingFileIsNotFoundNamingWhat) {
  absl::StatusOr<std::string> read = ReadFileToString("/nonexistent/x");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()),
              StartsWith("cannot read /nonexistent/x: "));
  read = ReadFileToString("/nonexistent/x", "token file /nonexistent/x");
  EXPECT_THAT(std::string(read.status().message()),
              StartsWith("cannot read token file /nonexistent/x: "));
}

TEST(ReadFile, ADirectoryIsAnError) {
  absl::StatusOr<std::string> read = ReadFileToString(TempDir());
  EXPECT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("cannot read "));
}

}  // namespace
}  // namespace zbpp
