#include "common/trace_context.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

namespace tessera {
namespace {

// A copy, not a pointer to the setter's: a call whose status is never sent on this thread must
// not leave a dangling trace behind (the next call replaces it).
thread_local std::optional<TraceContext> current_trace;

bool IsLowerHex(const std::string& s, size_t begin, size_t n) {
  for (size_t i = begin; i < begin + n; ++i) {
    const char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(const std::string& s) { return s.find_first_not_of('0') == std::string::npos; }

int HexValue(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

std::string RandomHex(size_t bytes) {
  unsigned char buf[16];
  for (;;) {
    size_t got = 0;
    while (got < bytes) {
      const ssize_t n = getrandom(buf + got, bytes - got, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::abort();  // no entropy source at all: nothing sensible to log with
      }
      got += static_cast<size_t>(n);
    }
    static const char kHex[] = "0123456789abcdef";
    std::string hex(bytes * 2, '0');
    for (size_t i = 0; i < bytes; ++i) {
      hex[2 * i] = kHex[buf[i] >> 4];
      hex[2 * i + 1] = kHex[buf[i] & 15];
    }
    if (!AllZero(hex)) return hex;  // all zero is the spec's "invalid"
  }
}

}  // namespace

bool IsValidTraceId(const std::string& trace_id) {
  return trace_id.size() == 32 && IsLowerHex(trace_id, 0, 32) && !AllZero(trace_id);
}

std::optional<TraceContext> ParseTraceparent(const std::string& value) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (value.size() < 55 || value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  if (!IsLowerHex(value, 0, 2) || value.compare(0, 2, "ff") == 0) return std::nullopt;
  const bool version00 = value.compare(0, 2, "00") == 0;
  // Version 00 is exactly 55 characters; a later version may append "-" and more fields.
  if (value.size() != 55 && (version00 || value[55] != '-')) return std::nullopt;
  if (!IsLowerHex(value, 3, 32) || !IsLowerHex(value, 36, 16) || !IsLowerHex(value, 53, 2)) return std::nullopt;
  TraceContext context;
  context.trace_id = value.substr(3, 32);
  context.span_id = value.substr(36, 16);
  if (AllZero(context.trace_id) || AllZero(context.span_id)) return std::nullopt;
  context.flags = static_cast<uint8_t>(HexValue(value[53]) * 16 + HexValue(value[54]));
  return context;
}

std::string FormatTraceparent(const TraceContext& context) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "00-";
  out += context.trace_id;
  out += '-';
  out += context.span_id;
  out += '-';
  out += kHex[context.flags >> 4];
  out += kHex[context.flags & 15];
  return out;
}

std::string NewTraceId() { return RandomHex(16); }
std::string NewSpanId() { return RandomHex(8); }

TraceContext NewTrace() { return TraceContext{NewTraceId(), NewSpanId(), 1}; }

TraceContext ChildSpan(const TraceContext& parent) { return TraceContext{parent.trace_id, NewSpanId(), parent.flags}; }

TraceContext ContinueTrace(const std::string& trace_id) {
  if (!IsValidTraceId(trace_id)) return TraceContext{"", "", 0};
  return TraceContext{trace_id, NewSpanId(), 1};
}

const TraceContext* CurrentTrace() { return current_trace.has_value() ? &*current_trace : nullptr; }

std::string CurrentTraceId() { return current_trace.has_value() ? current_trace->trace_id : std::string(); }

std::optional<TraceContext> ExchangeCurrentTrace(std::optional<TraceContext> context) {
  std::swap(current_trace, context);
  return context;
}

ScopedTraceContext::ScopedTraceContext(const TraceContext& context) {
  if (context.trace_id.empty()) return;
  previous_ = ExchangeCurrentTrace(context);
  active_ = true;
}

ScopedTraceContext::~ScopedTraceContext() {
  if (active_) ExchangeCurrentTrace(std::move(previous_));
}

}  // namespace tessera
