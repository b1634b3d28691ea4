// common/log.h: one line per event, prefixed with the program's name, and
// whole lines from concurrent threads.
#include "common/log.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(Log, LinesArePrefixedWithTheProgramsName) {
  ::testing::internal::CaptureStderr();
  LogLine("listening");
  Logf("job %s: %d workers", "job-1", 4);
  LogError(absl::InternalError("disk full"), "storing job job-1");
  LogError(absl::OkStatus(), "nothing to say");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, std::string("common_tests: listening\n"
                             "common_tests: job job-1: 4 workers\n"
                             "common_tests: storing job job-1: INTERNAL: disk full\n"));
}

TEST(Log, ConcurrentLinesStayWhole) {
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (char c : {'a', 'b', 'c', 'd'}) {
    threads.emplace_back([c] {
      for (int i = 0; i < 200; ++i) LogLine(std::string(300, c));
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::vector<std::string> lines = absl::StrSplit(err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 800u);
  for (const std::string& line : lines) {
    ASSERT_EQ(line.size(), std::string("common_tests: ").size() + 300) << line;
    const char c = line.back();
    EXPECT_EQ(line, "common_tests: " + std::string(300, c));
  }
}

}  // namespace
}  // namespace zbpp
