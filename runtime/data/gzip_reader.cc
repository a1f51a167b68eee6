// GzReader: zlib's gz* interface over a file descriptor we open ourselves, so
// that open errors carry errno text and plain files can be sized with fstat
// instead of being read through.
#include "runtime/data/gzip_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace dtl::rt::data {

namespace {

constexpr int64_t kChunk = 64 << 10;

gzFile asGz(void* p) { return static_cast<gzFile>(p); }

// zlib prefixes its messages with the path it was given, which for gzdopen is
// a meaningless "<fd:3>"; our own messages already name the file.
std::string zlibMessage(gzFile gz) {
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  std::string s = msg ? msg : "unknown zlib error";
  if (s.rfind("<fd:", 0) == 0) {
    auto colon = s.find(": ");
    if (colon != std::string::npos) s = s.substr(colon + 2);
  }
  return s;
}

}  // namespace

GzReader::~GzReader() {
  if (gz_) gzclose(asGz(gz_));
  if (fd_ >= 0) ::close(fd_);
}

bool GzReader::open(const std::string& path, bool allow_gzip) {
  path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    // Refusing pipes and devices keeps a probe from blocking or reading forever (/dev/zero).
    error_ = "cannot open '" + path +
             "': " + (S_ISDIR(st.st_mode) ? std::string("Is a directory") : std::string("not a regular file"));
    ::close(fd);
    return false;
  }
  file_size_ = static_cast<int64_t>(st.st_size);
  if (!allow_gzip) {
    fd_ = fd;
    return true;
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    ::close(fd);
    error_ = "cannot open '" + path + "': out of memory in zlib";
    return false;
  }
  gz_ = gz;
  gzbuffer(gz, 128 << 10);
  compressed_ = gzdirect(gz) == 0;
  return true;
}

void GzReader::fail(const std::string& why) {
  if (error_.empty()) error_ = path_ + ": " + why;
}

int64_t GzReader::rawRead(void* buf, int64_t n) {
  if ((!gz_ && fd_ < 0) || !error_.empty()) return -1;
  auto* out = static_cast<char*>(buf);
  int64_t got = 0;
  if (fd_ >= 0) {
    while (got < n) {
      ssize_t r = ::read(fd_, out + got, static_cast<size_t>(std::min<int64_t>(n - got, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        fail(std::string("read error: ") + std::strerror(errno));
        return -1;
      }
      if (r == 0) break;
      got += r;
    }
    raw_pos_ += got;
    return got;
  }
  while (got < n) {
    unsigned want = static_cast<unsigned>(std::min<int64_t>(n - got, 1 << 30));
    int r = gzread(asGz(gz_), out + got, want);
    if (r < 0) {
      fail((compressed_ ? "cannot decompress: " : "read error: ") + zlibMessage(asGz(gz_)));
      return -1;
    }
    got += r;
    if (static_cast<unsigned>(r) < want) {
      int errnum = Z_OK;
      gzerror(asGz(gz_), &errnum);
      // Z_BUF_ERROR at EOF means the input ended inside a gzip member.
      if (errnum == Z_BUF_ERROR) {
        fail("gzip data ends early (the file is truncated)");
        return -1;
      }
      if (errnum != Z_OK) {
        fail("cannot decompress: " + zlibMessage(asGz(gz_)));
        return -1;
      }
      break;
    }
  }
  raw_pos_ += got;
  return got;
}

int64_t GzReader::read(void* buf, int64_t n) {
  if (n <= 0) return 0;
  auto* out = static_cast<char*>(buf);
  int64_t have = static_cast<int64_t>(buf_.size() - buf_start_);
  int64_t from_buf = std::min(have, n);
  if (from_buf > 0) {
    std::memcpy(out, buf_.data() + buf_start_, static_cast<size_t>(from_buf));
    buf_start_ += static_cast<size_t>(from_buf);
  }
  int64_t got = from_buf;
  if (got < n && !eof_) {
    int64_t r = rawRead(out + got, n - got);
    if (r < 0) return -1;
    if (r < n - got) eof_ = true;
    got += r;
  }
  pos_ += got;
  return got;
}

bool GzReader::fill() {
  if (eof_ || !error_.empty()) return false;
  if (buf_start_ > 0) {
    buf_.erase(0, buf_start_);
    buf_start_ = 0;
  }
  size_t old = buf_.size();
  buf_.resize(old + kChunk);
  int64_t r = rawRead(buf_.data() + old, kChunk);
  buf_.resize(old + static_cast<size_t>(std::max<int64_t>(r, 0)));
  if (r < kChunk) eof_ = true;
  return r > 0;
}

bool GzReader::readLine(std::string& line) {
  line.clear();
  if (!error_.empty()) return false;
  size_t scanned = buf_start_;
  for (;;) {
    size_t nl = buf_.find('\n', scanned);
    if (nl != std::string::npos) {
      line.assign(buf_, buf_start_, nl - buf_start_);
      pos_ += static_cast<int64_t>(nl + 1 - buf_start_);
      buf_start_ = nl + 1;
      break;
    }
    if (static_cast<int64_t>(buf_.size() - buf_start_) > kMaxLine) {
      fail("line " + std::to_string(lines_ + 1) + " is longer than 16 MiB (is this a text file?)");
      return false;
    }
    size_t before = buf_.size() - buf_start_;
    if (!fill()) {
      if (!error_.empty()) return false;
      if (buf_.size() == buf_start_) return false;       // clean end of data
      line.assign(buf_, buf_start_, std::string::npos);  // last line without '\n'
      pos_ += static_cast<int64_t>(line.size());
      buf_.clear();
      buf_start_ = 0;
      break;
    }
    scanned = buf_start_ + before;  // fill() compacts, so buf_start_ is 0 here
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++lines_;
  return true;
}

int64_t GzReader::skipToEnd() {
  if ((!gz_ && fd_ < 0) || !error_.empty()) return -1;
  int64_t rest = static_cast<int64_t>(buf_.size() - buf_start_);
  buf_.clear();
  buf_start_ = 0;
  if (!eof_) {
    if (!compressed_) {
      rest += std::max<int64_t>(file_size_ - raw_pos_, 0);
      raw_pos_ = file_size_;
    } else {
      std::vector<char> scratch(static_cast<size_t>(4 * kChunk));
      for (;;) {
        int64_t r = rawRead(scratch.data(), static_cast<int64_t>(scratch.size()));
        if (r < 0) return -1;
        rest += r;
        if (r < static_cast<int64_t>(scratch.size())) break;
      }
    }
    eof_ = true;
  }
  pos_ += rest;
  return rest;
}

}  // namespace dtl::rt::data
