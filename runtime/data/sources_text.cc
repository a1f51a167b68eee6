// Readers for csv (numbers parsed into f64 with the probe's rules: skip,
// header, blank lines, BOM, quotes, ',' falling back to whitespace) and for
// the windowed byte/token streams of text() and tokens(), whose flat array is
// read once and shared by the tokens and targets fields.
#include <locale.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "runtime/data/csv_cells.h"
#include "runtime/data/gzip_reader.h"
#include "runtime/data/sources.h"

namespace dtl::rt::data::detail {

namespace {

// ---------------------------------------------------------------- csv (cells: csv_cells.h)

// The probe accepted the cell; out-of-range numbers saturate like strtod
// ("1e999" → inf, "1e-999" → 0), parsed in the C locale whatever the process's is.
bool parseNumber(std::string_view cell, double& v) {
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = trim(cell.substr(1, cell.size() - 2));
  if (!cell.empty() && cell.front() == '+') cell.remove_prefix(1);
  if (cell.empty() || cell.front() == '+') return false;
  auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ptr != cell.data() + cell.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    static locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
    std::string s(cell);
    v = strtod_l(s.c_str(), nullptr, c_locale);
    return true;
  }
  return ec == std::errc();
}

// A header cell without its quotes, for messages.
std::string_view unquoted(std::string_view cell) {
  cell = trim(cell);
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = trim(cell.substr(1, cell.size() - 2));
  return cell;
}

// ---------------------------------------------------------------- windows

bool endsWithGz(const std::string& p) { return p.size() >= 3 && p.compare(p.size() - 3, 3, ".gz") == 0; }

Status readAll(const std::string& path, bool allow_gzip, std::vector<unsigned char>& out) {
  GzReader r;
  if (!r.open(path, allow_gzip)) return Status::error(r.error());
  out.clear();
  constexpr int64_t kChunk = 1 << 20;
  for (;;) {
    size_t old = out.size();
    out.resize(old + kChunk);
    int64_t n = r.read(out.data() + old, kChunk);
    if (n < 0) return Status::error(r.error());
    out.resize(old + static_cast<size_t>(n));
    if (n < kChunk) return {};
  }
}

// The field's column (its role: "tokens" or "targets") over the shared flat array.
Status windows(const FieldSpec& f, const std::string& source, Elem elem,
               std::shared_ptr<const std::vector<unsigned char>> bytes, Column& out) {
  const std::string& role = f.field_of_multi.empty() ? f.name : f.field_of_multi;
  if (role != "tokens" && role != "targets")
    return Status::error(f.path + ": " + source + " yields the fields tokens and targets; '" + role + "' is neither");
  int64_t count = static_cast<int64_t>(bytes->size()) / elemSize(elem);
  out.bytes = std::move(bytes);
  out.elem = elem;
  out.samples = (count - 1) / f.seq;
  out.elements = f.seq;
  out.stride = f.seq;
  out.offset = role == "targets" ? 1 : 0;
  out.file_dims = {f.seq};
  return {};
}

Status windowed(const FieldSpec& f, SourceCache& cache, const std::string& source, const ProbeResult& probe, Elem elem,
                bool allow_gzip, Column& out) {
  if (!probe.ok) return fromProbe(probe);
  std::string key = source + "\n" + f.path;
  auto bytes = cache.find(key);
  if (!bytes) {
    auto fresh = std::make_shared<std::vector<unsigned char>>();
    Status s = readAll(f.path, allow_gzip, *fresh);
    if (!s.ok) return s;
    int64_t count = static_cast<int64_t>(fresh->size()) / elemSize(elem);
    if (count < f.seq + 1 || static_cast<int64_t>(fresh->size()) % elemSize(elem) != 0)
      return Status::error(f.path + ": file changed while being read (now " + std::to_string(fresh->size()) +
                           " bytes)");
    cache.arrays.emplace_back(key, fresh);
    bytes = std::move(fresh);
  }
  return windows(f, source, elem, std::move(bytes), out);
}

}  // namespace

Status readCsv(const FieldSpec& f, Column& out) {
  ProbeResult p = probeCsv(f.path, f.csv);
  if (!p.ok) return fromProbe(p);
  const CsvOptions& opt = f.csv;
  GzReader r;
  if (!r.open(f.path)) return Status::error(r.error());
  int64_t width = p.info.sample_elements;
  auto values =
      std::make_shared<std::vector<unsigned char>>(static_cast<size_t>(p.info.samples * width) * sizeof(double));
  std::string line;
  std::vector<std::string_view> cells;
  bool whitespace = opt.delimiter == ' ';
  bool header_pending = opt.header;
  int64_t line_no = 0, rows = 0;
  while (r.readLine(line)) {
    ++line_no;
    std::string_view text = line;
    if (line_no == 1 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    if (line_no <= opt.skip || trim(text).empty()) continue;
    if (header_pending) {  // kept only to name columns in messages
      header_pending = false;
      bool ws = whitespace || (opt.delimiter == ',' && text.find(',') == std::string_view::npos);
      splitCells(text, opt.delimiter, ws, cells);
      for (int64_t k = 0; k < width; ++k) {
        size_t c = opt.columns.empty() ? static_cast<size_t>(k) : static_cast<size_t>(opt.columns[k]);
        out.titles.emplace_back(c < cells.size() ? unquoted(cells[c]) : std::string_view());
      }
      continue;
    }
    if (rows == 0 && opt.delimiter == ',' && text.find(',') == std::string_view::npos) whitespace = true;
    splitCells(text, opt.delimiter, whitespace, cells);
    std::string where = f.path + ":" + std::to_string(line_no) + ": ";
    if (rows >= p.info.samples) return Status::error(where + "file changed while being read (more rows than before)");
    auto* row = reinterpret_cast<double*>(values->data()) + rows * width;
    for (int64_t k = 0; k < width; ++k) {
      size_t c = opt.columns.empty() ? static_cast<size_t>(k) : static_cast<size_t>(opt.columns[k]);
      double v = 0;
      if (c >= cells.size() || !parseNumber(cells[c], v))
        return Status::error(where + "file changed while being read (column " + std::to_string(c) +
                             " is no longer a number)");
      std::memcpy(row + k, &v, sizeof v);
    }
    out.lines.push_back(line_no);
    ++rows;
  }
  if (!r.error().empty()) return Status::error(r.error());
  if (rows != p.info.samples) return Status::error(f.path + ": file changed while being read (fewer rows than before)");
  out.bytes = std::move(values);
  out.elem = Elem::F64;
  out.samples = rows;
  out.elements = width;
  out.stride = width;
  out.offset = 0;
  out.file_dims = p.info.sample_dims;
  for (int64_t k = 0; k < width; ++k) out.columns.push_back(opt.columns.empty() ? k : opt.columns[k]);
  return {};
}

Status readText(const FieldSpec& f, SourceCache& cache, Column& out) {
  std::string source = "text(seq = " + std::to_string(f.seq) + ")";
  return windowed(f, cache, source, probeText(f.path, f.seq), Elem::U8, true, out);
}

Status readTokens(const FieldSpec& f, SourceCache& cache, Column& out) {
  std::string source = "tokens(dtype = " + f.token_dtype + ", seq = " + std::to_string(f.seq) + ")";
  ProbeResult p = probeTokens(f.path, f.token_dtype, f.seq);
  Elem elem = f.token_dtype == "u32" ? Elem::U32 : f.token_dtype == "i32" ? Elem::I32 : Elem::U16;
  return windowed(f, cache, source, p, elem, endsWithGz(f.path), out);
}

}  // namespace dtl::rt::data::detail
