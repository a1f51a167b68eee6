// One command line parser for every dtlc command: each command declares its
// flags (name, where the value goes, what it may be) and gets the same
// behaviour — `--flag value` and `--flag=value`, -h/--help, one SPEC, and the
// same wording for every mistake ("--world expects a positive number of
// ranks, got 'x'", "unknown option '--bogus' (see dtlc plan --help)").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtl::cli {

class Flags {
 public:
  explicit Flags(std::string command) : command_(std::move(command)) {}

  // A flag that takes no value.
  Flags& toggle(const std::string& name, bool& out);
  // A string; `choices` (when not empty) are all it may be, and `what` says
  // what it is when the value is missing ("a stage").
  Flags& text(const std::string& name, std::string& out, const std::string& what,
              const std::vector<std::string>& choices = {});
  // A repeatable string flag (--set KEY=VALUE).
  Flags& list(const std::string& name, std::vector<std::string>& out, const std::string& what);
  // An integer in [least, most]; `what` completes "NAME expects …"
  // ("a positive number of ranks"). `given` (optional) is set when it appears.
  Flags& integer(const std::string& name, int64_t& out, const std::string& what, int64_t least, int64_t most,
                 bool* given = nullptr);
  // A finite decimal number in [least, most] ("1e-5", "0.001").
  Flags& number(const std::string& name, double& out, const std::string& what, double least, double most,
                bool* given = nullptr);
  // A positive size in bytes: "24 GiB", "24GiB", "512 MiB", "1.5 TB" or a
  // plain number of bytes (units as in a spec: B, KiB … TiB, KB … TB).
  Flags& bytes(const std::string& name, int64_t& out);

  // Parses args[1..] (args[0] is the command). Returns "" or the message
  // for the user (without the "dtlc COMMAND: " prefix). -h/--help sets
  // `help` and stops.
  std::string parse(const std::vector<std::string>& args, std::string& spec, bool& help) const;

 private:
  enum class Kind { Toggle, Text, List, Integer, Number, Bytes };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string what;
    std::vector<std::string> choices;
    int64_t least = 0, most = 0;
    bool* given = nullptr;
    double real_least = 0, real_most = 0;  // Number
  };
  std::string take(const Flag& f, const std::string& value) const;

  std::string command_;
  std::vector<Flag> flags_;
};

// "24 GiB" → 25769803776; -1 when the text is not a positive size.
int64_t parseSize(const std::string& text);

}  // namespace dtl::cli
