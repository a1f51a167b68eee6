// Reads a rank's identity from launcher variables (env.h). Each source is a
// table of variable names; values are checked for being numbers and for
// agreeing with each other, and every error names the variables involved.
#include "runtime/launch/env.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace dtl::rt::launch {

namespace {

constexpr char kDefaultMasterAddr[] = "127.0.0.1";
constexpr int kDefaultMasterPort = 29500;

struct Reader {
  const EnvLookup& lookup;
  std::string& err;

  const char* raw(const char* name) const { return lookup(name); }

  // An unset variable is an error when `required`, else leaves `out` alone.
  bool integer(const char* name, int& out, bool required, int min = 0) {
    const char* v = lookup(name);
    if (v == nullptr) {
      if (required) err = std::string(name) + " is not set";
      return !required;
    }
    std::string s(v);
    int x = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      err = std::string(name) + " is '" + s + "', not a whole number";
      return false;
    }
    if (x < min) {
      err = std::string(name) + "=" + s + " must be at least " + std::to_string(min);
      return false;
    }
    out = x;
    return true;
  }
};

std::string assign(const char* name, int v) { return std::string(name) + "=" + std::to_string(v); }

// SLURM_TASKS_PER_NODE is a list like "2(x3),1": 2 tasks on each of three nodes, then 1.
bool slurmTasksOnNode(const std::string& spec, int node, int& tasks) {
  int index = 0;
  size_t at = 0;
  while (at < spec.size()) {
    size_t comma = spec.find(',', at);
    std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? spec.size() : comma + 1;
    int count = 0, repeat = 1;
    const char* b = item.data();
    const char* e = b + item.size();
    auto [p, ec] = std::from_chars(b, e, count);
    if (ec != std::errc() || count < 1) return false;
    if (p != e) {
      if (e - p < 4 || p[0] != '(' || p[1] != 'x' || e[-1] != ')') return false;
      auto [q, ec2] = std::from_chars(p + 2, e - 1, repeat);
      if (ec2 != std::errc() || q != e - 1 || repeat < 1) return false;
    }
    if (node < index + repeat) {
      tasks = count;
      return true;
    }
    index += repeat;
  }
  return false;
}

bool readTorchrun(Reader& r, RankEnv& env) {
  env.source = "torchrun";
  if (!r.integer("RANK", env.rank, true) || !r.integer("WORLD_SIZE", env.world_size, true, 1)) return false;
  env.local_rank = -1;
  env.local_world_size = -1;
  if (!r.integer("LOCAL_RANK", env.local_rank, false) ||
      !r.integer("LOCAL_WORLD_SIZE", env.local_world_size, false, 1))
    return false;
  if (env.local_rank < 0 || env.local_world_size < 0) {
    // Set by hand rather than by torchrun: assume one node.
    if (env.local_rank < 0) env.local_rank = env.rank;
    if (env.local_world_size < 0) env.local_world_size = env.world_size;
    env.note = "LOCAL_RANK or LOCAL_WORLD_SIZE is not set; assuming every rank runs on this node";
  }
  return true;
}

bool readOpenMpi(Reader& r, RankEnv& env) {
  env.source = "OpenMPI";
  return r.integer("OMPI_COMM_WORLD_RANK", env.rank, true) &&
         r.integer("OMPI_COMM_WORLD_SIZE", env.world_size, true, 1) &&
         r.integer("OMPI_COMM_WORLD_LOCAL_RANK", env.local_rank, true) &&
         r.integer("OMPI_COMM_WORLD_LOCAL_SIZE", env.local_world_size, true, 1);
}

bool readSlurm(Reader& r, RankEnv& env) {
  env.source = "Slurm";
  if (!r.integer("SLURM_PROCID", env.rank, true) || !r.integer("SLURM_NTASKS", env.world_size, true, 1) ||
      !r.integer("SLURM_LOCALID", env.local_rank, true))
    return false;
  if (r.raw("SLURM_NTASKS_PER_NODE") != nullptr) return r.integer("SLURM_NTASKS_PER_NODE", env.local_world_size, true, 1);
  const char* spec = r.raw("SLURM_TASKS_PER_NODE");
  if (spec == nullptr) {
    r.err = "SLURM_PROCID is set but neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is";
    return false;
  }
  int node = 0;
  if (!r.integer("SLURM_NODEID", node, false)) return false;
  if (!slurmTasksOnNode(spec, node, env.local_world_size)) {
    r.err = "SLURM_TASKS_PER_NODE is '" + std::string(spec) + "', which does not say how many tasks node " +
            std::to_string(node) + " (SLURM_NODEID) runs";
    return false;
  }
  return true;
}

// MASTER_ADDR / MASTER_PORT; for OpenMPI and Slurm they may default on one node.
bool readMaster(Reader& r, RankEnv& env, bool required) {
  const char* addr = r.raw("MASTER_ADDR");
  const char* port = r.raw("MASTER_PORT");
  if (addr != nullptr && *addr == '\0') {
    r.err = "MASTER_ADDR is set but empty";
    return false;
  }
  if (port != nullptr) {
    if (!r.integer("MASTER_PORT", env.master_port, true, 1)) return false;
    if (env.master_port > 65535) {
      r.err = "MASTER_PORT=" + std::string(port) + " is not a port number (1 to 65535)";
      return false;
    }
  }
  if (addr != nullptr && port != nullptr) {
    env.master_addr = addr;
    return true;
  }
  std::string missing = addr == nullptr && port == nullptr ? "MASTER_ADDR and MASTER_PORT are"
                        : addr == nullptr                  ? "MASTER_ADDR is"
                                                           : "MASTER_PORT is";
  if (required) {
    r.err = missing + " not set (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and "
                      "MASTER_PORT; set them all when starting ranks by hand)";
    return false;
  }
  if (addr == nullptr && env.local_world_size < env.world_size) {
    r.err = "MASTER_ADDR is not set, but the " + std::to_string(env.world_size) + " ranks span more than one node (" +
            std::to_string(env.local_world_size) +
            " on this one): set MASTER_ADDR (and MASTER_PORT) to rank 0's host so every rank can reach the store";
    return false;
  }
  env.master_addr = addr != nullptr ? addr : kDefaultMasterAddr;
  if (port == nullptr) env.master_port = kDefaultMasterPort;
  if (!env.note.empty()) env.note += "; ";
  env.note += missing + " not set; using the store at " + env.master_addr + ":" + std::to_string(env.master_port) +
              (addr == nullptr ? " on this node" : "");
  return true;
}

bool checkConsistent(const RankEnv& env, std::string& err, const std::array<const char*, 4>& names) {
  if (env.rank >= env.world_size) {
    err = assign(names[0], env.rank) + " is not below " + assign(names[1], env.world_size);
  } else if (env.local_rank >= env.local_world_size) {
    err = assign(names[2], env.local_rank) + " is not below " + assign(names[3], env.local_world_size);
  } else if (env.local_world_size > env.world_size) {
    err = assign(names[3], env.local_world_size) + " is larger than " + assign(names[1], env.world_size);
  }
  return err.empty();
}

// DTL_STORE_PORT moves dtl's store off MASTER_PORT. Recent torchrun keeps
// its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); then
// dtl's defaults to the port after it.
bool readStorePort(Reader& r, RankEnv& env) {
  if (const char* p = r.raw(kEnvStorePort)) {
    if (!r.integer(kEnvStorePort, env.master_port, true, 1)) return false;
    if (env.master_port > 65535) {
      r.err = std::string(kEnvStorePort) + "=" + p + " is not a port number (1 to 65535)";
      return false;
    }
    return true;
  }
  const char* agent = r.raw("TORCHELASTIC_USE_AGENT_STORE");
  if (env.source != "torchrun" || agent == nullptr || std::string(agent) != "True") return true;
  if (env.master_port == 65535) {
    r.err = "torchrun's own store holds MASTER_PORT=65535, so dtl's store needs another: set DTL_STORE_PORT";
    return false;
  }
  env.master_port += 1;
  if (!env.note.empty()) env.note += "; ";
  env.note += "torchrun's own store holds MASTER_PORT=" + std::to_string(env.master_port - 1) +
              ", so dtl's store uses port " + std::to_string(env.master_port) + " (set DTL_STORE_PORT to choose)";
  return true;
}

bool readDtlExtras(Reader& r, RankEnv& env) {
  const char* token = r.raw(kEnvToken);
  if (token == nullptr || *token == '\0') {
    r.err = std::string(kEnvToken) + " is not set: every rank of a job needs the same secret token to join its "
            "store (dtlc run sets it; with " + env.source +
            ", export one to every rank, e.g. DTL_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'))";
    return false;
  }
  env.token = token;
  const char* launched = r.raw(kEnvLaunched);
  env.launcher_hosts_store = launched != nullptr && std::string(launched) == "1";
  if (!readStorePort(r, env)) return false;
  if (!r.integer(kEnvRestartCount, env.restart_count, false)) return false;
  interfaceFromEnv(r.lookup, env.iface, env.iface_from);
  if (const char* t = r.raw(kEnvJobStarted)) env.job_started = std::strtoll(t, nullptr, 10);
  if (const char* t = r.raw(kEnvJoinTimeout)) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (*t == '\0' || *end != '\0' || !std::isfinite(s) || s <= 0) {
      r.err = std::string(kEnvJoinTimeout) + " is '" + t + "', not a positive number of seconds";
      return false;
    }
    env.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(std::min(s, 1e9) * 1000));
  }
  return true;
}

}  // namespace

void interfaceFromEnv(const EnvLookup& lookup, std::string& iface, std::string& iface_from) {
  iface.clear();
  iface_from.clear();
  for (const char* name : {kEnvSocketIfname, "GLOO_SOCKET_IFNAME"}) {
    const char* v = lookup(name);
    if (v == nullptr || *v == '\0') continue;
    std::string s = v;
    iface = s.substr(0, s.find(','));
    iface_from = std::string(name) + "=";
    return;
  }
}

bool rankEnvPresent(const EnvLookup& lookup) {
  return lookup("RANK") != nullptr || lookup("OMPI_COMM_WORLD_RANK") != nullptr || lookup("SLURM_PROCID") != nullptr;
}

bool rankEnvFrom(const EnvLookup& lookup, RankEnv& env, std::string& err) {
  env = RankEnv{};
  err.clear();
  Reader r{lookup, err};
  // The variables naming rank, world size, local rank and local world size.
  std::array<const char*, 4> names{};
  bool ok = false;
  if (lookup("RANK") != nullptr || lookup("WORLD_SIZE") != nullptr) {
    names = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
    ok = readTorchrun(r, env);
  } else if (lookup("OMPI_COMM_WORLD_RANK") != nullptr) {
    names = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE"};
    ok = readOpenMpi(r, env);
  } else if (lookup("SLURM_PROCID") != nullptr) {
    names = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
             lookup("SLURM_NTASKS_PER_NODE") != nullptr ? "SLURM_NTASKS_PER_NODE" : "SLURM_TASKS_PER_NODE"};
    ok = readSlurm(r, env);
  } else {
    err = "no rank variables are set: expected RANK and WORLD_SIZE (dtlc run, torchrun), OMPI_COMM_WORLD_RANK "
          "(mpirun) or SLURM_PROCID (srun)";
    return false;
  }
  return ok && checkConsistent(env, err, names) && readMaster(r, env, env.source == "torchrun") &&
         readDtlExtras(r, env);
}

bool rankEnvFromEnvironment(RankEnv& env, std::string& err) {
  return rankEnvFrom([](const char* name) -> const char* { return std::getenv(name); }, env, err);
}

}  // namespace dtl::rt::launch
