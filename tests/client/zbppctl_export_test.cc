// zbppctl export: its flags, and the exporter it runs (a stand-in script
// here; tests/hf/export_test.py runs the real one on a trained job).

#include "client/zbppctl_export.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/zbppctl_flags.h"
#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::ctl {
namespace {

using ::testing::HasSubstr;

// An executable shell script at `path`.
void WriteScript(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
}

v1::Job CheckpointedJob() {
  v1::Job job;
  job.set_id("job-7");
  job.mutable_spec()->mutable_model()->set_architecture("llama");
  job.mutable_spec()->mutable_checkpoint()->set_directory("/data/ckpt");
  job.set_last_checkpoint_step(39);
  return job;
}

TEST(ZbppctlExport, FlagsNeedOutAndOfferOnlySafetensors) {
  absl::StatusOr<CtlOptions> options =
      ParseCommandLine({"export", "job-7", "--out", "/tmp/model"}, "");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->command, Command::kExport);
  EXPECT_EQ(options->argument, "job-7");
  EXPECT_EQ(options->out_dir, "/tmp/model");
  EXPECT_EQ(options->format, "safetensors");
  EXPECT_THAT(std::string(ParseCommandLine({"export", "job-7"}, "").status().message()),
              HasSubstr("export needs --out DIR"));
  EXPECT_THAT(std::string(ParseCommandLine({"export", "job-7", "--out", "m", "--format", "gguf"},
                                           "")
                              .status()
                              .message()),
              HasSubstr("--format for export must be one of safetensors, got \"gguf\""));
  EXPECT_THAT(std::string(ParseCommandLine({"status", "job-7", "--out", "m"}, "").status().message()),
              HasSubstr("status takes no --out"));
}

// --force: a switch (no value) of export only; off unless given.
TEST(ZbppctlExport, ForceIsASwitchOfExportOnly) {
  absl::StatusOr<CtlOptions> options =
      ParseCommandLine({"export", "job-7", "--out", "/tmp/model"}, "");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->force);
  options = ParseCommandLine({"export", "job-7", "--force", "--out", "/tmp/model"}, "");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->force);
  EXPECT_EQ(options->out_dir, "/tmp/model");
  const absl::Status valued =
      ParseCommandLine({"export", "job-7", "--out", "m", "--force=yes"}, "").status();
  EXPECT_THAT(std::string(valued.message()), HasSubstr("--force takes no value"));
  EXPECT_THAT(std::string(ParseCommandLine({"status", "job-7", "--force"}, "").status().message()),
              HasSubstr("status takes no --force"));
}

TEST(ZbppctlExport, TheExporterGetsTheJobAsStatusJsonAndTheDirectory) {
  const std::string dir = ::testing::TempDir();
  const std::string seen = dir + "/export-args.txt";
  WriteScript(dir + "/fake-export",
              absl::StrCat("echo \"$@\" > ", seen, "\ncp \"$2\" ", seen,
                           ".json\necho 'export: step 39 -> '\"$4\"\n"));
  std::string summary;
  const absl::Status status =
      ExportJob(CheckpointedJob(), "/tmp/model", /*force=*/false, dir + "/fake-export", &summary);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(summary, "export: step 39 -> /tmp/model\n");
  absl::StatusOr<std::string> args = ReadFileToString(seen);
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(*args, HasSubstr("--out /tmp/model"));
  EXPECT_THAT(*args, ::testing::Not(HasSubstr("--force")));
  EXPECT_THAT(*args, ::testing::StartsWith("--job "));
  absl::StatusOr<std::string> json = ReadFileToString(seen + ".json");
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"last_checkpoint_step\": \"39\""));
  EXPECT_THAT(*json, HasSubstr("\"directory\": \"/data/ckpt\""));
  // The temporary file is gone once the exporter has run.
  const std::string job_file = args->substr(6, args->find(' ', 6) - 6);
  EXPECT_FALSE(ReadFileToString(job_file).ok()) << job_file;

  // --force reaches the exporter, which alone decides about the directory.
  ASSERT_TRUE(ExportJob(CheckpointedJob(), "/tmp/model", /*force=*/true, dir + "/fake-export",
                        &summary)
                  .ok());
  args = ReadFileToString(seen);
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(*args, HasSubstr("--out /tmp/model --force"));
}

TEST(ZbppctlExport, TheExportersErrorLineBecomesTheError) {
  const std::string dir = ::testing::TempDir();
  WriteScript(dir + "/refusing-export",
              "echo 'loading torch' >&2\necho 'export: --checkpoint /data/ckpt: No such file or "
              "directory' >&2\nexit 2\n");
  std::string summary;
  absl::Status status =
      ExportJob(CheckpointedJob(), "/tmp/model", /*force=*/false, dir + "/refusing-export",
                &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "export: --checkpoint /data/ckpt: No such file or directory");

  status = ExportJob(CheckpointedJob(), "/tmp/model", /*force=*/false,
                     dir + "/no-such-exporter", &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("ZBPP_EXPORT_SCRIPT"));

  v1::Job fresh = CheckpointedJob();
  fresh.set_last_checkpoint_step(-1);
  status = ExportJob(fresh, "/tmp/model", /*force=*/false, dir + "/refusing-export", &summary);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "job job-7 has no checkpoint to export yet");
}

}  // namespace
}  // namespace zbpp::ctl
