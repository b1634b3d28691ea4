#include "tests/worker/data/test_files.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zbpp::worker::testing {
namespace {

std::string ProcessDirectory() {
  return absl::StrCat(::testing::TempDir(), "zbpp_worker_data_tests-",
                      ::getpid());
}

}  // namespace

TestDirectory::TestDirectory() {
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  path_ = absl::StrCat(ProcessDirectory(), "/", test->test_suite_name(), ".",
                       test->name());
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TestDirectory::~TestDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  std::filesystem::remove(ProcessDirectory(), ignored);  // only when empty
}

std::string TestDirectory::operator/(const std::string& name) const {
  return absl::StrCat(path_, "/", name);
}

FileSizeLimit::FileSizeLimit(rlim_t bytes) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &previous_action_);
  getrlimit(RLIMIT_FSIZE, &previous_limit_);
  rlimit limit = previous_limit_;
  limit.rlim_cur = bytes;
  setrlimit(RLIMIT_FSIZE, &limit);
}

FileSizeLimit::~FileSizeLimit() {
  setrlimit(RLIMIT_FSIZE, &previous_limit_);
  sigaction(SIGXFSZ, &previous_action_, nullptr);
}

std::vector<std::string> ListDirectory(const std::string& directory) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(directory, error)) {
    names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

}  // namespace zbpp::worker::testing
