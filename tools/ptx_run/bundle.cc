#include "tools/ptx_run/bundle.h"

#include <fstream>
#include <functional>
#include <sstream>

namespace dtl::ptxrun {

int64_t BundleCase::outputBytes() const {
  int64_t total = 0;
  for (const BundleBuffer& b : buffers)
    if (b.role == BundleBuffer::Role::Out) total += b.bytes;
  for (const BundleChunk& c : chunks) total += c.n * 4 * (1 + (c.a >= 0) + (c.b >= 0));
  return total;
}

namespace {

const char* roleName(BundleBuffer::Role r) {
  return r == BundleBuffer::Role::In ? "in" : r == BundleBuffer::Role::Out ? "out" : "scratch";
}

std::string located(const std::string& path, int line, const std::string& what) {
  return path + ":" + std::to_string(line) + ": " + what;
}

std::string oneLine(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

std::string rest(std::istringstream& in) {
  std::string text;
  std::getline(in >> std::ws, text);
  return text;
}

// Reads `path` line by line after its first, which must be `header`:
// item(line number, first word, the rest) for each non-empty line; the
// first error ends it.
std::string forEachItem(const std::string& path, const std::string& header,
                        const std::function<std::string(int, const std::string&, std::istringstream&)>& item) {
  std::ifstream in(path);
  if (!in) return "cannot read " + path;
  std::string line;
  if (!std::getline(in, line) || line != header) return located(path, 1, "does not start with `" + header + "`");
  for (int n = 2; std::getline(in, line); ++n) {
    std::istringstream fields(line);
    std::string word;
    if (!(fields >> word)) continue;
    if (std::string e = item(n, word, fields); !e.empty()) return e;
  }
  return "";
}

std::string readKernelOrBuffer(const std::string& path, int n, const std::string& word, std::istringstream& fields,
                               BundleCase* c) {
  if (word == "kernel") {
    BundleKernel k;
    if (!(fields >> k.name >> k.threads) || k.threads < 0) return located(path, n, "expected: kernel NAME THREADS");
    c->kernels.push_back(k);
    return "";
  }
  std::string role;
  BundleBuffer b;
  if (!(fields >> role >> b.bytes) || b.bytes < 0) return located(path, n, "expected: buffer ROLE BYTES");
  if (role == "in") {
    if (!(fields >> b.offset) || b.offset < -1)
      return located(path, n, "an input buffer needs its offset in inputs.bin (or -1)");
  } else if (role == "out") {
    b.role = BundleBuffer::Role::Out;
  } else if (role == "scratch") {
    b.role = BundleBuffer::Role::Scratch;
  } else {
    return located(path, n, "a buffer is in, out or scratch, not " + role);
  }
  c->buffers.push_back(b);
  return "";
}

}  // namespace

std::string writeManifest(const std::string& path, const std::vector<BundleCase>& cases) {
  std::ofstream out(path);
  out << "dtl-ptx-bundle 1\n";
  for (const BundleCase& c : cases) {
    if (c.kind == BundleCase::Kind::Update) {
      out << "update " << c.id << " " << c.ptx_file << " " << c.symbol << " " << c.scalars << " " << c.scalar_count
          << "\n";
      for (const BundleChunk& k : c.chunks)
        out << "chunk " << k.n << " " << k.param << " " << k.grad << " " << k.a << " " << k.b << "\n";
      continue;
    }
    out << "case " << c.id << " " << c.ptx_file << "\n";
    for (const BundleKernel& k : c.kernels) out << "kernel " << k.name << " " << k.threads << "\n";
    for (const BundleBuffer& b : c.buffers) {
      out << "buffer " << roleName(b.role) << " " << b.bytes;
      if (b.role == BundleBuffer::Role::In) out << " " << b.offset;
      out << "\n";
    }
  }
  out.flush();
  return out ? "" : "cannot write " + path;
}

std::string readManifest(const std::string& path, std::vector<BundleCase>* cases) {
  return forEachItem(path, "dtl-ptx-bundle 1", [&](int n, const std::string& word, std::istringstream& fields) {
    if (word == "case") {
      BundleCase c;
      if (!(fields >> c.id >> c.ptx_file)) return located(path, n, "expected: case ID FILE");
      cases->push_back(c);
    } else if (word == "update") {
      BundleCase c;
      c.kind = BundleCase::Kind::Update;
      if (!(fields >> c.id >> c.ptx_file >> c.symbol >> c.scalars >> c.scalar_count) || c.scalars < 0 ||
          c.scalar_count < 0)
        return located(path, n, "expected: update ID FILE SYMBOL OFFSET COUNT");
      cases->push_back(c);
    } else if (word == "chunk") {
      if (cases->empty() || cases->back().kind != BundleCase::Kind::Update)
        return located(path, n, "a chunk belongs to an update");
      BundleChunk k;
      if (!(fields >> k.n >> k.param >> k.grad >> k.a >> k.b) || k.n < 0 || k.param < 0 || k.grad < 0)
        return located(path, n, "expected: chunk N PARAM GRAD A B");
      cases->back().chunks.push_back(k);
    } else if (word == "kernel" || word == "buffer") {
      if (cases->empty() || cases->back().kind != BundleCase::Kind::Region)
        return located(path, n, word + " outside a case");
      return readKernelOrBuffer(path, n, word, fields, &cases->back());
    } else {
      return located(path, n, "unknown item " + word);
    }
    return std::string();
  });
}

std::string writeResults(const std::string& path, const std::string& device, const std::vector<CaseResult>& results) {
  std::ofstream out(path);
  out << "dtl-ptx-results 1\ndevice " << device << "\n";
  for (const CaseResult& r : results) {
    out << "case " << r.id;
    if (r.ok)
      out << " ok " << r.file << " " << r.offset << " " << r.bytes << "\n";
    else  // one line, whatever the message holds
      out << " error " << oneLine(r.error) << "\n";
  }
  out.flush();
  return out ? "" : "cannot write " + path;
}

std::string readResults(const std::string& path, std::string* device, std::vector<CaseResult>* results) {
  return forEachItem(path, "dtl-ptx-results 1", [&](int n, const std::string& word, std::istringstream& fields) {
    if (word == "device") {
      *device = rest(fields);
      return std::string();
    }
    if (word != "case") return located(path, n, "unknown item " + word);
    CaseResult r;
    std::string status;
    if (!(fields >> r.id >> status)) return located(path, n, "expected: case ID ok|error ...");
    if (status == "ok") {
      r.ok = true;
      if (!(fields >> r.file >> r.offset >> r.bytes)) return located(path, n, "expected: case ID ok FILE OFFSET BYTES");
    } else if (status == "error") {
      r.error = rest(fields);
    } else {
      return located(path, n, "a case is ok or error, not " + status);
    }
    results->push_back(r);
    return std::string();
  });
}

}  // namespace dtl::ptxrun
