// Aligned plain-text tables, as zbpp-sched and zbppctl print them.

#ifndef ZBPP_COMMON_TEXT_TABLE_H_
#define ZBPP_COMMON_TEXT_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

namespace zbpp {

/// `text` made safe to print on one terminal line: line breaks and tabs
/// become spaces, every other control byte (C0 and DEL; ESC among them, so
/// no escape sequence of a job or worker name reaches the terminal) becomes
/// "\xHH". Other bytes are kept. Pure.
std::string PrintableText(std::string_view text);

/// `rows` as left-aligned columns: each cell made PrintableText, padded to
/// its column's widest cell (width in bytes) and followed by two spaces,
/// except the last cell of a row, which gets no padding, so lines carry no
/// trailing blanks. Every row ends with "\n"; rows may have different
/// lengths. No rows give "". Pure.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace zbpp

#endif  // ZBPP_COMMON_TEXT_TABLE_H_
