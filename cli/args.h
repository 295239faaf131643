// Command-line parsing for the `tessera` verbs: GNU-style `--name=value`,
// `--name value` and boolean `--name`, with hyphenated names as users expect
// (`--grpc-port`). Each verb declares its flags, so typos are errors, and
// `--help` prints them.
#ifndef TESSERA_CLI_ARGS_H_
#define TESSERA_CLI_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::cli {

struct FlagSpec {
  std::string name;           // without dashes, e.g. "grpc-port"
  std::string default_value;  // "" for none
  std::string help;
  bool is_bool = false;
  bool repeated = false;      // may be given several times
};

class Args {
 public:
  // Parses argv[first..]; unknown flags and missing values are INVALID_ARGUMENT.
  static absl::StatusOr<Args> Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first);

  bool help() const { return help_; }
  const std::vector<std::string>& positional() const { return positional_; }
  std::string Get(const std::string& name) const;  // last value or the default
  std::vector<std::string> GetAll(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  absl::StatusOr<int> GetInt(const std::string& name) const;

 private:
  std::map<std::string, FlagSpec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// A path as a server should see it: made absolute against this process's
// working directory (the usual case: client and server share it) when
// `absolute`, else unchanged; empty stays empty.
std::string ServerPath(const std::string& path, bool absolute);

// "  --grpc-port=50051   gRPC listening port (0 picks a free one)" lines.
std::string FlagsHelp(const std::vector<FlagSpec>& specs);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_ARGS_H_
