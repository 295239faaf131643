#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "common/trace_context.h"

namespace tessera {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("TESSERA_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kINFO;
  if (std::strcmp(env, "DEBUG") == 0) return LogLevel::kDEBUG;
  if (std::strcmp(env, "WARNING") == 0) return LogLevel::kWARNING;
  if (std::strcmp(env, "ERROR") == 0) return LogLevel::kERROR;
  return LogLevel::kINFO;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

}  // namespace

LogLevel MinLogLevel() { return static_cast<LogLevel>(Level().load(std::memory_order_relaxed)); }
void SetMinLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  std::time_t now = std::time(nullptr);
  std::tm tm_utc;
  gmtime_r(&now, &tm_utc);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  const char* base = std::strrchr(file, '/');
  stream_ << kLetters[static_cast<int>(level)] << ' ' << when << ' ' << (base ? base + 1 : file) << ':'
          << line << "] ";
  // The call or job this thread works for (trace_context.h), so one trace's lines can be found
  // across the scheduler, its workers and shards.
  if (const TraceContext* trace = CurrentTrace()) stream_ << "trace_id=" << trace->trace_id << ' ';
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace tessera
