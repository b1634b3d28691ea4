#ifndef ZBPP_TESTS_WORKER_DATA_TEST_FILES_H_
#define ZBPP_TESTS_WORKER_DATA_TEST_FILES_H_

#include <sys/resource.h>

#include <csignal>
#include <string>
#include <vector>

namespace zbpp::worker::testing {

/// A fresh directory for the running test,
/// `<gtest TempDir>/zbpp_worker_data_tests-<pid>/<suite>.<test>`, removed
/// with its contents (and the per-process parent, once empty) on
/// destruction.
class TestDirectory {
 public:
  TestDirectory();
  ~TestDirectory();
  TestDirectory(const TestDirectory&) = delete;
  TestDirectory& operator=(const TestDirectory&) = delete;

  const std::string& path() const { return path_; }
  /// `path() + "/" + name`.
  std::string operator/(const std::string& name) const;

 private:
  std::string path_;
};

/// While alive, files this process writes may not grow past `bytes`: a write
/// beyond fails with EFBIG (SIGXFSZ is ignored meanwhile). Simulates a disk
/// filling up in the middle of a write.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_limit_;
  struct sigaction previous_action_;
};

/// The names in `directory`, sorted; empty when it does not exist.
std::vector<std::string> ListDirectory(const std::string& directory);

/// Writes `contents` to `path` (test setup; aborts the test on failure).
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace zbpp::worker::testing

#endif  // ZBPP_TESTS_WORKER_DATA_TEST_FILES_H_
