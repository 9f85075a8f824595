#include "src/net/address_filter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace abox::net {
namespace {

AddressClass ClassOf(const std::string& text) {
  std::optional<IpAddress> ip = IpAddress::Parse(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip ? ClassifyAddress(*ip).address_class : AddressClass::kPublic;
}

struct Boundary {
  const char* first;  // first address inside the range
  const char* last;   // last address inside
  const char* below;  // just outside, below (public)
  const char* above;  // just outside, above (public)
  AddressClass address_class;
};

// Each refused range at its edges, with the neighbouring public addresses.
TEST(AddressFilterTest, RefusesEachIpv4RangeExactlyToItsEdges) {
  std::vector<Boundary> ranges = {
      {"0.0.0.0", "0.255.255.255", nullptr, "1.0.0.0", AddressClass::kUnspecified},
      {"10.0.0.0", "10.255.255.255", "9.255.255.255", "11.0.0.0", AddressClass::kPrivate},
      {"100.64.0.0", "100.127.255.255", "100.63.255.255", "100.128.0.0",
       AddressClass::kSharedCgnat},
      {"127.0.0.0", "127.255.255.255", "126.255.255.255", "128.0.0.0", AddressClass::kLoopback},
      {"169.254.0.0", "169.254.255.255", "169.253.255.255", "169.255.0.0",
       AddressClass::kLinkLocal},
      {"172.16.0.0", "172.31.255.255", "172.15.255.255", "172.32.0.0", AddressClass::kPrivate},
      {"192.0.0.0", "192.0.0.255", "191.255.255.255", "192.0.1.0", AddressClass::kIetfProtocol},
      {"192.0.2.0", "192.0.2.255", "192.0.1.255", "192.0.3.0", AddressClass::kDocumentation},
      {"192.168.0.0", "192.168.255.255", "192.167.255.255", "192.169.0.0", AddressClass::kPrivate},
      {"198.18.0.0", "198.19.255.255", "198.17.255.255", "198.20.0.0", AddressClass::kBenchmarking},
      {"198.51.100.0", "198.51.100.255", "198.51.99.255", "198.51.101.0",
       AddressClass::kDocumentation},
      {"203.0.113.0", "203.0.113.255", "203.0.112.255", "203.0.114.0",
       AddressClass::kDocumentation},
      {"224.0.0.0", "239.255.255.255", "223.255.255.255", nullptr, AddressClass::kMulticast},
      {"240.0.0.0", "255.255.255.254", nullptr, nullptr, AddressClass::kReserved},
  };
  for (const Boundary& r : ranges) {
    EXPECT_EQ(ClassOf(r.first), r.address_class) << r.first;
    EXPECT_EQ(ClassOf(r.last), r.address_class) << r.last;
    if (r.below != nullptr) {
      EXPECT_EQ(ClassOf(r.below), AddressClass::kPublic) << r.below;
    }
    if (r.above != nullptr) {
      EXPECT_EQ(ClassOf(r.above), AddressClass::kPublic) << r.above;
    }
  }
  EXPECT_EQ(ClassOf("255.255.255.255"), AddressClass::kBroadcast);
}

TEST(AddressFilterTest, NamesTheMetadataServiceSpecially) {
  auto ip = IpAddress::Parse("169.254.169.254");
  ASSERT_TRUE(ip);
  AddressVerdict verdict = ClassifyAddress(*ip);
  EXPECT_EQ(verdict.address_class, AddressClass::kCloudMetadata);
  EXPECT_NE(verdict.reason.find("metadata"), std::string::npos);
  EXPECT_EQ(ClassOf("169.254.169.253"), AddressClass::kLinkLocal);
  EXPECT_EQ(ClassOf("fd00:ec2::254"), AddressClass::kCloudMetadata);
  EXPECT_EQ(AddressClassName(AddressClass::kCloudMetadata), "cloud-metadata");
}

TEST(AddressFilterTest, RefusesEveryKnownCloudMetadataAddress) {
  // 168.63.129.16 sits in public space and 100.100.100.200 in CGNAT, which an address rule
  // could open: as metadata, neither can ever be allowed.
  for (const char* text :
       {"168.63.129.16", "100.100.100.200", "169.254.170.2", "169.254.170.23", "169.254.0.23",
        "192.0.0.192", "fd00:ec2::23", "::ffff:168.63.129.16", "64:ff9b::a83f:8110"}) {
    EXPECT_EQ(ClassOf(text), AddressClass::kCloudMetadata) << text;
  }
  EXPECT_EQ(ClassOf("168.63.129.15"), AddressClass::kPublic);
  EXPECT_EQ(ClassOf("168.63.129.17"), AddressClass::kPublic);
  EXPECT_EQ(ClassOf("100.100.100.201"), AddressClass::kSharedCgnat);
  EXPECT_EQ(ClassOf("192.0.0.193"), AddressClass::kIetfProtocol);
}

TEST(AddressFilterTest, RefusesTheHostsOwnAddressesInEveryForm) {
  std::vector<IpAddress> own = {*IpAddress::Parse("93.184.216.34"),
                                *IpAddress::Parse("2606:2800:220:1::1")};
  for (const char* text : {"93.184.216.34", "::ffff:93.184.216.34", "64:ff9b::5db8:d822",
                           "2002:5db8:d822::1", "2606:2800:220:1::1"}) {
    std::optional<std::string> why = HostAddressReason(*IpAddress::Parse(text), own);
    ASSERT_TRUE(why.has_value()) << text;
    EXPECT_NE(why->find("an address of this host"), std::string::npos) << *why;
  }
  EXPECT_EQ(HostAddressReason(*IpAddress::Parse("93.184.216.35"), own), std::nullopt);
  EXPECT_EQ(HostAddressReason(*IpAddress::Parse("93.184.216.34"), {}), std::nullopt);
}

TEST(AddressFilterTest, AllowsPublicAddresses) {
  for (const char* text : {"1.1.1.1", "8.8.8.8", "93.184.215.14", "2606:4700:4700::1111",
                           "2a00:1450:4001:80b::200e", "2001:4860:4860::8888"}) {
    auto ip = IpAddress::Parse(text);
    ASSERT_TRUE(ip) << text;
    EXPECT_EQ(RefusalReason(*ip), std::nullopt) << text;
  }
}

TEST(AddressFilterTest, RefusesEachIpv6Range) {
  std::vector<std::pair<const char*, AddressClass>> cases = {
      {"::", AddressClass::kUnspecified},
      {"::1", AddressClass::kLoopback},
      {"::2", AddressClass::kReserved},  // IPv4-compatible ::/96
      {"fc00::1", AddressClass::kUniqueLocal},
      {"fdff:ffff::1", AddressClass::kUniqueLocal},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf:ffff::1", AddressClass::kLinkLocal},
      {"fec0::1", AddressClass::kPrivate},
      {"ff02::1", AddressClass::kMulticast},
      {"2001:db8::", AddressClass::kDocumentation},
      {"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", AddressClass::kDocumentation},
      {"3fff::1", AddressClass::kDocumentation},
      {"100::", AddressClass::kDiscardOnly},
      {"100::ffff:ffff:ffff:ffff", AddressClass::kDiscardOnly},
      {"2001::1", AddressClass::kTunnel},
      {"64:ff9b:1::1", AddressClass::kPrivate},
      {"4000::1", AddressClass::kReserved},  // outside 2000::/3
      {"1fff::1", AddressClass::kReserved},
  };
  for (const auto& [text, address_class] : cases) {
    EXPECT_EQ(ClassOf(text), address_class) << text;
    auto ip = IpAddress::Parse(text);
    ASSERT_TRUE(ip);
    EXPECT_TRUE(RefusalReason(*ip).has_value()) << text;
  }
  // Neighbours that are global unicast.
  for (const char* text :
       {"2001:db7:ffff::1", "2001:db9::1", "2001:1::1", "2003::1", "2000::1", "3fff:1000::1"}) {
    EXPECT_EQ(ClassOf(text), AddressClass::kPublic) << text;
  }
}

TEST(AddressFilterTest, JudgesEmbeddedIpv4ByTheAddressItEmbeds) {
  std::vector<std::pair<const char*, AddressClass>> cases = {
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"::ffff:10.1.2.3", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kCloudMetadata},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"64:ff9b::192.168.1.1", AddressClass::kPrivate},
      {"64:ff9b::7f00:1", AddressClass::kLoopback},
      {"64:ff9b::8.8.8.8", AddressClass::kPublic},
      {"2002:7f00:1::", AddressClass::kLoopback},
      {"2002:a9fe:a9fe::1", AddressClass::kCloudMetadata},
      {"2002:0808:0808::1", AddressClass::kPublic},
  };
  for (const auto& [text, address_class] : cases) {
    EXPECT_EQ(ClassOf(text), address_class) << text;
  }
  auto mapped = IpAddress::Parse("::ffff:127.0.0.1");
  ASSERT_TRUE(mapped);
  std::optional<std::string> reason = RefusalReason(*mapped);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("embeds 127.0.0.1"), std::string::npos) << *reason;
}

TEST(AddressFilterTest, ParsesOnlyStrictLiterals) {
  for (const char* bad :
       {"", "127.1", "0x7f000001", "2130706433", "010.0.0.1", "1.2.3.4.5", "1.2.3", "256.1.1.1",
        "::1%lo", "[::1]", "example.com", " 1.2.3.4", "fe80::1%eth0"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).has_value()) << bad;
  }
  EXPECT_FALSE(IpAddress::Parse(std::string("1.2.3.4\0junk", 12)).has_value());
  auto v6 = IpAddress::Parse("2001:DB8:0:0::1");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->ToString(), "2001:db8::1");
  EXPECT_EQ(v6->ToUriHost(), "[2001:db8::1]");
  EXPECT_FALSE(v6->is_v4());
  auto v4 = IpAddress::Parse("10.0.0.5");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->ToUriHost(), "10.0.0.5");
  EXPECT_EQ(*v4, IpAddress::V4({10, 0, 0, 5}));
}

TEST(AddressFilterTest, RecognisesIpLiteralHostNames) {
  EXPECT_TRUE(IsIpLiteralHost("192.0.2.1"));
  EXPECT_TRUE(IsIpLiteralHost("2001:db8::1"));
  EXPECT_TRUE(IsIpLiteralHost("[2001:db8::1]"));
  EXPECT_FALSE(IsIpLiteralHost("[192.0.2.1]"));  // brackets hold IPv6 only
  EXPECT_FALSE(IsIpLiteralHost("[2001:db8::1"));
  EXPECT_FALSE(IsIpLiteralHost("api.github.com"));
  EXPECT_FALSE(IsIpLiteralHost("1.2.3.4.example"));
}

}  // namespace
}  // namespace abox::net
