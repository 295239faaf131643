#include "cli/args.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first) {
  Args args;
  for (const FlagSpec& s : specs) args.specs_[s.name] = s;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) args.positional_.push_back(argv[i]);
      break;
    }
    if (arg == "-h" || arg == "--help") {
      args.help_ = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      args.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = args.specs_.find(name);
    if (it == args.specs_.end() && name.compare(0, 3, "no-") == 0 && !has_value) {
      auto neg = args.specs_.find(name.substr(3));
      if (neg != args.specs_.end() && neg->second.is_bool) {
        args.values_[neg->first] = {"false"};
        continue;
      }
    }
    if (it == args.specs_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (!has_value) {
      if (it->second.is_bool) {
        value = "true";
      } else {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        value = argv[++i];
      }
    }
    auto& slot = args.values_[name];
    if (!it->second.repeated) slot.clear();
    slot.push_back(value);
  }
  return args;
}

std::string Args::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end() && !it->second.empty()) return it->second.back();
  auto spec = specs_.find(name);
  return spec == specs_.end() ? "" : spec->second.default_value;
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  std::string d = Get(name);
  return d.empty() ? std::vector<std::string>{} : std::vector<std::string>{d};
}

bool Args::GetBool(const std::string& name) const {
  const std::string v = Get(name);
  return v == "true" || v == "1" || v == "yes";
}

absl::StatusOr<int> Args::GetInt(const std::string& name) const {
  int v = 0;
  const std::string s = Get(name);
  if (!absl::SimpleAtoi(s, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", name, " expects an integer, got '", s, "'"));
  }
  return v;
}

std::string FlagsHelp(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const FlagSpec& s : specs) {
    std::string left = absl::StrCat("  --", s.name);
    if (!s.is_bool) absl::StrAppend(&left, "=", s.default_value.empty() ? "VALUE" : s.default_value);
    absl::StrAppendFormat(&out, "%-34s %s%s\n", left, s.help, s.repeated ? " (repeatable)" : "");
  }
  return out;
}

std::string ServerPath(const std::string& path, bool absolute) {
  if (path.empty() || !absolute) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace tessera::cli
