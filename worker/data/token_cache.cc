#include "worker/data/token_cache.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "worker/data/file_io.h"

namespace zbpp::worker {
namespace {

constexpr char kMagic[] = "ZBPPTOK1";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr size_t kHeaderBytes = kMagicBytes + sizeof(uint64_t);

// Little-endian whatever the host, so caches can be copied between machines.
void StoreLittleEndian64(uint64_t value, char* out) {
  for (size_t i = 0; i < sizeof(value); ++i) {
    out[i] = static_cast<char>(value >> (8 * i));
  }
}

uint64_t LoadLittleEndian64(const char* in) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(value); ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i]))
             << (8 * i);
  }
  return value;
}

}  // namespace

absl::StatusOr<std::string> ReadTokenCache(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) return contents.status();
  // The writer renames complete files into place, so a bad header means the
  // file was damaged or written by something else.
  if (contents->size() < kHeaderBytes ||
      contents->compare(0, kMagicBytes, kMagic) != 0 ||
      LoadLittleEndian64(contents->data() + kMagicBytes) !=
          contents->size() - kHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a complete token cache file"));
  }
  return contents->substr(kHeaderBytes);
}

absl::Status WriteTokenCache(const std::string& path,
                             const std::string& tokens) {
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
  if (!writer.ok()) return writer.status();
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, kMagicBytes);
  StoreLittleEndian64(tokens.size(), header + kMagicBytes);
  if (absl::Status status = writer->Append(header, sizeof(header));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = writer->Append(tokens.data(), tokens.size());
      !status.ok()) {
    return status;
  }
  return writer->Commit();
}

}  // namespace zbpp::worker
