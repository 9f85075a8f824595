#include "src/net/dns_resolver.h"

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/net/dns_message.h"
#include "src/net/egress_proxy.h"
#include "src/net/testing/socket_tunnel.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;
using testing::ReadToEof;
using testing::RecordingSink;
using testing::SendAllTo;
using testing::SocketTunnel;

constexpr uint16_t kTypeTxt = 16;

std::string U16(uint16_t v) {
  return std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
}

// A stub resolver's query for `name` (RD set, no EDNS).
std::string Query(uint16_t id, const std::string& name, uint16_t qtype) {
  std::string m = U16(id) + U16(0x0100) + U16(1) + U16(0) + U16(0) + U16(0);
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    m += static_cast<char>(label.size());
    m.append(label.data(), label.size());
  }
  return m + std::string(1, '\0') + U16(qtype) + U16(kDnsClassIn);
}

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

class DnsResolverTest : public ::testing::Test {
 protected:
  void SetPolicy(const std::vector<std::string>& rules,
                 EgressPolicy::Mode mode = EgressPolicy::Mode::kAllowlist) {
    policy_.Set(rules, mode);
  }

  EgressPolicySource Source() {
    EgressPolicySource source = policy_.Source();
    source.has_once = has_once_;
    return source;
  }

  std::shared_ptr<const HostResolver> Resolver() {
    HostResolver::Options options;
    options.override_map = {{"fake.test", {Ip("127.0.0.1")}}};
    options.interface_addresses = [this]() -> absl::StatusOr<std::vector<IpAddress>> {
      return interfaces_;
    };
    options.lookup = [this](const std::string& name,
                            absl::Time) -> absl::StatusOr<std::vector<IpAddress>> {
      looked_up_.push_back(name);
      if (name == "db") {
        return std::vector<IpAddress>{Ip("93.184.216.34")};  // as a search domain would
      }
      if (name == "api.example.com" || name == "cdn.example.com") {
        return std::vector<IpAddress>{Ip("93.184.216.34"), Ip("2606:2800:220:1::1")};
      }
      if (name == "rebind.example.com") {
        return std::vector<IpAddress>{Ip("10.0.0.8")};
      }
      if (name == "flaky.example.com") {
        return absl::UnavailableError("temporary failure");
      }
      return absl::NotFoundError("no such name");
    };
    return std::move(*HostResolver::Create(std::move(options)));
  }

  std::unique_ptr<DnsResolver> Make() {
    auto resolver = DnsResolver::Create({"sb1", Source(), Resolver(), sink_, EgressLimits{}});
    EXPECT_TRUE(resolver.ok());
    return std::move(*resolver);
  }

  DnsResponse Ask(const std::string& name, uint16_t qtype) {
    std::optional<std::string> answer = Make()->Answer(Query(0x1234, name, qtype));
    EXPECT_TRUE(answer.has_value());
    absl::StatusOr<DnsResponse> response = ParseDnsResponse(answer.value_or(""));
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->id, 0x1234);
    return *response;
  }

  testing::MutablePolicy policy_;
  std::function<bool(const std::string&)> has_once_;
  std::vector<IpAddress> interfaces_ = {Ip("127.0.0.1"), Ip("::1")};
  std::vector<std::string> looked_up_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(DnsResolverTest, AnswersAnAllowedNameWithFilteredAddressesAndAShortTtl) {
  SetPolicy({"api.example.com"});
  DnsResponse a = Ask("api.example.com", kDnsTypeA);
  EXPECT_EQ(a.rcode, DnsRcode::kNoError);
  ASSERT_EQ(a.answers.size(), 1u);
  EXPECT_EQ(a.answers[0].type, kDnsTypeA);
  EXPECT_EQ(a.answers[0].ttl, 5u);
  EXPECT_EQ(a.answers[0].rdata, std::string("\x5d\xb8\xd8\x22", 4));
  DnsResponse aaaa = Ask("api.example.com", kDnsTypeAaaa);
  ASSERT_EQ(aaaa.answers.size(), 1u);
  EXPECT_EQ(aaaa.answers[0].type, kDnsTypeAaaa);

  std::vector<DnsRecord> log = sink_->dns();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].sandbox, "sb1");
  EXPECT_EQ(log[0].name, "api.example.com");
  EXPECT_EQ(log[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(log[0].matched_rule, "api.example.com");
  EXPECT_EQ(log[0].answers, std::vector<std::string>{"93.184.216.34"});
  EXPECT_EQ(log[1].answers, std::vector<std::string>{"2606:2800:220:1::1"});
}

TEST_F(DnsResolverTest, AnswersNxDomainForADeniedNameAndReportsIt) {
  SetPolicy({"api.example.com"});
  DnsResponse r = Ask("c2VjcmV0.denied.example", kDnsTypeA);
  EXPECT_EQ(r.rcode, DnsRcode::kNxDomain);
  EXPECT_TRUE(r.answers.empty());
  std::vector<DnsRecord> log = sink_->dns();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].name, "c2vjcmv0.denied.example");
  EXPECT_EQ(log[0].verdict, Verdict::kDenied);
  EXPECT_EQ(log[0].rcode, static_cast<uint8_t>(DnsRcode::kNxDomain));
  ASSERT_EQ(sink_->denials().size(), 1u);
  EXPECT_EQ(sink_->denials()[0].name, "c2vjcmv0.denied.example");
  EXPECT_EQ(sink_->denials()[0].port, 0);
}

TEST_F(DnsResolverTest, OpenModeNeverResolvesASingleLabelName) {
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  looked_up_.clear();
  DnsResponse r = Ask("db", kDnsTypeA);
  EXPECT_EQ(r.rcode, DnsRcode::kNxDomain);
  EXPECT_TRUE(looked_up_.empty());  // the host's resolver (and its search list) never asked
  ASSERT_EQ(sink_->dns().size(), 1u);
  EXPECT_NE(sink_->dns()[0].reason.find("not a fully qualified name"), std::string::npos);
  EXPECT_TRUE(sink_->denials().empty());  // no rule could allow it: not queued
}

TEST_F(DnsResolverTest, AnswersNoDataWhenTheNameResolvesToTheHostsOwnAddress) {
  SetPolicy({"api.example.com"});
  interfaces_ = {Ip("127.0.0.1"), Ip("93.184.216.34"), Ip("2606:2800:220:1::1")};
  DnsResponse r = Ask("api.example.com", kDnsTypeA);
  EXPECT_EQ(r.rcode, DnsRcode::kNoError);
  EXPECT_TRUE(r.answers.empty());
  ASSERT_EQ(sink_->dns().size(), 1u);
  EXPECT_NE(sink_->dns()[0].reason.find("an address of this host"), std::string::npos)
      << sink_->dns()[0].reason;
}

TEST_F(DnsResolverTest, AnswersFormErrToAMalformedQuery) {
  SetPolicy({"api.example.com"});
  std::string bad = Query(0x4242, "api.example.com", kDnsTypeA);
  bad[5] = 2;  // claims two questions
  std::optional<std::string> answer = Make()->Answer(bad);
  ASSERT_TRUE(answer.has_value());
  absl::StatusOr<DnsResponse> r = ParseDnsResponse(*answer);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rcode, DnsRcode::kFormErr);
  EXPECT_EQ(r->id, 0x4242);
  ASSERT_EQ(sink_->dns().size(), 1u);
  EXPECT_EQ(sink_->dns()[0].verdict, Verdict::kError);
  // Too short for a header: no answer at all, still logged.
  EXPECT_FALSE(Make()->Answer("\x01\x02").has_value());
  EXPECT_EQ(sink_->dns().size(), 2u);
}

TEST_F(DnsResolverTest, AllowsANameAllowedOnAnyPort) {
  SetPolicy({"*.example.com:8443", "preset:npm"});
  EXPECT_EQ(Ask("cdn.example.com", kDnsTypeA).answers.size(), 1u);
  EXPECT_TRUE(DecideNameAnyPort(policy_.Get(), "registry.npmjs.org").allowed);
  EXPECT_FALSE(DecideNameAnyPort(policy_.Get(), "example.com").allowed);
}

TEST_F(DnsResolverTest, AnswersNoDataForOtherTypesOfAnAllowedName) {
  SetPolicy({"api.example.com"});
  DnsResponse r = Ask("api.example.com", kTypeTxt);
  EXPECT_EQ(r.rcode, DnsRcode::kNoError);
  EXPECT_TRUE(r.answers.empty());
}

TEST_F(DnsResolverTest, AnswersNoDataWhenTheNameResolvesOnlyToPrivateAddresses) {
  SetPolicy({"rebind.example.com"});
  DnsResponse r = Ask("rebind.example.com", kDnsTypeA);
  EXPECT_EQ(r.rcode, DnsRcode::kNoError);
  EXPECT_TRUE(r.answers.empty());
  EXPECT_EQ(sink_->dns()[0].verdict, Verdict::kDenied);
  EXPECT_THAT(sink_->dns()[0].reason, HasSubstr("10.0.0.8"));
}

TEST_F(DnsResolverTest, AnswersTheOverrideFlagged) {
  SetPolicy({"fake.test"});
  DnsResponse r = Ask("fake.test", kDnsTypeA);
  ASSERT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(r.answers[0].rdata, std::string("\x7f\x00\x00\x01", 4));
  EXPECT_TRUE(sink_->dns()[0].via_override);
}

TEST_F(DnsResolverTest, MapsResolveFailures) {
  SetPolicy({}, EgressPolicy::Mode::kOpen);
  EXPECT_EQ(Ask("missing.example.com", kDnsTypeA).rcode, DnsRcode::kNxDomain);
  EXPECT_EQ(Ask("flaky.example.com", kDnsTypeA).rcode, DnsRcode::kServFail);
  EXPECT_EQ(sink_->dns()[1].verdict, Verdict::kError);
}

TEST_F(DnsResolverTest, RefusesEverythingInModeNone) {
  SetPolicy({"api.example.com"}, EgressPolicy::Mode::kNone);
  EXPECT_EQ(Ask("api.example.com", kDnsTypeA).rcode, DnsRcode::kRefused);
  EXPECT_TRUE(sink_->denials().empty());
}

TEST_F(DnsResolverTest, AnswersANamePendingAOneShotApproval) {
  SetPolicy({});
  has_once_ = [](const std::string& name) { return name == "api.example.com"; };
  EXPECT_EQ(Ask("api.example.com", kDnsTypeA).answers.size(), 1u);
  EXPECT_EQ(sink_->dns()[0].matched_rule, "approved once");
}

TEST_F(DnsResolverTest, AppliesAPolicyChangeToTheNextQuery) {
  SetPolicy({"api.example.com"});
  auto resolver = Make();
  EXPECT_TRUE(resolver->Answer(Query(1, "api.example.com", kDnsTypeA)).has_value());
  SetPolicy({});
  absl::StatusOr<DnsResponse> r =
      ParseDnsResponse(*resolver->Answer(Query(2, "api.example.com", kDnsTypeA)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rcode, DnsRcode::kNxDomain);
}

TEST_F(DnsResolverTest, ServesFramedQueriesOverAProxyTunnel) {
  SetPolicy({"api.example.com"});
  EgressProxy::Options options{"sb1", Source(), Resolver(), sink_, EgressLimits{}};
  auto proxy = EgressProxy::Create(std::move(options));
  ASSERT_TRUE(proxy.ok());
  TunnelInfo info;
  info.kind = TunnelInfo::Kind::kDns;
  auto [tunnel, guest] = SocketTunnel::Make(info);
  (*proxy)->Handle(std::move(tunnel));
  // Two queries in one write, the second split across frames' boundaries is fine too.
  ASSERT_TRUE(SendAllTo(guest.get(), FrameDnsTcp(Query(7, "api.example.com", kDnsTypeA)) +
                                         FrameDnsTcp(Query(8, "denied.example", kDnsTypeA))));
  ::shutdown(guest.get(), SHUT_WR);
  std::string answers = ReadToEof(guest.get());
  std::vector<DnsRcode> rcodes;
  absl::string_view rest = answers;
  while (!rest.empty()) {
    absl::StatusOr<DnsTcpFrame> frame = NextDnsTcpFrame(rest);
    ASSERT_TRUE(frame.ok() && frame->complete);
    absl::StatusOr<DnsResponse> r = ParseDnsResponse(frame->message);
    ASSERT_TRUE(r.ok());
    rcodes.push_back(r->rcode);
    rest.remove_prefix(frame->consumed);
  }
  EXPECT_EQ(rcodes, (std::vector<DnsRcode>{DnsRcode::kNoError, DnsRcode::kNxDomain}));
  (*proxy)->Shutdown();
  EXPECT_EQ(sink_->dns().size(), 2u);
}

TEST_F(DnsResolverTest, ResetsAStreamWithAZeroLengthFrame) {
  SetPolicy({"api.example.com"});
  auto [tunnel, guest] = SocketTunnel::Make(TunnelInfo{TunnelInfo::Kind::kDns, {}, 0});
  ASSERT_TRUE(SendAllTo(guest.get(), std::string(2, '\0')));
  Make()->Serve(*tunnel);
  EXPECT_TRUE(tunnel->observations()->reset);
}

}  // namespace
}  // namespace abox::net
