// libFuzzer target: numeric CSV (runtime/data/probe_csv.cc probeCsv,
// csv_cells.cc, then the loader's readCsv). The first line of the input is
// the options, the rest the file:
//
//   OPTIONS\n FILE      OPTIONS: any of  h (no header)  sN (skip N lines, N < 10)
//                                 d<char> (delimiter)  cN (select column N, N < 10)  i (i32 input)
//
// e.g. "s1 d; c0 c2\n…". Unknown option letters are ignored.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  std::string_view opts = nl == std::string_view::npos ? std::string_view() : in.substr(0, nl);
  std::string_view file = nl == std::string_view::npos ? in : in.substr(nl + 1);
  rt::data::FieldSpec f;
  f.source = "csv";
  bool integer = false;
  for (size_t k = 0; k < opts.size(); ++k) {
    char c = opts[k], arg = k + 1 < opts.size() ? opts[k + 1] : '\0';
    bool digit = arg >= '0' && arg <= '9';
    if (c == 'h') f.csv.header = false;
    if (c == 'i') integer = true;
    if (c == 's' && digit) f.csv.skip = arg - '0';
    if (c == 'c' && digit && f.csv.columns.size() < 8) f.csv.columns.push_back(arg - '0');
    if (c == 'd' && arg) f.csv.delimiter = arg;
    if ((c == 's' || c == 'c' || c == 'd') && arg) ++k;
  }
  f.path = fuzz::writeInput("input.csv", file.data(), file.size());
  fuzz::loadAccepted(f, rt::data::probeCsv(f.path, f.csv), integer);
  return 0;
}
