// The per-rank program (shared by compiler and runtime): what one rank runs,
// as data. The program planner (compiler/program/plan_program.cc) makes it
// from the laid-out training graph and the rank's mesh coordinates; the
// executor (runtime/exec) only follows it; `dtlc check --emit=program`
// prints it and `dtlc plan` reads its memory.
//
// - `nodes` are the laid-out graph's nodes (same ids) in their local form:
//   every shape is this rank's local shape (core/placement.h localShape).
// - Every collective belongs to a communication group started and waited
//   as one: a gradient bucket (members packed in one flat buffer), or a
//   single collective. A group starts when its `start_after` value is ready
//   and is waited for right before the first instruction that reads one of
//   its results (or at the end of the run), so bucket overlap and, later,
//   prefetching are the same mechanism.
// - Three schedules: `train` (forward and backward), `eval` (the forward
//   pass and what makes the loss and metrics global) and `update` (the
//   optimiser's step on this rank's pieces). Each gives every value its
//   storage and numbers the executor's buffer slots from liveness.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/placement.h"

namespace dtl::prog {

// Where a value is during a run of one schedule.
struct Storage {
  enum Kind : uint8_t {
    None,    // not computed by this schedule
    Slot,    // buffer slot `index` (the executor allocates each slot once)
    Param,   // the caller's parameter memory, bound by path
    Alias,   // element `offset` of value `index`'s storage: a reshape, a leading-dim slice of a
             // parameter, a stacked copy's gradient computed into its block of the stack
    Group,   // element `offset` of communication group `index`'s flat buffer
    Output,  // a parameter's gradient: the caller's memory when bound, else a buffer of its own
  } kind = None;
  int index = -1;
  int64_t offset = 0;
};

struct Instr {
  enum Kind : uint8_t {
    Run,    // compute (or feed, or view) node `id`
    Start,  // start communication group `id`
    Wait,   // wait for communication group `id`
    Fused,  // run fused region `id` (Program::fused): one kernel computing its outputs
  } kind = Run;
  int id = -1;
  std::vector<int> frees;  // values whose storage is free once this instruction is done
};

struct Group {
  int id = 0;
  ir::Op op = ir::Op::AllReduce;
  std::string axis;
  std::vector<int> members;  // collective nodes, in production order
  int bucket = -1;           // the gradient bucket it is (graph.buckets), or -1: a single collective
  int start_after = -1;      // the value whose readiness starts it
  // The group's own buffer: a bucket's flat buffer; the receive blocks of an
  // all-gather of a non-leading dim or of uneven pieces; a reduce-scatter's
  // packed blocks and its own; an all-to-all's send and receive blocks; a
  // max all-reduce's gathered values; else 0 (the result is written directly).
  int64_t elements = 0;
  // The buffer is needed only from the group's start to its wait, and lives
  // in a buffer slot of the schedule that runs it (Schedule::group_slot);
  // otherwise it is the group's for the whole run: an all-reduce bucket,
  // whose members are views of it, and ZeRO-1's buckets, which keep the
  // step's gradients.
  bool transient = false;
};

// A fused region (compiler/codegen/fuse_regions.h), run as one kernel where
// its first node ran: it reads `inputs` and writes `outputs`; its other
// members are never stored (Storage::None).
struct Fused {
  std::vector<int> nodes;    // the members it computes, in the order they ran
  std::vector<int> folded;   // members folded into it: scalar constants, Aligns its members read through
  std::vector<int> inputs;   // values from outside, in the region's input order
  std::vector<int> outputs;  // members read outside it, in the region's output order
  // Members of other regions it computes again from their operands rather
  // than read (a norm's output in its gradient's region, which reads the
  // norm's input anyway): the other region need not write them.
  std::vector<int> recomputed;
  bool operator==(const Fused& o) const {
    return nodes == o.nodes && folded == o.folded && inputs == o.inputs && outputs == o.outputs &&
           recomputed == o.recomputed;
  }
};

struct Schedule {
  std::vector<Instr> instrs;
  std::vector<Storage> storage;      // per node
  std::vector<int64_t> slot_words;   // per buffer slot: its size in 4-byte words
  std::vector<int> group_slot;       // per group: the slot of its transient buffer here, or -1
  int64_t slotBytes() const;  // saturates at INT64_MAX
};

struct Program {
  std::vector<layout::MeshAxis> mesh;
  std::vector<int64_t> coords;  // this rank's place on each axis
  std::vector<ir::Node> nodes;  // local form, ids of the laid-out graph
  std::vector<std::vector<layout::Placement>> placement;  // per node, per axis
  std::vector<Group> groups;
  Schedule train, eval;
  // The optimiser step: every Update node, run once per optimiser step after
  // the step's micro-batches (and clipping), on this rank's pieces of the
  // parameters with the step's gradients and optimiser state the caller binds.
  Schedule update;
  int loss = -1;
  int forward_end = 0;
  std::vector<std::pair<std::string, int>> metrics;
  std::vector<int> outputs;  // the graph's: values read whole after a run (Executor::tensor)
  std::vector<std::pair<std::string, int>> grads;  // parameter path → its gradient's node
  std::vector<ir::Bucket> buckets;                 // the bucketing pass's, for reporting
  // The fused regions the schedules' Fused instructions run (empty unless
  // the program was planned for fused kernels: `--kernels jit`).
  std::vector<Fused> fused;

  const ir::Node& operator[](int id) const { return nodes[static_cast<size_t>(id)]; }
  // The executor's buffer slots: the schedules number theirs from 0 and
  // never run at once, so slot k is as large as the largest of them (the
  // update's leave alone the training slots that hold the step's gradients).
  std::vector<int64_t> arenaWords() const;
  int64_t arenaBytes() const;   // saturates at INT64_MAX
  int64_t groupBytes() const;  // the buffers groups hold for the whole run; saturates at INT64_MAX
};

// The number `dtlc plan` gives each group, by group id: 1, 2, … in the order
// the collectives start (the value that starts them; a bucket before a single
// collective at the same point). Errors about a collective name it by this
// number, so it can be found in the plan.
std::vector<int> collectiveNumbers(const Program& p);

// ZeRO's flat pieces on the wire: a value of local shape `local` cut along
// flat dim `flat` over `ranks` travels as blocks of `outer` rows (its kept,
// stacked dims) of the largest piece each — every rank's block padded to
// the same size.
int64_t flatBlock(const Shape& local, const std::string& flat, int64_t ranks);

// `dtlc check --emit=program`: the mesh and coordinates, each schedule's
// instructions with the node, its local shape and storage, and what each
// instruction frees; slot and buffer totals.
std::string printProgram(const Program& p);

}  // namespace dtl::prog
