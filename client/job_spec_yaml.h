#ifndef ZBPP_CLIENT_JOB_SPEC_YAML_H_
#define ZBPP_CLIENT_JOB_SPEC_YAML_H_

#include <string>

#include "absl/status/statusor.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::client {

/// Converts a job spec written in YAML (what `zbppctl submit job.yaml`
/// reads) into the `zbpp.v1.JobSpec` message; see deploy/examples/.
///
/// The keys are the proto's field names (snake_case) and nest like its
/// messages, e.g.
///
///     model: {architecture: gpt, layers: 8, hidden: 256, heads: 8,
///             vocab: 256, seq_len: 256}
///     dataset: {builtin: bible-kjv}
///     pipeline: {stages: 4, microbatches: 16, microbatch_size: 4}
///     schedule: {name: auto, memory_limit_m_b: 6}
///     optimizer: {learning_rate: 3.0e-4}
///     validation: post
///     steps: 1000
///
/// Values: integers for integer fields (range-checked: int32, uint64, ...),
/// numbers for floating-point ones (`.inf`, `.nan` as in YAML), YAML
/// booleans, any scalar for strings; an enum by its value name with the
/// enum's prefix and case optional (`post`, `POST`, `VALIDATION_MODE_POST`).
/// A key whose value is a mapping or empty (`synthetic: {}` or
/// `synthetic:`) sets that message field. Fields left out stay unset.
///
/// This only converts: whether the values make a runnable job is the
/// coordinator's `ValidateJobSpec`.
///
/// Errors, all InvalidArgument and all starting with the key path, then
/// where in the text (1-based line and column):
///   "model.vocab_size: unknown key (line 7, column 3); known in model:
///    architecture, layers, ..."
///   "pipeline.microbatches: expected an integer (int32), got \"many\"
///    (line 12, column 17)"
///   "dataset.text_file: conflicts with dataset.builtin (line 5, ...);
///    set one of builtin, text_file, synthetic, tokens"
///   "yaml: not YAML (line 3, column 9): end of map not found"
///   "name: not valid UTF-8 (byte 0xE9 at offset 4) (line 1, column 7)"
/// A string value that is not UTF-8 (protobuf cannot carry it; the offset
/// is in bytes into the value), an unknown key, a repeated key, a value of
/// the wrong kind (a mapping where
/// a number belongs and vice versa), a missing value, two members of one
/// oneof, several YAML documents, an empty text and text that is not YAML
/// are all refused.
///
/// Thread-safe (pure).
absl::StatusOr<zbpp::v1::JobSpec> JobSpecFromYaml(const std::string& text);

/// Reads the file named by `spec.schedule.file` (relative to the directory
/// of `spec_path`, the YAML file's path, unless absolute) into
/// `spec.schedule.file_text`; does nothing without a `file`. Errors
/// (nothing is changed then): InvalidArgument "schedule.file_text: ..." when
/// the spec already carries text, "schedule.file: ..." when the file is over
/// kMaxScheduleFileBytes (common/job_limits.h); NotFound
/// "schedule.file: cannot read \"PATH\": REASON". Thread-compatible.
absl::Status LoadScheduleFile(const std::string& spec_path,
                              zbpp::v1::JobSpec& spec);

}  // namespace zbpp::client

#endif  // ZBPP_CLIENT_JOB_SPEC_YAML_H_
