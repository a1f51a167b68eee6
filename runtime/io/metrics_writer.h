// The --metrics FILE of `dtlc run`: one JSON object per line, e.g.
// {"step": 12, "epoch": 0, "loss": 0.41, "lr": 0.001}. Each line goes to the
// file in one write(2), so a crash loses at most the line being written.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/io/status.h"

namespace dtl::rt::io {

// One metrics line: the integer fields, then the real ones, each in the order
// given; reals in shortest round-trip form, NaN and ±Inf as null.
std::string metricsLine(const std::vector<std::pair<std::string, double>>& fields,
                        const std::vector<std::pair<std::string, int64_t>>& ints);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  ~MetricsWriter();

  // Creates the file (and its directory), truncating it, or appends to it
  // (a resumed run).
  Status open(const std::string& path, bool append = false);
  // Writes metricsLine(fields, ints) and a newline. A failure is kept in status().
  void write(const std::vector<std::pair<std::string, double>>& fields,
             const std::vector<std::pair<std::string, int64_t>>& ints);
  // The first write failure since open(), or ok.
  const Status& status() const { return status_; }
  void close();

 private:
  std::string path_;
  int fd_ = -1;
  Status status_;
};

}  // namespace dtl::rt::io
