// The host half of a guest's identity, against a scripted guest agent (FakeGuest): the real
// `abox-guest identity` would set this host's clock and hostname, so the tool here is a fake
// path the fake guest answers for. The real tool runs in a VM in tests/e2e/identity_test.cc.
#include "src/runtime/guest_identity.h"

#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/runtime/fake_guest.h"

namespace abox::runtime {
namespace {

using proto::EncodeFrame;
using proto::FrameType;
using testing::FakeGuest;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kFakeTool[] = "/fake/abox-guest";

TEST(GuestIdentityTest, NewIdentitiesAreFreshAndWellFormed) {
  absl::Time before = absl::Now();
  absl::StatusOr<GuestIdentity> a = NewGuestIdentity("0123456789abcdef");
  absl::StatusOr<GuestIdentity> b = NewGuestIdentity("0123456789abcdef");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->sandbox_id, "0123456789abcdef");
  EXPECT_EQ(a->hostname, "abox-0123456789ab");
  EXPECT_EQ(a->seed.size(), kIdentitySeedBytes);
  EXPECT_THAT(a->machine_id, MatchesRegex("[0-9a-f]{32}"));
  EXPECT_GE(a->now, before);
  EXPECT_LE(a->now, absl::Now());
  // Two clones of one sandbox id still differ where it matters.
  EXPECT_NE(a->seed, b->seed);
  EXPECT_NE(a->machine_id, b->machine_id);
}

TEST(GuestIdentityTest, TheHostnameKeepsOnlyWhatAHostnameMayHold) {
  for (const auto& [id, hostname] : std::vector<std::pair<std::string, std::string>>{
           {"sb_1.x-", "abox-sb1x"},
           {"a-b-c-d-e-f-g-h", "abox-a-b-c-d-e-f"},
           {"___", "abox"},
           {"0123456789abcdef0123", "abox-0123456789ab"},
       }) {
    absl::StatusOr<GuestIdentity> identity = NewGuestIdentity(id);
    ASSERT_TRUE(identity.ok()) << id << ": " << identity.status();
    EXPECT_EQ(identity->hostname, hostname) << id;
  }
}

TEST(GuestIdentityTest, RefusesASandboxIdTheGuestWouldRefuse) {
  for (const std::string& id :
       std::vector<std::string>{"", "Upper", "a/b", "a b", "\x1b[31m", std::string(65, 'a')}) {
    absl::StatusOr<GuestIdentity> identity = NewGuestIdentity(id);
    EXPECT_EQ(identity.status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_THAT(identity.status().message(), Not(HasSubstr("\x1b"))) << id;
  }
}

// The same bytes as GoodRequest() in src/guest/identity_tool_test.cc, which the guest accepts.
TEST(GuestIdentityTest, EncodesTheRequestTheGuestToolReads) {
  GuestIdentity identity{.sandbox_id = "sb-1a2b3c",
                         .hostname = "abox-sb-1a2b3c",
                         .machine_id = "0123456789abcdef0123456789abcdef",
                         .seed = std::string(kIdentitySeedBytes, '\x5a'),
                         .now = absl::FromUnixNanos(1700000000123456789)};
  EXPECT_EQ(EncodeIdentityRequest(identity),
            absl::StrCat(R"({"seed":")", absl::Base64Escape(identity.seed),
                         R"(","unix_time_ns":1700000000123456789,"hostname":"abox-sb-1a2b3c",)"
                         R"("machine_id":"0123456789abcdef0123456789abcdef",)"
                         R"("sandbox_id":"sb-1a2b3c"})"));
}

// What the fake guest saw of the tool run.
struct Seen {
  proto::ExecRequest request;
  std::string stdin_data;
  bool stdin_closed = false;
};

// Takes one exec, reads its stdin to EOF, then answers with `stdout_data`, `stderr_data` and
// `exit`.
void AnsweringGuest(FakeGuest& guest, Seen& seen, const std::string& stdout_data,
                    const std::string& stderr_data, const proto::ExitInfo& exit) {
  guest.Handshake();
  auto open = guest.Expect(FrameType::kOpen);
  ASSERT_TRUE(open.has_value());
  auto request = proto::DecodeExecRequest(open->payload);
  ASSERT_TRUE(request.ok()) << request.status();
  seen.request = *request;
  uint32_t id = open->header.stream;
  while (!seen.stdin_closed) {
    auto f = guest.Expect(FrameType::kStdin);
    ASSERT_TRUE(f.has_value());
    seen.stdin_data += f->payload;
    seen.stdin_closed = (f->header.flags & proto::kFlagEof) != 0;
  }
  std::string answer;
  for (size_t at = 0; at < stderr_data.size(); at += proto::kMaxPayload) {
    answer += EncodeFrame(FrameType::kStderr, id, 0, stderr_data.substr(at, proto::kMaxPayload));
  }
  guest.Send(answer + EncodeFrame(FrameType::kStdout, id, proto::kFlagEof, stdout_data) +
             EncodeFrame(FrameType::kStderr, id, proto::kFlagEof, "") +
             EncodeFrame(FrameType::kExit, id, 0, proto::EncodeExitInfo(exit)));
}

GuestIdentity TestIdentity() {
  absl::StatusOr<GuestIdentity> identity = NewGuestIdentity("sb-1a2b3c");
  EXPECT_TRUE(identity.ok()) << identity.status();
  GuestIdentity out = identity.value_or(GuestIdentity{});
  out.now = absl::UnixEpoch();  // stale on purpose: ApplyGuestIdentity sends the time of sending
  return out;
}

TEST(GuestIdentityTest, RunsTheToolAsRootWithTheRequestOnStdin) {
  testing::ClientAndGuest p = testing::MakeClientAndGuest();
  Seen seen;
  std::thread guest(
      [&] { AnsweringGuest(*p.guest, seen, "{\"ok\":true}\n", "", {.exit_code = 0}); });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  GuestIdentity identity = TestIdentity();
  absl::Time before = absl::Now();
  absl::Status s = ApplyGuestIdentity(*p.client, identity, kFakeTool);
  absl::Time after = absl::Now();
  guest.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen.request.argv, std::vector<std::string>({kFakeTool, "identity"}));
  EXPECT_EQ(seen.request.user, "root");
  EXPECT_TRUE(seen.request.stdin_open);
  EXPECT_GT(seen.request.timeout_ms, 0u);
  EXPECT_TRUE(seen.stdin_closed);
  nlohmann::json sent = nlohmann::json::parse(seen.stdin_data, nullptr, false);
  ASSERT_TRUE(sent.is_object()) << seen.stdin_data;
  EXPECT_EQ(sent.value("sandbox_id", ""), "sb-1a2b3c");
  EXPECT_EQ(sent.value("hostname", ""), "abox-sb-1a2b3c");
  EXPECT_EQ(sent.value("machine_id", ""), identity.machine_id);
  EXPECT_EQ(sent.value("seed", ""), absl::Base64Escape(identity.seed));
  // The clock is taken when the request goes out, not when the identity was made.
  int64_t sent_ns = sent.value("unix_time_ns", int64_t{0});
  EXPECT_GE(sent_ns, absl::ToUnixNanos(before));
  EXPECT_LE(sent_ns, absl::ToUnixNanos(after));
}

TEST(GuestIdentityTest, AFailingToolFailsWithItsWordsBoundedAndPrintable) {
  testing::ClientAndGuest p = testing::MakeClientAndGuest();
  Seen seen;
  // A hostile guest: terminal escapes, a NUL and far more than anyone needs.
  std::string hostile = "abox-guest identity: setting the clock: \x1b[2J" + std::string(1, '\0') +
                        " no" + std::string(64 << 10, 'x');
  std::thread guest([&] { AnsweringGuest(*p.guest, seen, "", hostile, {.exit_code = 1}); });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  absl::Status s = ApplyGuestIdentity(*p.client, TestIdentity(), kFakeTool);
  guest.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("setting the identity of sandbox sb-1a2b3c"));
  EXPECT_THAT(s.message(), HasSubstr("failed (exit 1): abox-guest identity: setting the clock: "
                                     "\\x1b[2J"));
  for (char c : s.message()) {
    ASSERT_TRUE(c >= 0x20 && c < 0x7f) << "unprintable byte " << static_cast<int>(c);
  }
  EXPECT_LE(s.message().size(), kMaxIdentityOutput + 200);
}

TEST(GuestIdentityTest, AToolThatCannotStartSaysSo) {
  testing::ClientAndGuest p = testing::MakeClientAndGuest();
  Seen seen;
  std::thread guest([&] {
    AnsweringGuest(*p.guest, seen, "", "",
                   {.exit_code = 127, .error = "/fake/abox-guest: No such file or directory"});
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  absl::Status s = ApplyGuestIdentity(*p.client, TestIdentity(), kFakeTool);
  guest.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("could not start: /fake/abox-guest: No such file"));
}

TEST(GuestIdentityTest, AGuestThatNeverAnswersFailsAfterTheTimeout) {
  AgentClient::Options options;
  options.timeout_grace = absl::Milliseconds(300);
  testing::ClientAndGuest p = testing::MakeClientAndGuest(options);
  std::thread guest([&] {
    p.guest->Handshake();
    ASSERT_TRUE(p.guest->Expect(FrameType::kOpen).has_value());
    while (p.guest->Next(std::chrono::seconds(60))) {
    }
  });
  ASSERT_TRUE(p.client->WaitReady(absl::Seconds(10)).ok());
  absl::Status s =
      ApplyGuestIdentity(*p.client, TestIdentity(), kFakeTool, absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("did not finish within 300ms"));
  // A guest that does not even end its tool is not used again.
  EXPECT_FALSE(p.client->failure().ok());
  p.client.reset();
  guest.join();
}

}  // namespace
}  // namespace abox::runtime
