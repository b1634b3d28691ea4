#include "common/text_table.h"

#include <algorithm>
#include <cstdio>

namespace zbpp {

std::string PrintableText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatTable(const std::vector<std::vector<std::string>>& raw_rows) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(raw_rows.size());
  for (const auto& raw : raw_rows) {
    std::vector<std::string>& row = rows.emplace_back();
    for (const std::string& cell : raw) row.push_back(PrintableText(cell));
  }
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      // Padding only between cells: a row's last cell ends the line.
      if (c + 1 < row.size()) {
        line += std::string(widths[c] - row[c].size() + 2, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace zbpp
