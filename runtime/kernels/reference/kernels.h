// Every reference kernel: the plain, obviously-correct C++ of each primitive
// of language.md §5, forward and backward, used as the oracle the fast kernels
// are tested against. Values are held in double; nothing here is fast.
#pragma once

#include "runtime/kernels/reference/attention.h"
#include "runtime/kernels/reference/contract.h"
#include "runtime/kernels/reference/convert.h"
#include "runtime/kernels/reference/dropout.h"
#include "runtime/kernels/reference/elementwise.h"
#include "runtime/kernels/reference/embed.h"
#include "runtime/kernels/reference/losses.h"
#include "runtime/kernels/reference/normalize.h"
#include "runtime/kernels/reference/reduce.h"
#include "runtime/kernels/reference/reshape.h"
#include "runtime/kernels/reference/softmax.h"
#include "runtime/kernels/reference/tensor.h"
