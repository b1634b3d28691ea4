// Aligned plain-text tables, as zbpp-sched and zbppctl print them.

#ifndef ZBPP_COMMON_TEXT_TABLE_H_
#define ZBPP_COMMON_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace zbpp {

/// `rows` as left-aligned columns: each cell padded to its column's widest
/// cell (width in bytes) and followed by two spaces, except the last cell of
/// a row, which gets no padding, so lines carry no trailing blanks. Every row
/// ends with "\n"; rows may have different lengths. No rows give "". Pure.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace zbpp

#endif  // ZBPP_COMMON_TEXT_TABLE_H_
