#include "worker/data/corpus.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/data/token_ids.h"
#include "worker/data/subprocess.h"
#include "worker/data/token_cache.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

using ::testing::ElementsAre;
using testing::FileSizeLimit;
using ::testing::HasSubstr;
using testing::ListDirectory;
using ::testing::StartsWith;
using testing::TestDirectory;
using testing::WriteFile;

constexpr char kBibleStart[] =
    "\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.";
constexpr char kBibleEnd[] =
    "The grace of our Lord Jesus Christ be with you all. Amen.\n";
constexpr char kLastChapter[] = "\nRevelation 22\n";

v1::DatasetSpec Builtin(const std::string& name) {
  v1::DatasetSpec spec;
  spec.set_builtin(name);
  return spec;
}

v1::DatasetSpec TextFile(const std::string& path) {
  v1::DatasetSpec spec;
  spec.set_text_file(path);
  return spec;
}

CorpusOptions Options(const std::string& cache_dir) {
  CorpusOptions options;
  options.cache_dir = cache_dir;
  options.seq_len = 128;
  return options;
}

std::string AsString(const TokenView& tokens) {
  EXPECT_EQ(tokens.width(), 1);
  const std::vector<int64_t> ids = testing::Ids(tokens);
  return std::string(ids.begin(), ids.end());
}

std::string AllText(const Corpus& corpus) {
  return AsString(corpus.tokens(Split::kTrain)) +
         AsString(corpus.tokens(Split::kEval));
}

TEST(CorpusTest, BibleLoadsSplitsAndIsCached) {
  TestDirectory dir;
  const CorpusOptions options = Options(dir / "cache");
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Builtin("bible-kjv"), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ((*corpus)->description(), "dataset.builtin \"bible-kjv\"");
  EXPECT_FALSE((*corpus)->synthetic());

  const TokenView train = (*corpus)->tokens(Split::kTrain);
  const TokenView eval = (*corpus)->tokens(Split::kEval);
  const int64_t total = train.size() + eval.size();
  EXPECT_GT(total, 4'000'000);
  EXPECT_THAT(AsString(train), StartsWith(kBibleStart));
  // The held-out split is the end of the text, right after the train split.
  EXPECT_EQ(eval.size(), static_cast<int64_t>(std::floor(total * 0.01)));
  EXPECT_TRUE(absl::EndsWith(AsString(eval), kBibleEnd));
  EXPECT_TRUE(absl::StrContains(AsString(eval), kLastChapter));
  EXPECT_FALSE(absl::StrContains(AsString(train), kLastChapter));

  // The cache holds the same tokens and nothing else is left behind.
  EXPECT_THAT(ListDirectory(dir / "cache"), ElementsAre("bible-kjv.tokens"));
  absl::StatusOr<std::string> cached =
      ReadTokenCache(dir / "cache/bible-kjv.tokens");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, AllText(**corpus));

  // A second load needs no program: it reads the cache.
  CorpusOptions without_program = options;
  without_program.builtin_paths.bible_program = dir / "no-such-bible";
  absl::StatusOr<std::shared_ptr<const Corpus>> again =
      LoadCorpus(Builtin("bible-kjv"), without_program);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(AllText(**again), AllText(**corpus));
  EXPECT_EQ((*again)->fingerprint(), (*corpus)->fingerprint());
  EXPECT_EQ((*again)->tokens(Split::kEval).size(), eval.size());
}

TEST(CorpusTest, DamagedCacheIsRebuilt) {
  TestDirectory dir;
  const CorpusOptions options = Options(dir / "cache");
  ASSERT_TRUE(LoadCorpus(Builtin("bible-kjv"), options).ok());
  const std::string cache = dir / "cache/bible-kjv.tokens";
  std::filesystem::resize_file(cache, 1000);
  EXPECT_EQ(ReadTokenCache(cache).status().code(), absl::StatusCode::kDataLoss);

  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Builtin("bible-kjv"), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_GT(AllText(**corpus).size(), 4'000'000u);
  absl::StatusOr<std::string> cached = ReadTokenCache(cache);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, AllText(**corpus));
}

TEST(CorpusTest, CacheWriteFailingMidwayLeavesNoFile) {
  TestDirectory dir;
  absl::Status status;
  {
    FileSizeLimit limit(1 << 20);  // the Bible is ~4.3 MB
    status = LoadCorpus(Builtin("bible-kjv"), Options(dir / "cache")).status();
  }
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("bible-kjv.tokens.tmp-"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("File too large"));
  EXPECT_THAT(ListDirectory(dir / "cache"), ::testing::IsEmpty());
}

TEST(CorpusTest, BrokenProgramIsAnErrorAndNothingIsCached) {
  TestDirectory dir;
  struct Case {
    std::string program;
    absl::StatusCode code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"/nonexistent/bible", absl::StatusCode::kNotFound,
            "dataset.builtin \"bible-kjv\": program /nonexistent/bible not "
            "found; install the Debian package bible-kjv"},
           {"/bin/false", absl::StatusCode::kInternal,
            "dataset.builtin \"bible-kjv\": /bin/false gen1:1-rev22:21 exited "
            "with status 1; stderr: "}}) {
    CorpusOptions options = Options(dir / "cache");
    options.builtin_paths.bible_program = c.program;
    const absl::Status status =
        LoadCorpus(Builtin("bible-kjv"), options).status();
    EXPECT_EQ(status.code(), c.code) << c.program;
    EXPECT_EQ(status.message(), c.message);
    EXPECT_THAT(ListDirectory(dir / "cache"), ::testing::IsEmpty());
  }
}

TEST(CorpusTest, FortunesConcatenateTextFilesInNameOrder) {
  TestDirectory dir;
  const std::string fortunes = dir / "fortunes";
  std::filesystem::create_directories(fortunes);
  const std::string b(300, 'b');
  const std::string a = "A fortune.\n%\nAnother.\n" + std::string(300, 'a');
  WriteFile(fortunes + "/zippy", b);
  WriteFile(fortunes + "/art", a);
  WriteFile(fortunes + "/art.dat", "binary index");
  std::filesystem::create_symlink("art", fortunes + "/art.u8");

  CorpusOptions options = Options("");
  options.builtin_paths.fortunes_directory = fortunes;
  options.eval_fraction = 0.4;
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Builtin("fortunes"), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(AllText(**corpus), a + b);

  options.builtin_paths.fortunes_directory = dir / "missing";
  const absl::Status status = LoadCorpus(Builtin("fortunes"), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(),
            "dataset.builtin \"fortunes\": no fortune files in " +
                (dir / "missing") +
                "; install the Debian package fortunes (or fortunes-min)");
}

TEST(CorpusTest, JargonIsDecompressed) {
  TestDirectory dir;
  const std::string text =
      "hacker: n. [originally, someone who makes "
      "furniture with an axe]\n" +
      std::string(500, 'x');
  WriteFile(dir / "jargon.txt", text);
  absl::StatusOr<std::string> compressed =
      RunAndCaptureStdout({"/bin/gzip", "-c", dir / "jargon.txt"});
  ASSERT_TRUE(compressed.ok()) << compressed.status();
  WriteFile(dir / "jargon.txt.gz", *compressed);

  CorpusOptions options = Options(dir / "cache");
  options.builtin_paths.jargon_file = dir / "jargon.txt.gz";
  options.eval_fraction = 0.3;
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Builtin("jargon-text"), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(AllText(**corpus), text);
  EXPECT_THAT(ListDirectory(dir / "cache"), ElementsAre("jargon-text.tokens"));

  options.builtin_paths.jargon_file = dir / "missing.gz";
  options.cache_dir = "";
  const absl::Status status =
      LoadCorpus(Builtin("jargon-text"), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      std::string(status.message()),
      StartsWith("dataset.builtin \"jargon-text\": " + (dir / "missing.gz") +
                 " not found; install the Debian package jargon-text"));
}

TEST(CorpusTest, UnknownBuiltinListsTheKnownOnesAndTouchesNoFile) {
  TestDirectory dir;
  // A name that would resolve to this valid cache file if used as a path.
  ASSERT_TRUE(
      WriteTokenCache(dir / "secret.tokens", std::string(1000, 's')).ok());
  std::filesystem::create_directories(dir / "cache");
  const absl::Status status =
      LoadCorpus(Builtin("../secret"), Options(dir / "cache")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("unknown corpus; known: bible-kjv, fortunes, "
                        "jargon-text"));
}

TEST(CorpusTest, TextFileTooShortNamesBothNumbers) {
  TestDirectory dir;
  WriteFile(dir / "short.txt", std::string(300, 't'));
  absl::Status status =
      LoadCorpus(TextFile(dir / "short.txt"), Options("")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the eval split has 3 tokens (of 300, eval_fraction "
                        "0.01), fewer than seq_len + 1 = 129"));
  EXPECT_THAT(std::string(status.message()),
              StartsWith("dataset.text_file \""));

  CorpusOptions options = Options("");
  options.eval_fraction = 0.9;
  status = LoadCorpus(TextFile(dir / "short.txt"), options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the train split has 30 tokens (of 300"));

  // Just long enough: 129 tokens in each split.
  WriteFile(dir / "enough.txt", std::string(258, 't'));
  options.eval_fraction = 0.5;
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(TextFile(dir / "enough.txt"), options);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ((*corpus)->tokens(Split::kEval).size(), 129);
}

TEST(CorpusTest, UnreadableTextFileNamesThePath) {
  TestDirectory dir;
  absl::Status status =
      LoadCorpus(TextFile(dir / "missing.txt"), Options("")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr(dir / "missing.txt"));

  if (::geteuid() == 0) return;  // root reads any file
  WriteFile(dir / "private.txt", std::string(1000, 'p'));
  std::filesystem::permissions(dir / "private.txt",
                               std::filesystem::perms::none);
  status = LoadCorpus(TextFile(dir / "private.txt"), Options("")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(status.message()), HasSubstr(dir / "private.txt"));
}

TEST(CorpusTest, InvalidSpecsAndOptions) {
  EXPECT_EQ(LoadCorpus(v1::DatasetSpec(), Options("")).status().message(),
            "dataset: no source set");
  v1::DatasetSpec synthetic;
  synthetic.mutable_synthetic()->set_sequences(0);
  EXPECT_EQ(LoadCorpus(synthetic, Options("")).status().code(),
            absl::StatusCode::kInvalidArgument);

  CorpusOptions options = Options("");
  options.seq_len = 0;
  EXPECT_EQ(LoadCorpus(Builtin("bible-kjv"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = Options("");
  options.eval_fraction = 1;
  EXPECT_EQ(LoadCorpus(Builtin("bible-kjv"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CorpusTest, SyntheticHoldsNoTokens) {
  v1::DatasetSpec spec;
  spec.mutable_synthetic()->set_sequences(7);
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(spec, Options(""));
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_TRUE((*corpus)->synthetic());
  EXPECT_EQ((*corpus)->synthetic_sequences(), 7);
  EXPECT_TRUE((*corpus)->tokens(Split::kTrain).empty());

  spec.mutable_synthetic()->clear_sequences();
  absl::StatusOr<std::shared_ptr<const Corpus>> endless =
      LoadCorpus(spec, Options(""));
  ASSERT_TRUE(endless.ok()) << endless.status();
  EXPECT_EQ((*endless)->synthetic_sequences(), 0);
  EXPECT_NE((*endless)->fingerprint(), (*corpus)->fingerprint());
}

TEST(CorpusTest, FingerprintFollowsTokensAndSplit) {
  TestDirectory dir;
  WriteFile(dir / "a.txt", std::string(1000, 'a'));
  WriteFile(dir / "b.txt", std::string(999, 'a') + "b");
  CorpusOptions options = Options("");
  options.seq_len = 8;
  auto fingerprint = [&](const std::string& path) {
    absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
        LoadCorpus(TextFile(path), options);
    EXPECT_TRUE(corpus.ok()) << corpus.status();
    return corpus.ok() ? (*corpus)->fingerprint() : 0;
  };
  const uint64_t a = fingerprint(dir / "a.txt");
  EXPECT_EQ(fingerprint(dir / "a.txt"), a);
  EXPECT_NE(fingerprint(dir / "b.txt"), a);
  options.eval_fraction = 0.02;
  EXPECT_NE(fingerprint(dir / "a.txt"), a);
}

}  // namespace
}  // namespace zbpp::worker
