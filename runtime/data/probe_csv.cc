// probeCsv: one streaming pass over a numeric CSV (plain or .gz) that counts
// data rows and checks that every selected cell parses as a number, so that
// `dtlc check` fails with file:line instead of the loader failing mid-run.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/csv_cells.h"
#include "runtime/data/probe.h"
#include "runtime/data/probe_internal.h"

namespace dtl::rt::data {

using namespace detail;

namespace {


bool isNumber(std::string_view cell) {
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = trim(cell.substr(1, cell.size() - 2));
  if (!cell.empty() && cell.front() == '+') cell.remove_prefix(1);  // from_chars rejects a leading '+'
  if (cell.empty() || cell.front() == '+') return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  // Out of range ("1e999") still reads as a number; the loader saturates it.
  return (ec == std::errc() || ec == std::errc::result_out_of_range) && ptr == cell.data() + cell.size();
}

// For messages: short, and safe to print whatever bytes the file holds.
std::string shown(std::string_view cell) {
  std::string s = "'";
  for (size_t i = 0; i < cell.size() && i < 40; ++i) {
    auto c = static_cast<unsigned char>(cell[i]);
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    }
  }
  return s + (cell.size() > 40 ? "...'" : "'");
}

std::string plural(int64_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

ProbeResult probeCsv(const std::string& path, const CsvOptions& opt) {
  return guarded(path, [&]() -> ProbeResult {
    if (opt.skip < 0) return fail(path + ": csv skip = " + std::to_string(opt.skip) + " is negative");
    if (opt.delimiter == '"' || opt.delimiter == '\n' || opt.delimiter == '\r' || opt.delimiter == '\0')
      return fail(path + ": csv delimiter " + shown(std::string_view(&opt.delimiter, 1)) + " cannot separate cells");
    int64_t max_col = -1;
    for (int64_t c : opt.columns) {
      if (c < 0) return fail(path + ": csv column " + std::to_string(c) + " is negative (columns count from 0)");
      max_col = std::max(max_col, c);
    }
    GzReader r;
    if (!r.open(path)) return fail(r.error());

    std::string line;
    std::vector<std::string_view> cells;
    bool whitespace = opt.delimiter == ' ';
    bool header_pending = opt.header;
    int64_t line_no = 0, rows = 0, width = -1, width_line = 0;
    std::string where;
    while (r.readLine(line)) {
      ++line_no;
      std::string_view text = line;
      if (line_no == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM
      if (line_no <= opt.skip || trim(text).empty()) continue;
      if (header_pending) {
        header_pending = false;
        continue;
      }
      where = path + ":" + std::to_string(line_no) + ": ";
      // The language has no delimiter option, so whitespace-separated files
      // (sklearn's diabetes data) must work with the default ','.
      if (rows == 0 && opt.delimiter == ',' && text.find(',') == std::string_view::npos) whitespace = true;
      splitCells(text, opt.delimiter, whitespace, cells);
      int64_t have = static_cast<int64_t>(cells.size());
      if (opt.columns.empty()) {
        if (width < 0) {
          width = have;
          width_line = line_no;
        } else if (have != width) {
          return fail(where + "row has " + plural(have, "column") + " but the first data row (line " +
                      std::to_string(width_line) + ") has " + std::to_string(width));
        }
        for (int64_t c = 0; c < have; ++c)
          if (!isNumber(cells[static_cast<size_t>(c)]))
            return fail(where + "column " + std::to_string(c) + " is " + shown(cells[static_cast<size_t>(c)]) +
                        ", which is not a number (columns count from 0)");
      } else {
        if (have <= max_col)
          return fail(where + "row has " + plural(have, "column") + " but column " + std::to_string(max_col) +
                      " is selected (columns count from 0)");
        for (int64_t c : opt.columns)
          if (!isNumber(cells[static_cast<size_t>(c)]))
            return fail(where + "column " + std::to_string(c) + " is " + shown(cells[static_cast<size_t>(c)]) +
                        ", which is not a number (columns count from 0)");
      }
      ++rows;
    }
    if (!r.error().empty()) return fail(r.error());
    if (rows == 0) {
      std::string used;
      if (opt.skip > 0) used = plural(opt.skip, "skipped line");
      if (opt.header) used += std::string(used.empty() ? "" : " and ") + "a header line";
      return fail(path + ": has no data rows" + (used.empty() ? "" : " after " + used) + " (the file " +
                  (line_no == 0 ? std::string("is empty") : "has " + plural(line_no, "line")) + ")");
    }
    int64_t selected = opt.columns.empty() ? width : static_cast<int64_t>(opt.columns.size());
    ProbeResult res;
    res.ok = true;
    res.info.samples = rows;
    if (selected != 1) res.info.sample_dims = {selected};
    res.info.sample_elements = selected;
    res.info.dtype = "f32";
    res.info.kind = ElemKind::Float;
    return res;
  });
}

}  // namespace dtl::rt::data
