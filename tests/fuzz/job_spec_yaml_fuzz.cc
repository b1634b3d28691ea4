// libFuzzer target (bench/results/fuzz.md): a job spec as `zbppctl submit`
// reads it. The bytes are YAML text for client::JobSpecFromYaml; a spec that
// parses goes through the coordinator's ValidateJobSpec, which also runs the
// scheduler on the spec's shape. Both must answer with a Status: no crash, no
// sanitizer report, no hang.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/job_spec_yaml.h"
#include "coordinator/core/planning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<zbpp::v1::JobSpec> spec = zbpp::client::JobSpecFromYaml(text);
  if (!spec.ok()) return 0;
  // The result is not checked: either answer is fine, reaching it is the
  // test.
  (void)zbpp::coordinator::ValidateJobSpec(*spec);
  return 0;
}
