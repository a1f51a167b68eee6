// MetricsWriter: builds a line with core/json.h's escaping and number format,
// appends it with a single write(2) on an O_APPEND descriptor, no buffering.
#include "runtime/io/metrics_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/json.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

std::string metricsLine(const std::vector<std::pair<std::string, double>>& fields,
                        const std::vector<std::pair<std::string, int64_t>>& ints) {
  std::string line = "{";
  auto add = [&](const std::string& key, const std::string& value) {
    if (line.size() > 1) line += ", ";
    line += json::quote(key) + ": " + value;
  };
  for (const auto& [k, v] : ints) add(k, std::to_string(v));
  for (const auto& [k, v] : fields) add(k, json::number(v));
  return line + "}";
}

MetricsWriter::~MetricsWriter() { close(); }

void MetricsWriter::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status MetricsWriter::open(const std::string& path, bool append) {
  close();
  path_ = path;
  status_ = {};
  if (Status s = makeDirs(parentDir(path)); !s.ok) return status_ = s;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  if (fd_ < 0) return status_ = ioError(path, "open the metrics file", errno);
  return {};
}

void MetricsWriter::write(const std::vector<std::pair<std::string, double>>& fields,
                          const std::vector<std::pair<std::string, int64_t>>& ints) {
  if (fd_ < 0) {
    if (status_.ok) status_ = Status::error(path_.empty() ? "metrics: write before open" : path_ + ": not open");
    return;
  }
  std::string line = metricsLine(fields, ints) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (status_.ok) status_ = ioError(path_, "write a metrics line", errno);
      return;
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace dtl::rt::io
