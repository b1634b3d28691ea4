// Dataset paths a careless or hostile job spec may name: FIFOs, devices,
// files outside the worker's data roots, links leading out of them.

#include "worker/data/dataset_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "worker/data/corpus.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TestDirectory;
using testing::WriteFile;

CorpusOptions Options(const DataRoots& roots = {}) {
  CorpusOptions options;
  options.seq_len = 16;
  options.vocab = 256;
  options.roots = roots;
  return options;
}

v1::DatasetSpec TextFile(const std::string& path) {
  v1::DatasetSpec spec;
  spec.set_text_file(path);
  return spec;
}

v1::DatasetSpec Tokens(const std::string& path) {
  v1::DatasetSpec spec;
  spec.mutable_tokens()->set_path(path);
  return spec;
}

DataRoots RootsOf(const std::string& directory) {
  absl::StatusOr<DataRoots> roots = ResolveDataRoots({directory}, "--data-root");
  EXPECT_TRUE(roots.ok()) << roots.status();
  return roots.ok() ? *roots : DataRoots{};
}

// Opening a FIFO without O_NONBLOCK waits for a writer forever; the load
// must come back at once with the field named, for text and token files.
TEST(DatasetFileTest, FifoIsRefusedWithoutBlocking) {
  TestDirectory dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const v1::DatasetSpec& spec : {TextFile(fifo), Tokens(fifo)}) {
    const absl::Status status = LoadCorpus(spec, Options()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("is a FIFO; only regular files"));
    EXPECT_THAT(std::string(status.message()), HasSubstr(fifo));
  }
}

// /dev/zero and /dev/urandom never end: they are not read at all.
TEST(DatasetFileTest, EndlessDevicesAreRefused) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    const absl::Status status = LoadCorpus(TextFile(device), Options()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message(), absl::StrCat("dataset.text_file \"", device,
                                             "\" is a character device; only regular "
                                             "files are read"));
  }
  const absl::Status directory = LoadCorpus(Tokens("/tmp"), Options()).status();
  EXPECT_THAT(std::string(directory.message()), HasSubstr("is a directory"));
}

TEST(DatasetFileTest, SizeIsBounded) {
  TestDirectory dir;
  WriteFile(dir / "big.txt", std::string(4096, 'x'));
  const absl::StatusOr<std::string> read =
      ReadDatasetFile(dir / "big.txt", "dataset.text_file", {}, 4095);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr("holds 4096 bytes, more than the limit of 4095"));
  EXPECT_TRUE(ReadDatasetFile(dir / "big.txt", "dataset.text_file", {}, 4096).ok());
}

// Outside the roots, a file that exists, one that does not and one the
// worker may not read all give the same answer: nothing about them leaks.
TEST(DatasetFileTest, OutsideTheRootsNothingIsOpenedOrDisclosed) {
  TestDirectory dir;
  std::filesystem::create_directories(dir / "data");
  std::filesystem::create_directories(dir / "private");
  WriteFile(dir / "private/secret.txt", std::string(12345, 's'));
  WriteFile(dir / "data/corpus.txt", std::string(3000, 'c'));
  const DataRoots roots = RootsOf(dir / "data");

  std::string first_message;
  for (const std::string& path :
       {dir / "private/secret.txt", dir / "private/missing.txt", std::string("/etc/shadow"),
        dir / "data/../private/secret.txt"}) {
    const absl::Status status = LoadCorpus(TextFile(path), Options(roots)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_EQ(status.message(), absl::StrCat("dataset.text_file \"", path,
                                             "\": outside the worker's data roots "
                                             "(--data-root)"));
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("12345")));
  }
  // A link inside the roots that leads out is refused the same way.
  std::filesystem::create_symlink(dir / "private/secret.txt", dir / "data/link.txt");
  const absl::Status link = LoadCorpus(TextFile(dir / "data/link.txt"), Options(roots)).status();
  EXPECT_EQ(link.code(), absl::StatusCode::kPermissionDenied) << link;
  EXPECT_THAT(std::string(link.message()), HasSubstr("outside the worker's data roots"));

  // Inside: read, and a missing file is NotFound.
  EXPECT_TRUE(LoadCorpus(TextFile(dir / "data/corpus.txt"), Options(roots)).ok());
  EXPECT_EQ(LoadCorpus(TextFile(dir / "data/none.txt"), Options(roots)).status().code(),
            absl::StatusCode::kNotFound);
  // The same file without roots: the worker is unconfined.
  EXPECT_TRUE(LoadCorpus(TextFile(dir / "private/secret.txt"), Options()).ok());
}

TEST(DatasetFileTest, RootsMustBeAbsoluteDirectories) {
  TestDirectory dir;
  WriteFile(dir / "file", "x");
  EXPECT_EQ(ResolveDataRoots({"relative/dir"}, "--data-root").status().message(),
            "--data-root: must be an absolute path, got \"relative/dir\"");
  EXPECT_THAT(std::string(ResolveDataRoots({dir / "file"}, "--data-root").status().message()),
              HasSubstr("is not a directory"));
  EXPECT_THAT(std::string(ResolveDataRoots({dir / "none"}, "--data-root").status().message()),
              HasSubstr("is not a directory (No such file or directory)"));
  // A root given through a link is compared in its resolved form.
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_directory_symlink(dir / "real", dir / "alias");
  WriteFile(dir / "real/corpus.txt", std::string(3000, 'c'));
  EXPECT_TRUE(
      LoadCorpus(TextFile(dir / "alias/corpus.txt"), Options(RootsOf(dir / "alias"))).ok());
}

}  // namespace
}  // namespace zbpp::worker
