// The checked spec: what sema hands to the stages after it. Every number here
// is resolved (dims, overrides, defaults); every entry keeps the location of
// the source line that produced it so later passes can say *why*.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/diag/source.h"
#include "compiler/sema/op_trace.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace dtl::sema {

using diag::Loc;

struct ParamInfo {
  std::string path;   // blocks.attn.wq
  Shape shape;        // stacked params lead with the repeat dim
  DType dtype = DType::F32;
  std::string init;   // normal(std = 0.02)
  Loc loc;
};

struct InputInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  Loc loc;
};

// A named model value (bindings, loss, metrics) with its inferred type.
struct ValueInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  bool is_metric = false;
  Loc loc;
};

struct Model {
  std::string name;
  Loc loc;
  std::vector<Dim> dims;  // declared in the model body, in order
  std::vector<ParamInfo> params;
  std::vector<InputInfo> inputs;
  std::vector<ValueInfo> values;
  int64_t parameters = 0;       // total elements
  int64_t parameter_bytes = 0;  // total bytes at each param's dtype
  // Every dim name that occurs anywhere in the model with its size.
  std::map<std::string, int64_t> all_dims;
  // The leading dims of stacked (repeat) parameters.
  std::vector<std::string> repeat_dims;
  // Sub-layer paths (for `recompute = PATH`).
  std::vector<std::string> layer_paths;
  // Every tensor operation as sema evaluated it: what lowering reads.
  OpTrace ops;
};

struct DataField {
  std::string name;      // the model input it feeds
  std::string source;    // idx, csv, npy, safetensors, text, tokens, synthetic
  std::string path;      // resolved; empty for synthetic
  std::string transform; // "/ 255" etc., as written
  int64_t samples = -1;  // -1 unknown (synthetic)
  int64_t sample_elements = -1;
  std::string file_dtype;
  Loc loc;
  // The source's arguments, resolved, for the loader.
  std::vector<std::pair<char, double>> transforms;  // in the order they apply
  std::vector<int64_t> csv_columns;                  // empty = all
  bool csv_header = true;
  int64_t csv_skip = 0;
  char csv_delimiter = ',';
  std::string key;                                   // safetensors
  int64_t seq = 0;                                   // text, tokens
  std::string token_dtype = "u16";
  int64_t seed = 0;                                  // synthetic
};

struct DataSplit {
  std::string name;  // train / eval
  std::vector<DataField> fields;
  Loc loc;
};

struct DataSpec {
  bool present = false;
  std::vector<DataSplit> splits;
  bool shuffle = true;
  bool drop_last = true;
};

struct Every {
  bool present = false;
  int64_t count = 0;
  std::string unit;  // steps | epochs
};

struct TrainSpec {
  bool present = false;
  int64_t batch = 1;
  int64_t accumulate = 1;
  std::optional<int64_t> epochs;
  std::optional<int64_t> steps;
  std::string optimizer = "sgd";
  std::map<std::string, double> optimizer_args;  // betas as beta1/beta2
  std::string schedule = "constant";
  std::map<std::string, double> schedule_args;
  std::optional<double> clip;
  std::string on_nonfinite = "stop";  // stop | skip (a step with a non-finite loss or gradient)
  int64_t replica_check = 100;        // steps between comparisons of replicas' hashes; 0 = never
  DType precision = DType::F32;
  int64_t seed = 0;
  Every log_every;
  Every eval_every;
  Every checkpoint_every;
  std::string checkpoint_dir;  // as written: relative to the working folder, like --resume
  int64_t checkpoint_keep = 0; // 0 = keep all
  std::map<std::string, Loc> where;  // each setting given: its key in the spec or its --set

  // The state tensors the optimiser keeps per parameter (runtime/optim/optimizer.h):
  // adam and adamw two, sgd one with momentum, else none.
  int stateTensorsPerParam() const {
    if (optimizer != "sgd") return 2;
    auto m = optimizer_args.find("momentum");
    return m != optimizer_args.end() && m->second != 0 ? 1 : 0;
  }
};

struct MeshAxisSpec {
  std::string name;
  int64_t size = 0;  // 0 while `auto` is unresolved (no --world)
  bool is_auto = false;
  Loc loc;
};

struct SplitSpec {
  std::string dim;
  std::string axis;
  Loc loc;       // `split`
  Loc axis_loc;  // the axis' name, where the rule ends
};

struct ParallelSpec {
  bool present = false;
  int64_t world = 0;  // from --world; 0 = not given
  std::vector<MeshAxisSpec> mesh;
  std::vector<SplitSpec> splits;
  std::string pipeline;  // "", gpipe, 1f1b
  int64_t microbatches = 0;
  std::string pipeline_axis;
  int64_t zero = 0;
  std::string zero_axis;  // the axis `split batch over` names: ZeRO shards over it
  int64_t prefetch = 1;   // zero = 3: layers whose parameters are gathered ahead of use
  int64_t bucket_bytes = 25ll << 20;
  bool overlap = true;
  DType reduce_dtype = DType::F32;
  std::string recompute;
  std::map<std::string, Loc> where;  // each setting given: its key in the spec or its --set
};

struct Spec {
  std::string file;  // the spec's path as given
  Model model;
  DataSpec data;
  TrainSpec train;
  ParallelSpec parallel;
};

}  // namespace dtl::sema
