#ifndef ZBPP_COMMON_UTF8_H_
#define ZBPP_COMMON_UTF8_H_

#include <string_view>

#include "absl/status/status.h"

namespace zbpp {

/// OK when `text` is well-formed UTF-8 (RFC 3629, Unicode's Table 3-7):
/// no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
/// U+10FFFF, no truncated sequence. Protobuf refuses a `string` field that
/// is not, so every piece of user text bound for one is checked with this
/// first.
///
/// Errors: InvalidArgument "<field>: not valid UTF-8 (byte 0xE9 at offset
/// 4)", naming the byte where the first ill-formed sequence starts (its
/// 0-based offset into `text`, in bytes). Thread-safe (pure).
absl::Status CheckUtf8(std::string_view field, std::string_view text);

}  // namespace zbpp

#endif  // ZBPP_COMMON_UTF8_H_
