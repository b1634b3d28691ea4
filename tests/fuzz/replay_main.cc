// A main() for the fuzz targets where libFuzzer is missing (g++ only): runs
// LLVMFuzzerTestOneInput once on every file named, or on every file in the
// folders named, so seeds and regression inputs still run in the tests.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/read_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    if (!arg.empty() && arg.string()[0] == '-') continue;  // libFuzzer flags
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(arg);
    }
  }
  for (const std::filesystem::path& file : files) {
    absl::StatusOr<std::string> bytes = zbpp::ReadFileToString(file);
    if (!bytes.ok()) {
      std::cerr << "replay: cannot read " << file << "\n";
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes->data()),
                           bytes->size());
  }
  std::cerr << "replay: " << files.size() << " inputs ran clean\n";
  return 0;
}
