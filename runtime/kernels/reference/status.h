// How reference kernels fail. Bad user data (an id or label out of range) comes
// back as a Status with a sentence a person can act on; a broken invariant (a
// shape the compiler should have rejected) aborts through DTL_REF_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dtl::rt::ref {

struct Status {
  bool ok = true;
  std::string message;
  static Status error(std::string m) { return Status{false, std::move(m)}; }
};

[[noreturn]] inline void checkFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: reference kernel invariant failed: %s: %s\n", file, line, cond, msg.c_str());
  std::abort();
}

}  // namespace dtl::rt::ref

// `msg` is evaluated only on failure, so it may build a string freely.
#define DTL_REF_CHECK(cond, msg) \
  ((cond) ? (void)0 : ::dtl::rt::ref::checkFailed(__FILE__, __LINE__, #cond, (msg)))
#define DTL_REF_FAIL(msg) ::dtl::rt::ref::checkFailed(__FILE__, __LINE__, "unreachable", (msg))
