// embed: rows of a table looked up by integer ids, and its scatter-add
// gradient. Ids come from user data, so a bad id is a Status, never an abort.
#pragma once

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// table [vocab, rest…] (float), ids [ids dims…] (integer) → out [ids dims…, rest…].
// An id outside [0, vocab) fails, naming its position and value. The table
// may be a window of a larger one (a rank's piece): rows [first, first +
// rows held) of `whole` (0: the table is whole); ids index the whole table
// and ids of rows outside the window give zero rows.
Status embed(const Tensor& table, const Tensor& ids, Tensor* out, int64_t first = 0, int64_t whole = 0);

// dtable [table_shape]: each dy row added into the row its id selected
// (repeated ids accumulate). Checks the ids again, as embed does; windowed
// as embed.
Status embedBackward(const Shape& table_shape, const Tensor& ids, const Tensor& dy, Tensor* dtable, int64_t first = 0,
                     int64_t whole = 0);

// The same gradient added to `base` (another gradient of the table, e.g. a
// tied output projection's): each selected row of dtable is base's row plus
// the sum of its dy rows (summed from zero first, so the result is the
// unfused `base + embedBackward(…)` bit for bit); rows no id selects are
// base's as they are.
Status embedBackwardInto(const Tensor& base, const Tensor& ids, const Tensor& dy, Tensor* dtable, int64_t first = 0,
                         int64_t whole = 0);

}  // namespace dtl::rt::ref
