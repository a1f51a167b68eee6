// A Store in anonymous shared memory, for ranks that are processes forked
// from one parent (the all-reduce bench, multi-process tests): create it
// before fork() and every child shares it. A fixed table (256 keys, values up
// to 4 KiB) behind a robust process-shared mutex. Not for unrelated
// processes: those use the TCP store.
#pragma once

#include <memory>

#include "runtime/comm/store.h"

namespace dtl::rt::comm {

std::shared_ptr<Store> makeForkSharedStore();

}  // namespace dtl::rt::comm
