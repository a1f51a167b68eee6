#include "tools/dtlc/big_stack.h"

#include <pthread.h>

namespace dtl::cli {

namespace {
void* trampoline(void* arg) {
  (*static_cast<const std::function<void()>*>(arg))();
  return nullptr;
}
}  // namespace

void runWithStack(size_t bytes, const std::function<void()>& fn) {
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, bytes) != 0 ||
      pthread_create(&thread, &attr, trampoline, const_cast<std::function<void()>*>(&fn)) != 0) {
    fn();  // fall back to this thread's stack
    return;
  }
  pthread_attr_destroy(&attr);
  pthread_join(thread, nullptr);
}

}  // namespace dtl::cli
