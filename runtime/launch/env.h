// Who this process is in a job: its rank, the world size and where the
// rendezvous store listens, read from the variables the launcher that started
// it sets — dtl's own launcher and torchrun (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), mpirun (OMPI_COMM_WORLD_*) or
// Slurm's srun (SLURM_PROCID, SLURM_NTASKS, ...) — plus DTL_JOB_TOKEN.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <string>

namespace dtl::rt::launch {

struct RankEnv {
  int rank = 0, local_rank = 0, world_size = 1, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // the dtl store's port: MASTER_PORT unless DTL_STORE_PORT says otherwise
  std::string token;  // DTL_JOB_TOKEN: every rank presents it to the store

  std::string source;                 // "torchrun", "OpenMPI" or "Slurm": whose variables were read
  bool launcher_hosts_store = false;  // DTL_LAUNCHED=1: dtl's launcher runs the store; else rank 0 does
  int restart_count = 0;              // DTL_RESTART_COUNT: how often the launcher restarted the ranks
  int64_t job_started = 0;            // DTL_JOB_STARTED: when the launcher started the job (Unix seconds), or 0
  std::chrono::milliseconds join_timeout{300000};  // DTL_JOIN_TIMEOUT (seconds)
  // The network interface Gloo binds (bind_address.h): DTL_SOCKET_IFNAME, else
  // the first of GLOO_SOCKET_IFNAME's; empty: the one that routes to the master.
  std::string iface;
  std::string iface_from;  // "DTL_SOCKET_IFNAME=" or "GLOO_SOCKET_IFNAME=", for messages
  std::string note;  // something worth telling the user (a default taken), or empty
};

// Variables the launcher sets besides torchrun's.
inline constexpr char kEnvToken[] = "DTL_JOB_TOKEN";
inline constexpr char kEnvLaunched[] = "DTL_LAUNCHED";
inline constexpr char kEnvRestartCount[] = "DTL_RESTART_COUNT";
inline constexpr char kEnvJoinTimeout[] = "DTL_JOIN_TIMEOUT";
inline constexpr char kEnvJobStarted[] = "DTL_JOB_STARTED";
// Optional: the store's port when it is not MASTER_PORT (see rankEnvFrom).
inline constexpr char kEnvStorePort[] = "DTL_STORE_PORT";
// Optional: the interface Gloo binds (dtlc run --iface sets it).
inline constexpr char kEnvSocketIfname[] = "DTL_SOCKET_IFNAME";

// Reads a variable: its value, or null when unset.
using EnvLookup = std::function<const char*(const char* name)>;

// True when some launcher's rank variables are set (RANK, OMPI_COMM_WORLD_RANK
// or SLURM_PROCID): this process is meant to be one rank of a job.
bool rankEnvPresent(const EnvLookup& lookup);

// The interface Gloo should bind, as RankEnv::iface and iface_from: from
// DTL_SOCKET_IFNAME, else the first of GLOO_SOCKET_IFNAME's (a comma-separated
// list for PyTorch, which may use several); both empty when neither is set.
void interfaceFromEnv(const EnvLookup& lookup, std::string& iface, std::string& iface_from);

// Fills `env` from the variables; false with `err` naming the variable and
// the problem ("RANK=4 is not below WORLD_SIZE=4"). torchrun's variables win
// over OpenMPI's, which win over Slurm's. With OpenMPI or Slurm an unset
// MASTER_ADDR/MASTER_PORT defaults to 127.0.0.1:29500 (with a note) when all
// ranks share one node, and is an error when they span several. The store
// listens on DTL_STORE_PORT when set; under a torchrun whose agent keeps its
// own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), on the next port.
bool rankEnvFrom(const EnvLookup& lookup, RankEnv& env, std::string& err);
bool rankEnvFromEnvironment(RankEnv& env, std::string& err);

}  // namespace dtl::rt::launch
