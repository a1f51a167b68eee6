// The NVPTX target run on a GPU and checked as the x86 JIT is: every op
// class, random regions and random gradient chains (NaN, ±inf and denormals
// among their inputs), and each region of the small samples' one-rank
// programs, compiled to PTX here, run by ptx_run where a GPU is, and compared
// with the reference kernels by the same oracle (region_oracle.h): each node
// of the probe (every node an output) against the reference of that node on
// the GPU's own operands, the region's outputs against the probe's bit for
// bit. The two steps share only files (tools/ptx_run/bundle.h), so the
// kernels can run on a machine that has a GPU but no LLVM:
//
//   ptx_check write BUNDLE [--quick]   PTX, kernels, buffers and inputs (--quick: fewer cases)
//   ptx_run BUNDLE RESULTS             on the GPU machine
//   ptx_check compare BUNDLE RESULTS   exit 1 on any problem, printing the first ones
//   ptx_check jit BUNDLE RESULTS       the x86 JIT's outputs as results: checks the checker
//   ptx_check write-timing BUNDLE      GPT-2 small's regions for `ptx_run --time` (no check)
//
// The cases are a fixed function of this file, so `compare` rebuilds them.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/emit_update.h"
#include "compiler/codegen/fuse_regions.h"
#include "compiler/codegen/ptx.h"
#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "tests/gpu/update_cases.h"
#include "tests/support/random_region.h"
#include "tests/support/region_oracle.h"
#include "tools/ptx_run/bundle.h"

namespace dtl::codegen::testing {
namespace {

namespace fs = std::filesystem;
using ptxrun::BundleBuffer;
using ptxrun::BundleCase;

constexpr uint64_t kRandomCases = 400, kGradientCases = 150;
// `write --quick` (a file `quick` in the bundle says so to jit and compare):
// a tenth of the random cases and the MLP sample alone, for the self-test.
constexpr uint64_t kQuickRandomCases = 40, kQuickGradientCases = 15;

// The samples whose regions are small enough to carry with their inputs
// (GPT-2's, at seq 1024 x 768, are assembled by fuse_regions_test instead).
const std::vector<std::pair<std::string, std::vector<std::string>>> kSamples = {
    {"synthetic_mlp.dtl", {}},
    {"diabetes_regression.dtl", {}},
    {"fashion_mnist_mlp.dtl", {"train.batch=32"}},
    {"char_gpt.dtl", {"train.batch=2"}},
};

std::vector<Region> sampleRegions(const std::string& file, const std::vector<std::string>& sets) {
  driver::Frontend fe;
  driver::FrontendOptions o;
  o.world = 1;
  o.sets = sets;
  if (fe.run(std::string(DTL_SOURCE_DIR) + "/samples/" + file, o, driver::Stop::Grad) != 0) {
    std::fprintf(stderr, "ptx_check: %s does not compile:\n%s", file.c_str(), fe.diagnostics().render().c_str());
    std::exit(2);
  }
  prog::Program p = program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0));
  std::vector<Region> regions;
  for (const FusedRegion& fr : fuseRegions(p).regions) regions.push_back(fr.region);
  return regions;
}

std::vector<Values> inputsFor(const Region& r, std::mt19937_64& rng, double special) {
  std::vector<Values> inputs;
  for (int in : r.inputs()) inputs.push_back(randomValues(r.node(in).shape.elements().value_or(0), rng, special));
  return inputs;
}

std::vector<RandomCase> gpuCases(bool quick) {
  std::vector<RandomCase> cases;
  std::mt19937_64 rng(7);
  for (const Region& r : opClassRegions()) cases.push_back({r, inputsFor(r, rng, 0.08)});
  for (uint64_t seed = 1; seed <= (quick ? kQuickRandomCases : kRandomCases); ++seed) cases.push_back(randomCase(seed));
  for (uint64_t seed = 1; seed <= (quick ? kQuickGradientCases : kGradientCases); ++seed)
    cases.push_back(randomGradientCase(seed));
  std::set<uint64_t> seen;
  for (const auto& [file, sets] : quick ? decltype(kSamples){kSamples[0]} : kSamples)
    for (const Region& r : sampleRegions(file, sets))
      if (seen.insert(regionHash(r)).second) cases.push_back({r, inputsFor(r, rng, 0.02)});
  return cases;
}

// The module ids of case k: its probe and, unless the region computes no
// node (then it is its own probe), the region as given.
std::string moduleId(size_t k, bool probe) { return "c" + std::to_string(k) + (probe ? ".probe" : ".plain"); }

// A case's inputs in inputs.bin once, for its probe and its plain module alike: their offsets.
std::vector<int64_t> writeInputs(const std::vector<Values>& inputs, std::ofstream& input_file, int64_t* input_bytes) {
  std::vector<int64_t> offsets;
  for (const Values& v : inputs) {
    offsets.push_back(*input_bytes);
    input_file.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    *input_bytes += static_cast<int64_t>(v.size() * sizeof(float));
  }
  return offsets;
}

std::string addModule(const Region& r, const std::string& id, const std::vector<int64_t>& input_offsets,
                      const fs::path& dir, std::vector<BundleCase>* out) {
  PtxModule m;
  std::string error;
  if (!compilePtx(r, &m, &error)) return id + ": " + error;
  BundleCase c;
  c.id = id;
  c.ptx_file = id + ".ptx";
  std::ofstream(dir / c.ptx_file) << m.ptx;
  for (const PtxKernel& k : m.kernels) c.kernels.push_back({k.name, k.threads});
  for (size_t i = 0; i < m.plan.buffers.size(); ++i) {
    const PlanBuffer& pb = m.plan.buffers[i];
    BundleBuffer b;
    b.bytes = pb.bytes();
    if (pb.role == PlanBuffer::Role::Input) {
      b.offset = input_offsets[i];
    } else {
      b.role = pb.role == PlanBuffer::Role::Output ? BundleBuffer::Role::Out : BundleBuffer::Role::Scratch;
    }
    c.buffers.push_back(b);
  }
  out->push_back(c);
  return "";
}

int64_t appendFloats(const std::vector<float>& v, std::ofstream& input_file, int64_t* input_bytes) {
  if (v.empty()) return -1;
  const int64_t at = *input_bytes;
  input_file.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  *input_bytes += static_cast<int64_t>(v.size() * sizeof(float));
  return at;
}

// `ptx_by_variant`: each variant's PTX, compiled once (100 cases share about 20).
std::string addUpdate(const UpdateCase& u, const std::string& id, const fs::path& dir,
                      std::map<std::string, std::string>* ptx_by_variant, std::ofstream& input_file,
                      int64_t* input_bytes, std::vector<BundleCase>* out) {
  std::string& ptx = (*ptx_by_variant)[u.variant.name()];
  std::string error;
  if (ptx.empty() && !updatePtx(u.variant, &ptx, &error)) return id + " (" + u.name + "): " + error;
  BundleCase c;
  c.kind = BundleCase::Kind::Update;
  c.id = id;
  c.ptx_file = id + ".ptx";
  c.symbol = updateSymbol(u.variant);
  std::ofstream(dir / c.ptx_file) << ptx;
  c.scalar_count = optim_step::kMaxScalars;
  c.scalars = appendFloats(std::vector<float>(u.scalars.v, u.scalars.v + optim_step::kMaxScalars), input_file, input_bytes);
  for (const UpdateChunk& k : u.in) {
    ptxrun::BundleChunk row;
    row.n = static_cast<int64_t>(k.param.size());
    // a zero-length row still needs param and grad pointers: one float of each
    row.param = appendFloats(k.param.empty() ? std::vector<float>{0} : k.param, input_file, input_bytes);
    row.grad = appendFloats(k.grad.empty() ? std::vector<float>{0} : k.grad, input_file, input_bytes);
    row.a = appendFloats(k.a, input_file, input_bytes);
    row.b = appendFloats(k.b, input_file, input_bytes);
    c.chunks.push_back(row);
  }
  out->push_back(c);
  return "";
}

int write(const fs::path& dir, bool quick) {
  fs::create_directories(dir);
  fs::remove(dir / "quick");
  if (quick) std::ofstream(dir / "quick") << "a tenth of the random cases, the MLP sample alone\n";
  std::ofstream input_file(dir / "inputs.bin", std::ios::binary);
  int64_t input_bytes = 0;
  std::vector<BundleCase> modules;
  const std::vector<RandomCase> cases = gpuCases(quick);
  for (size_t k = 0; k < cases.size(); ++k) {
    const Region& r = cases[k].region;
    const Region probe = probeOf(r);
    const std::vector<int64_t> offsets = writeInputs(cases[k].inputs, input_file, &input_bytes);
    std::string error = addModule(probe, moduleId(k, true), offsets, dir, &modules);
    if (error.empty() && regionHash(probe) != regionHash(r))
      error = addModule(r, moduleId(k, false), offsets, dir, &modules);
    if (!error.empty()) {
      std::fprintf(stderr, "ptx_check: %s\n%s", error.c_str(), printRegion(r).c_str());
      return 1;
    }
  }
  const std::vector<UpdateCase> updates = updateCases();
  std::map<std::string, std::string> update_ptx;
  for (size_t k = 0; k < updates.size(); ++k)
    if (std::string error =
            addUpdate(updates[k], "u" + std::to_string(k), dir, &update_ptx, input_file, &input_bytes, &modules);
        !error.empty()) {
      std::fprintf(stderr, "ptx_check: %s\n", error.c_str());
      return 1;
    }
  input_file.close();
  if (std::string e = ptxrun::writeManifest((dir / "manifest.txt").string(), modules); !e.empty()) {
    std::fprintf(stderr, "ptx_check: %s\n", e.c_str());
    return 1;
  }
  std::printf("ptx_check: %zu region cases and %zu updates, %zu modules, %.1f MB of inputs in %s\n", cases.size(),
              updates.size(), modules.size(),
              static_cast<double>(input_bytes) / 1e6, dir.c_str());
  return 0;
}

// `write-timing DIR`: GPT-2 small's one-rank regions (batch 4, seq 1024; tp
// and pp 1), each once, inputs filled on the device: for `ptx_run --time`.
int writeTiming(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "inputs.bin", std::ios::binary).close();
  std::vector<BundleCase> modules;
  std::set<uint64_t> seen;
  for (const Region& r : sampleRegions("gpt2_small.dtl", {"parallel.mesh.tp=1", "parallel.mesh.pp=1"})) {
    if (!seen.insert(regionHash(r)).second) continue;
    PtxModule m;
    std::string error;
    if (!compilePtx(r, &m, &error)) {
      std::fprintf(stderr, "ptx_check: %s: %s\n", r.name().c_str(), error.c_str());
      return 1;
    }
    BundleCase c;
    c.id = "g" + std::to_string(modules.size());
    c.ptx_file = c.id + ".ptx";
    std::ofstream(dir / c.ptx_file) << m.ptx;
    for (const PtxKernel& k : m.kernels) c.kernels.push_back({k.name, k.threads});
    for (const PlanBuffer& pb : m.plan.buffers) {
      BundleBuffer b;
      b.bytes = pb.bytes();
      b.offset = -1;
      b.role = pb.role == PlanBuffer::Role::Input    ? BundleBuffer::Role::In
               : pb.role == PlanBuffer::Role::Output ? BundleBuffer::Role::Out
                                                     : BundleBuffer::Role::Scratch;
      c.buffers.push_back(b);
    }
    modules.push_back(c);
    std::printf("%s %s\n", c.id.c_str(), r.name().c_str());
  }
  if (std::string e = ptxrun::writeManifest((dir / "manifest.txt").string(), modules); !e.empty()) {
    std::fprintf(stderr, "ptx_check: %s\n", e.c_str());
    return 1;
  }
  return 0;
}

// What the GPU wrote for each module, as the oracle's runner reads it.
class GpuOutputs {
 public:
  std::string load(const fs::path& bundle, const fs::path& results) {
    std::vector<BundleCase> modules;
    if (std::string e = ptxrun::readManifest((bundle / "manifest.txt").string(), &modules); !e.empty()) return e;
    for (const BundleCase& m : modules) expected_bytes_[m.id] = m.outputBytes();
    std::vector<ptxrun::CaseResult> got;
    if (std::string e = ptxrun::readResults((results / "results.txt").string(), &device_, &got); !e.empty()) return e;
    for (const ptxrun::CaseResult& r : got) {
      if (!r.ok) {
        errors_[r.id] = r.error;
        continue;
      }
      std::string& data = files_[r.file];
      if (data.empty()) {
        std::ifstream in(results / r.file, std::ios::binary);
        data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      if (r.offset < 0 || r.offset + r.bytes > static_cast<int64_t>(data.size()) || r.bytes != expected_bytes_[r.id])
        return "results for " + r.id + " do not fit " + r.file;
      bytes_[r.id] = data.substr(static_cast<size_t>(r.offset), static_cast<size_t>(r.bytes));
    }
    return "";
  }
  const std::string& device() const { return device_; }

  // A module's output bytes as ptx_run wrote them; null with *error set when it failed.
  const std::string* raw(const std::string& id, std::string* error) const {
    if (auto e = errors_.find(id); e != errors_.end()) {
      *error = "on the GPU: " + e->second;
      return nullptr;
    }
    auto b = bytes_.find(id);
    if (b == bytes_.end()) *error = "no GPU results for " + id;
    return b == bytes_.end() ? nullptr : &b->second;
  }

  // The runner for case k: the probe's outputs or the plain region's.
  RegionRunner runner(size_t k, uint64_t probe_hash) const {
    return [this, k, probe_hash](const Region& r, const std::vector<Values>&, Stats*, std::string* error) {
      std::string id = moduleId(k, regionHash(r) == probe_hash);
      return outputs(r, id, error);
    };
  }

 private:
  std::vector<Values> outputs(const Region& r, const std::string& id, std::string* error) const {
    const std::string* bytes = raw(id, error);
    if (!bytes) return {};
    const KernelPlan plan = planKernel(r);
    std::vector<Values> out;
    size_t at = 0;
    for (int o = 0; o < plan.outputs; ++o) {
      const PlanBuffer& pb = plan.buffers[static_cast<size_t>(plan.inputs + o)];
      Values v(static_cast<size_t>(pb.elements()));
      const char* src = bytes->data() + at;
      if (pb.dtype == DType::Bool)
        for (size_t e = 0; e < v.size(); ++e) v[e] = static_cast<float>(static_cast<uint8_t>(src[e]));
      else if (!v.empty())
        std::memcpy(v.data(), src, v.size() * sizeof(float));
      at += static_cast<size_t>(pb.bytes());
      out.push_back(std::move(v));
    }
    return out;
  }

  std::string device_;
  std::map<std::string, int64_t> expected_bytes_;
  std::map<std::string, std::string> files_, bytes_, errors_;
};

// The x86 JIT's outputs of every module, written as ptx_run writes the
// GPU's: a check of the checker (its reading, Bool outputs, the probe/plain
// pairing, the updates' layout) on a machine without a GPU.
class JitResults {
 public:
  explicit JitResults(const fs::path& results) : data_(results / "outputs-0.bin", std::ios::binary) {}

  void region(const Region& r, const std::string& id, const std::vector<Values>& inputs) {
    ptxrun::CaseResult res = begin(id);
    std::vector<Values> values = jitOutputs(r, inputs, nullptr, &res.error);
    const KernelPlan plan = planKernel(r);
    for (size_t o = 0; res.error.empty() && o < values.size(); ++o) {
      if (plan.buffers[static_cast<size_t>(plan.inputs) + o].dtype == DType::Bool)
        put(std::string(values[o].begin(), values[o].end()));
      else
        put(values[o]);
    }
    end(res);
  }

  void update(const UpdateCase& u, const std::string& id) {
    ptxrun::CaseResult res = begin(id);
    std::unique_ptr<UpdateKernel> kernel = compileUpdateX86(u.variant, &res.error);
    if (kernel) {
      std::vector<UpdateChunk> chunks = u.in;
      std::vector<optim_step::Chunk> table;
      for (UpdateChunk& c : chunks)
        table.push_back({c.param.data(), c.grad.data(), c.a.empty() ? nullptr : c.a.data(),
                         c.b.empty() ? nullptr : c.b.data(), static_cast<int64_t>(c.param.size())});
      kernel->run(table.data(), 0, static_cast<int64_t>(table.size()), u.scalars);
      for (const UpdateChunk& c : chunks)
        for (const std::vector<float>* v : {&c.param, &c.a, &c.b}) put(*v);
    }
    end(res);
  }

  std::string close(const fs::path& results) {
    data_.close();
    if (data_.fail()) return "cannot write " + (results / "outputs-0.bin").string();
    return ptxrun::writeResults((results / "results.txt").string(), "the x86 JIT (ptx_check jit)", out_);
  }

 private:
  ptxrun::CaseResult begin(const std::string& id) {
    ptxrun::CaseResult res;
    res.id = id;
    res.file = "outputs-0.bin";
    res.offset = at_;
    return res;
  }
  void put(const std::string& bytes) {
    data_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    at_ += static_cast<int64_t>(bytes.size());
  }
  void put(const std::vector<float>& v) {
    data_.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    at_ += static_cast<int64_t>(v.size() * sizeof(float));
  }
  void end(ptxrun::CaseResult& res) {
    res.ok = res.error.empty();
    res.bytes = res.ok ? at_ - res.offset : 0;
    out_.push_back(res);
  }

  std::ofstream data_;
  int64_t at_ = 0;
  std::vector<ptxrun::CaseResult> out_;
};

int jitResults(const fs::path& bundle, const fs::path& results) {
  fs::create_directories(results);
  JitResults jit(results);
  const std::vector<RandomCase> cases = gpuCases(fs::exists(bundle / "quick"));
  for (size_t k = 0; k < cases.size(); ++k) {
    const Region probe = probeOf(cases[k].region);
    jit.region(probe, moduleId(k, true), cases[k].inputs);
    if (regionHash(probe) != regionHash(cases[k].region)) jit.region(cases[k].region, moduleId(k, false), cases[k].inputs);
  }
  const std::vector<UpdateCase> updates = updateCases();
  for (size_t k = 0; k < updates.size(); ++k) jit.update(updates[k], "u" + std::to_string(k));
  if (std::string e = jit.close(results); !e.empty()) {
    std::fprintf(stderr, "ptx_check: %s\n", e.c_str());
    return 1;
  }
  return 0;
}

// The GPU's update against `fast`'s loop: bit for bit, any NaN for a NaN
// (which operand's payload an instruction keeps is the compiler's choice).
// "" or the first difference.
std::string compareUpdate(const UpdateCase& u, const std::string& bytes) {
  size_t at = 0;
  for (size_t k = 0; k < u.want.size(); ++k) {
    const UpdateChunk& w = u.want[k];
    for (const auto& [what, v] : {std::pair{"param", &w.param}, {"a", &w.a}, {"b", &w.b}}) {
      if (at + v->size() * 4 > bytes.size()) return "fewer outputs than the table holds";
      for (size_t i = 0; i < v->size(); ++i, at += 4) {
        float got;
        std::memcpy(&got, bytes.data() + at, 4);
        const float want = (*v)[i];
        if (std::memcmp(&got, &want, 4) == 0 || (std::isnan(got) && std::isnan(want))) continue;
        char line[200];
        std::snprintf(line, sizeof line, "chunk %zu %s[%zu]: %.9g on the GPU, %.9g by fast's loop", k, what, i,
                      static_cast<double>(got), static_cast<double>(want));
        return line;
      }
    }
  }
  return at == bytes.size() ? "" : "more outputs than the table holds";
}

int compare(const fs::path& bundle, const fs::path& results) {
  GpuOutputs gpu;
  if (std::string e = gpu.load(bundle, results); !e.empty()) {
    std::fprintf(stderr, "ptx_check: %s\n", e.c_str());
    return 2;
  }
  const std::vector<RandomCase> cases = gpuCases(fs::exists(bundle / "quick"));
  Stats stats;
  int failed = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    OracleOptions options;
    options.run = gpu.runner(k, regionHash(probeOf(cases[k].region)));
    std::string report;
    compareWithReference(cases[k].region, cases[k].inputs, &stats, &report, options);
    if (report.empty()) continue;
    if (++failed <= 10) std::printf("case %zu: %s\n", k, report.c_str());
  }
  std::printf("%s", formatStats(stats).c_str());
  std::printf("ptx_check: %zu region cases run on %s: %d with problems\n", cases.size(), gpu.device().c_str(), failed);
  const std::vector<UpdateCase> updates = updateCases();
  int unequal = 0;
  int64_t elements = 0;
  for (size_t k = 0; k < updates.size(); ++k) {
    std::string error;
    const std::string* bytes = gpu.raw("u" + std::to_string(k), &error);
    if (bytes) error = compareUpdate(updates[k], *bytes);
    for (const UpdateChunk& c : updates[k].want) elements += static_cast<int64_t>(c.param.size());
    if (!error.empty() && ++unequal <= 10) std::printf("update u%zu (%s): %s\n", k, updates[k].name.c_str(), error.c_str());
  }
  std::printf("ptx_check: %zu optimiser updates (%lld elements) on %s: %d not bitwise fast's\n", updates.size(),
              static_cast<long long>(elements), gpu.device().c_str(), unequal);
  return failed || unequal ? 1 : 0;
}

}  // namespace
}  // namespace dtl::codegen::testing

int main(int argc, char** argv) {
  namespace t = dtl::codegen::testing;
  if (argc == 3 && std::strcmp(argv[1], "write") == 0) return t::write(argv[2], false);
  if (argc == 4 && std::strcmp(argv[1], "write") == 0 && std::strcmp(argv[3], "--quick") == 0)
    return t::write(argv[2], true);
  if (argc == 4 && std::strcmp(argv[1], "compare") == 0) return t::compare(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "jit") == 0) return t::jitResults(argv[2], argv[3]);
  if (argc == 3 && std::strcmp(argv[1], "write-timing") == 0) return t::writeTiming(argv[2]);
  std::fprintf(stderr,
               "usage: ptx_check write BUNDLE [--quick] | ptx_check compare BUNDLE RESULTS | ptx_check jit BUNDLE RESULTS"
               " | ptx_check write-timing BUNDLE\n");
  return 2;
}
