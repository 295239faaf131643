// Minimal leveled logging to stderr (this Abseil release predates absl/log).
// Usage: TESSERA_LOG(INFO) << "listening on " << port;
// A line written while the thread works for a trace (common/trace_context.h: a server call's
// handler thread, a job's attempt) carries "trace_id=<32 hex> " right after the location.
#ifndef TESSERA_COMMON_LOG_H_
#define TESSERA_COMMON_LOG_H_

#include <sstream>

namespace tessera {

enum class LogLevel { kDEBUG = 0, kINFO = 1, kWARNING = 2, kERROR = 3 };

// Messages below this level are dropped. Default INFO; TESSERA_LOG_LEVEL
// (DEBUG/INFO/WARNING/ERROR) in the environment overrides it.
LogLevel MinLogLevel();
void SetMinLogLevel(LogLevel level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace tessera

#define TESSERA_LOG(level)                                                      \
  if (::tessera::LogLevel::k##level < ::tessera::MinLogLevel()) {               \
  } else                                                                        \
    ::tessera::LogMessage(::tessera::LogLevel::k##level, __FILE__, __LINE__).stream()

#endif  // TESSERA_COMMON_LOG_H_
