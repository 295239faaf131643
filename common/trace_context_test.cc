#include "common/trace_context.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "common/log.h"

namespace tessera {
namespace {

constexpr char kGood[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ParsesTheSpecExample) {
  std::optional<TraceContext> c = ParseTraceparent(kGood);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->span_id, "00f067aa0ba902b7");
  EXPECT_EQ(c->flags, 1);
  EXPECT_EQ(FormatTraceparent(*c), kGood);
}

TEST(TraceparentTest, RefusesMalformedValues) {
  const std::string good = kGood;
  for (const std::string& bad : {
           std::string(""),
           good.substr(0, 54),                                                  // short
           good + "-",                                                          // version 00 with more
           std::string("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),  // uppercase
           std::string("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),  // zero trace id
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),  // zero span id
           std::string("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),  // version ff
           std::string("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),  // separator
           std::string("00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01"),  // not hex
           std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x"),  // flags
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
}

TEST(TraceparentTest, ReadsALaterVersionByItsPrefix) {
  std::optional<TraceContext> c =
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->flags, 0);
  EXPECT_FALSE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00x").has_value());
}

TEST(TraceparentTest, NewIdsAreValidAndDistinct) {
  std::set<std::string> traces, spans;
  for (int i = 0; i < 1000; ++i) {
    const TraceContext c = NewTrace();
    EXPECT_TRUE(IsValidTraceId(c.trace_id)) << c.trace_id;
    EXPECT_TRUE(ParseTraceparent(FormatTraceparent(c)).has_value());
    traces.insert(c.trace_id);
    spans.insert(c.span_id);
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
  const TraceContext parent = NewTrace();
  const TraceContext child = ChildSpan(parent);
  EXPECT_EQ(child.trace_id, parent.trace_id);
  EXPECT_NE(child.span_id, parent.span_id);
}

TEST(ScopedTraceContextTest, NestsAndIsPerThread) {
  EXPECT_EQ(CurrentTrace(), nullptr);
  const TraceContext outer = NewTrace();
  {
    ScopedTraceContext a(outer);
    EXPECT_EQ(CurrentTraceId(), outer.trace_id);
    {
      ScopedTraceContext b(ContinueTrace("4bf92f3577b34da6a3ce929d0e0e4736"));
      EXPECT_EQ(CurrentTraceId(), "4bf92f3577b34da6a3ce929d0e0e4736");
      std::string other_thread = "unset";
      std::thread([&] { other_thread = CurrentTraceId(); }).join();
      EXPECT_EQ(other_thread, "");
    }
    {
      ScopedTraceContext none(ContinueTrace("not-a-trace-id"));  // scopes nothing
      EXPECT_EQ(CurrentTraceId(), outer.trace_id);
    }
    EXPECT_EQ(CurrentTraceId(), outer.trace_id);
  }
  EXPECT_EQ(CurrentTrace(), nullptr);
}

TEST(ScopedTraceContextTest, LogLinesCarryTheCurrentTraceId) {
  testing::internal::CaptureStderr();
  TESSERA_LOG(INFO) << "before";
  {
    ScopedTraceContext scope(ContinueTrace("4bf92f3577b34da6a3ce929d0e0e4736"));
    TESSERA_LOG(INFO) << "inside";
  }
  TESSERA_LOG(INFO) << "after";
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("] trace_id=4bf92f3577b34da6a3ce929d0e0e4736 inside"), std::string::npos) << err;
  EXPECT_NE(err.find("] before"), std::string::npos) << err;
  EXPECT_NE(err.find("] after"), std::string::npos) << err;
}

}  // namespace
}  // namespace tessera
