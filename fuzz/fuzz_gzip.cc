// libFuzzer target: GzReader (runtime/data/gzip_reader.cc), the reader under
// every data source, and the sources that read a whole file through it:
// text(seq) and tokens(dtype, seq) (probe.cc, sources_text.cc). The input is
// a file's bytes, usually gzip (the seeds are .gz files); the file is named
// input.gz, so tokens() decompresses it too.
//
// Checked, besides the sanitizers: reading the file in chunks and skipping to
// its end agree (both fail, or both count the same bytes); reading it line by
// line fails only where the chunked read fails too; and the loader loads
// whatever the text and tokens probes accept.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_dataset.h"
#include "runtime/data/gzip_reader.h"

namespace {

using dtl::fuzz::broken;
using dtl::rt::data::GzReader;

// Every byte in chunks of `chunk`: the count, or -1 on error.
int64_t readAll(const std::string& path, int64_t chunk) {
  GzReader r;
  if (!r.open(path)) broken("cannot open the input: " + r.error());
  std::vector<char> buf(static_cast<size_t>(chunk));
  int64_t total = 0;
  for (;;) {
    int64_t n = r.read(buf.data(), chunk);
    if (n < 0) {
      if (r.error().empty()) broken("read() failed without a message");
      return -1;
    }
    total += n;
    if (r.position() != total) broken("position() is not the bytes read");
    if (n < chunk) return total;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  const std::string path = fuzz::writeInput("input.gz", data, size);
  const int64_t chunk = 1 + static_cast<int64_t>(size % 61);

  int64_t read_bytes = readAll(path, chunk);
  {
    GzReader r;
    if (!r.open(path)) broken("cannot open the input: " + r.error());
    int64_t skipped = r.skipToEnd();
    if (skipped != read_bytes)
      broken("read() in chunks of " + std::to_string(chunk) + " gives " + std::to_string(read_bytes) +
             " bytes, skipToEnd() " + std::to_string(skipped) + " (" + r.error() + ")");
  }
  {
    GzReader r;
    if (!r.open(path)) broken("cannot open the input: " + r.error());
    std::string line;
    int64_t bytes = 0;
    while (r.readLine(line)) bytes += static_cast<int64_t>(line.size());
    if (!r.error().empty() && read_bytes >= 0) broken("readLine() fails where read() does not: " + r.error());
    if (r.error().empty() && (read_bytes < 0 || bytes > read_bytes))
      broken("readLine() read " + std::to_string(bytes) + " bytes of lines from " + std::to_string(read_bytes));
  }

  const int64_t seq = 1 + static_cast<int64_t>(size % 5);
  rt::data::FieldSpec f;
  f.path = path;
  f.seq = seq;
  f.field_of_multi = "targets";
  f.source = "text";
  fuzz::loadAccepted(f, rt::data::probeText(path, seq), size % 2 == 0);
  static const char* const kDtypes[] = {"u16", "u32", "i32"};
  f.source = "tokens";
  f.token_dtype = kDtypes[size % 3];
  fuzz::loadAccepted(f, rt::data::probeTokens(path, f.token_dtype, seq), true);
  return 0;
}
