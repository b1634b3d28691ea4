#include "common/utf8.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace zbpp {
namespace {

// Offset of the first byte of `text` that does not start a well-formed
// character, or text.size() when there is none. The ranges of each
// sequence's second byte are what exclude overlongs (E0, F0), surrogates
// (ED) and code points above U+10FFFF (F4).
size_t FirstInvalidByte(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    uint8_t second_min = 0x80;
    uint8_t second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_min = 0xA0;
      if (lead == 0xED) second_max = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_min = 0x90;
      if (lead == 0xF4) second_max = 0x8F;
    } else {
      return i;  // A continuation byte, C0/C1 (always overlong) or F5..FF.
    }
    if (i + length > text.size()) return i;  // Cut short by the end.
    for (size_t k = 1; k < length; ++k) {
      const uint8_t next = static_cast<uint8_t>(text[i + k]);
      const uint8_t min = k == 1 ? second_min : 0x80;
      const uint8_t max = k == 1 ? second_max : 0xBF;
      if (next < min || next > max) return i;
    }
    i += length;
  }
  return text.size();
}

}  // namespace

absl::Status CheckUtf8(std::string_view field, std::string_view text) {
  const size_t bad = FirstInvalidByte(text);
  if (bad == text.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: not valid UTF-8 (byte 0x%02X at offset %d)", field,
      static_cast<uint8_t>(text[bad]), bad));
}

}  // namespace zbpp
