// Buffer slots from liveness: every value a schedule stores in a slot gets
// one, reusing the slot of a value past its last use (best fit; a free slot
// too small for the value grows rather than a new one being added). A value
// lives from the instruction that writes it to the last one that reads it —
// for a collective's operand, until its group is waited for; a view keeps
// its source alive; what the caller reads after a run (`keep`) lives to the
// end. Each instruction lists the values it is the last reader of. `pool`
// are slots (sizes in words) that exist already and are free at the start:
// the evaluation schedule is placed in the training schedule's slots, so the
// two share one set of buffers; `reserved` ones of them are not free (the
// optimiser step's schedule leaves the slots holding the step's gradients).
#pragma once

#include <vector>

#include "core/program.h"

namespace dtl::program {

void assignSlots(prog::Program& p, prog::Schedule& s, const std::vector<bool>& keep,
                 const std::vector<int64_t>& pool = {}, const std::vector<bool>& reserved = {});

}  // namespace dtl::program
