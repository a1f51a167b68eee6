// A sequential reader for data files that may or may not be gzip-compressed:
// zlib decides from the first bytes, so callers need not branch on ".gz".
// Memory use is bounded (a fixed buffer, a capped line length) whatever the input.
#pragma once

#include <cstdint>
#include <string>

namespace dtl::rt::data {

class GzReader {
 public:
  static constexpr int64_t kMaxLine = 16 << 20;  // longer lines are treated as garbage

  GzReader() = default;
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Opens a regular file; on failure error() is e.g. "cannot open 'x.csv': No such file or directory".
  // allow_gzip = false reads the bytes as they are: binary data may start with
  // 1f 8b by chance (a u16 token 35615), and zlib would then try to inflate it.
  bool open(const std::string& path, bool allow_gzip = true);

  // Reads up to n bytes; fewer only at the end of the data. -1 on error (see error()),
  // including a gzip stream that stops early, which zlib would otherwise report as a quiet EOF.
  int64_t read(void* buf, int64_t n);

  // Consumes the rest of the data and returns how many bytes it held (-1 on error).
  // Plain files are answered from their size; gzip files are decompressed and counted.
  int64_t skipToEnd();

  // Next line without its "\n" or "\r\n". False at the end of data or on error
  // (then error() is non-empty).
  bool readLine(std::string& line);

  bool compressed() const { return compressed_; }
  int64_t fileSize() const { return file_size_; }  // bytes on disk
  int64_t position() const { return pos_; }        // uncompressed bytes handed out so far
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  int64_t rawRead(void* buf, int64_t n);
  bool fill();
  void fail(const std::string& why);

  void* gz_ = nullptr;  // gzFile, kept opaque so users need not include zlib.h
  int fd_ = -1;         // used instead of gz_ when gzip is not allowed
  std::string path_;
  std::string error_;
  bool compressed_ = false;
  int64_t file_size_ = 0;
  int64_t lines_ = 0;    // lines returned by readLine, for messages
  int64_t pos_ = 0;      // as seen by the caller
  int64_t raw_pos_ = 0;  // as taken from zlib (ahead of pos_ by what is buffered)
  // Look-ahead buffer used by readLine; read() drains it first.
  std::string buf_;
  size_t buf_start_ = 0;
  bool eof_ = false;
};

}  // namespace dtl::rt::data
