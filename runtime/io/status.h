// The result of a recoverable runtime I/O operation: ok, or a message a person
// can act on that names the file and says what went wrong (errno text included).
#pragma once

#include <string>

namespace dtl::rt::io {

struct Status {
  bool ok = true;
  std::string message;

  static Status error(std::string message) { return Status{false, std::move(message)}; }
};

}  // namespace dtl::rt::io
