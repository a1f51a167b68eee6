#include "tools/dtlc/checkpoint_params.h"

#include <sys/stat.h>

#include <cstring>

#include "runtime/io/checkpoint_store.h"

namespace dtl::cli {

namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The checkpoint DIR names, loaded and verified: DIR itself when it holds
// params.safetensors, else the newest intact one its index.json lists.
rt::io::Status loadCheckpoint(std::string dir, rt::io::CheckpointContents& c, LoadedParams& out) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (exists(dir + "/params.safetensors")) {
    const size_t slash = dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : dir.substr(0, slash);
    const std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
    std::string warning;
    rt::io::Status s = rt::io::CheckpointStore::load(parent, name, c, &warning);
    if (!warning.empty()) out.warnings.push_back(warning);
    out.checkpoint = dir;
    return s;
  }
  if (!exists(dir)) return rt::io::Status::error("no such folder");
  if (!exists(dir + "/index.json"))
    return rt::io::Status::error(
        "not a checkpoint: it holds neither index.json nor params.safetensors; give the spec's checkpoint folder "
        "(e.g. runs/x) or one checkpoint in it (runs/x/step-00000500)");
  rt::io::LoadReport report;
  rt::io::Status s = rt::io::CheckpointStore::loadNewestIntact(dir, c, report);
  for (const std::string& skipped : report.skipped) out.warnings.push_back("passed over " + skipped);
  if (!report.warning.empty()) out.warnings.push_back(report.warning);
  out.checkpoint = dir + "/" + report.name;
  return s;
}

}  // namespace

bool loadCheckpointParams(const std::string& prefix, const std::string& dir, const sema::Model& model,
                          LoadedParams& out, std::string& err) {
  rt::io::CheckpointContents c;
  rt::io::Status s = loadCheckpoint(dir, c, out);
  if (!s.ok) {
    err += prefix + dir + ": " + s.message + "\n";
    return false;
  }
  std::map<std::string, const rt::io::TensorBlob*> by_name;
  for (const rt::io::TensorBlob& b : c.params) by_name[b.name] = &b;
  bool ok = true;
  const std::string where = prefix + out.checkpoint + ": ";
  for (const sema::ParamInfo& p : model.params) {
    auto it = by_name.find(p.path);
    std::vector<int64_t> want;
    for (const Dim& d : p.shape.dims) want.push_back(d.size);
    if (it == by_name.end()) {
      err += where + "has no tensor for parameter `" + p.path + "` " + p.shape.str() + " of model " + model.name + "\n";
      ok = false;
      continue;
    }
    const rt::io::TensorBlob& b = *it->second;
    if (b.dtype != "F32" || b.shape != want) {
      err += where + "tensor `" + p.path + "` is " + b.dtype + shapeText(b.shape) + " but the spec's parameter is " +
             p.shape.str() + "\n";
      ok = false;
    } else {
      std::vector<float>& v = out.values[p.path];
      v.resize(b.bytes.size() / 4);
      if (!v.empty()) std::memcpy(v.data(), b.bytes.data(), b.bytes.size());
    }
    by_name.erase(it);
  }
  for (const auto& [name, b] : by_name) {
    err += where + "tensor `" + name + "` is not a parameter of model " + model.name + "\n";
    ok = false;
  }
  if (!ok)
    err += prefix + dir + ": the checkpoint does not fit the spec's model: was it trained from another spec, "
           "or with other --set's? (give the same --set's here)\n";
  return ok;
}

}  // namespace dtl::cli
