#include "src/net/host_resolver.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace abox::net {
namespace {

using ::testing::HasSubstr;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

TEST(ParseResolverOverrideTest, NormalisesNamesAndParsesAddresses) {
  absl::StatusOr<ResolverOverride> o =
      ParseResolverOverride(R"({"Web.Test.": ["127.0.0.1", "::1", "127.0.0.1"]})");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->count("web.test"), 1u);
  EXPECT_EQ(o->at("web.test"), (std::vector<IpAddress>{Ip("127.0.0.1"), Ip("::1")}));
}

TEST(ParseResolverOverrideTest, RefusesBadInput) {
  for (const char* bad : {
           "[]",                                                 // not an object
           "{",                                                  // not JSON
           R"({"web.test": []})",                                // no address
           R"({"web.test": "127.0.0.1"})",                       // not a list
           R"({"web.test": ["localhost"]})",                     // not a literal
           R"({"web.test": [1]})",                               // not a string
           R"({"1.2.3.4": ["127.0.0.1"]})",                      // not a host name
           R"({"a.test": ["1.1.1.1"], "A.test": ["1.1.1.1"]})",  // same name twice
       }) {
    EXPECT_FALSE(ParseResolverOverride(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseResolverOverride(R"({"web.test": ["nope"]})").status().message()),
              HasSubstr("web.test"));
}

TEST(HostResolverTest, FlagsOverriddenAnswersOnly) {
  HostResolver::Options options;
  options.override_map = {{"fake.test", {Ip("127.0.0.1")}}};
  options.lookup = [](const std::string& name,
                      absl::Time) -> absl::StatusOr<std::vector<IpAddress>> {
    EXPECT_EQ(name, "real.test");  // normalised before the lookup
    return std::vector<IpAddress>{Ip("127.0.0.1"), Ip("127.0.0.1"), Ip("93.184.216.34")};
  };
  auto resolver = HostResolver::Create(std::move(options));
  ASSERT_TRUE(resolver.ok());

  absl::StatusOr<Resolution> fake = (*resolver)->Resolve("Fake.Test", absl::InfiniteFuture());
  ASSERT_TRUE(fake.ok());
  EXPECT_TRUE(fake->from_override);
  FilteredAddresses fake_filtered = FilterAddresses(*fake);
  EXPECT_EQ(fake_filtered.usable, std::vector<IpAddress>{Ip("127.0.0.1")});

  absl::StatusOr<Resolution> real = (*resolver)->Resolve("REAL.test.", absl::InfiniteFuture());
  ASSERT_TRUE(real.ok());
  EXPECT_FALSE(real->from_override);
  EXPECT_EQ(real->addresses.size(), 2u);  // deduplicated
  FilteredAddresses filtered = FilterAddresses(*real);
  EXPECT_EQ(filtered.usable, std::vector<IpAddress>{Ip("93.184.216.34")});
  ASSERT_EQ(filtered.refused.size(), 1u);
  EXPECT_THAT(filtered.refused[0], HasSubstr("127.0.0.1 (loopback"));
}

TEST(HostResolverTest, RefusesLiteralsAndBadNames) {
  auto resolver = HostResolver::Create({});
  ASSERT_TRUE(resolver.ok());
  EXPECT_TRUE(
      absl::IsInvalidArgument((*resolver)->Resolve("127.0.0.1", absl::InfiniteFuture()).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*resolver)->Resolve("[::1]", absl::InfiniteFuture()).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*resolver)->Resolve("127.1", absl::InfiniteFuture()).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument((*resolver)->Resolve("a b.test", absl::InfiniteFuture()).status()));
}

TEST(HostResolverTest, RefusesAnOverrideThatIsNotNormalised) {
  HostResolver::Options options;
  options.override_map = {{"Upper.Test", {Ip("127.0.0.1")}}};
  EXPECT_FALSE(HostResolver::Create(std::move(options)).ok());
}

TEST(HostResolverTest, PassesLookupErrorsOn) {
  HostResolver::Options options;
  options.lookup = [](const std::string&, absl::Time) -> absl::StatusOr<std::vector<IpAddress>> {
    return absl::NotFoundError("no such name");
  };
  auto resolver = HostResolver::Create(std::move(options));
  ASSERT_TRUE(resolver.ok());
  EXPECT_TRUE(absl::IsNotFound((*resolver)->Resolve("x.test", absl::InfiniteFuture()).status()));
}

TEST(FilterAddressesTest, RefusesEveryInternalRangeOutsideTheOverride) {
  Resolution r;
  r.addresses = {Ip("127.0.0.1"), Ip("10.0.0.1"), Ip("169.254.169.254"), Ip("100.64.0.1"),
                 Ip("224.0.0.1"), Ip("fd00::1"),  Ip("fe80::1"),         Ip("::ffff:127.0.0.1")};
  FilteredAddresses f = FilterAddresses(r);
  EXPECT_TRUE(f.usable.empty());
  EXPECT_EQ(f.refused.size(), r.addresses.size());
  EXPECT_THAT(OnlyRefusedReason("evil.test", f),
              HasSubstr("evil.test resolves only to addresses the proxy refuses"));
  r.from_override = true;
  EXPECT_EQ(FilterAddresses(r).usable.size(), r.addresses.size());
}

TEST(HostResolverTest, FilterRefusesTheHostsInterfaceAddressesAskedAtEachDecision) {
  std::vector<IpAddress> interfaces = {Ip("93.184.216.34")};
  int asked = 0;
  HostResolver::Options options;
  options.interface_addresses = [&]() -> absl::StatusOr<std::vector<IpAddress>> {
    ++asked;
    return interfaces;
  };
  auto resolver = HostResolver::Create(std::move(options));
  ASSERT_TRUE(resolver.ok());
  Resolution r{{Ip("93.184.216.34"), Ip("::ffff:93.184.216.34"), Ip("1.1.1.1")}, false};
  FilteredAddresses f = (*resolver)->Filter(r);
  EXPECT_EQ(f.usable, std::vector<IpAddress>{Ip("1.1.1.1")});
  ASSERT_EQ(f.refused.size(), 2u);
  EXPECT_THAT(f.refused[0], HasSubstr("an address of this host"));
  // An interface that appears later is refused from then on (no cached list).
  interfaces.push_back(Ip("1.1.1.1"));
  EXPECT_TRUE((*resolver)->Filter(r).usable.empty());
  EXPECT_EQ(asked, 2);
  // The override skips the filter (and does not ask).
  r.from_override = true;
  EXPECT_EQ((*resolver)->Filter(r).usable.size(), 3u);
  EXPECT_EQ(asked, 2);
}

TEST(HostResolverTest, FilterRefusesEverythingWhenTheInterfacesCannotBeListed) {
  HostResolver::Options options;
  options.interface_addresses = []() -> absl::StatusOr<std::vector<IpAddress>> {
    return absl::InternalError("getifaddrs: no memory");
  };
  auto resolver = HostResolver::Create(std::move(options));
  ASSERT_TRUE(resolver.ok());
  FilteredAddresses f = (*resolver)->Filter(Resolution{{Ip("1.1.1.1")}, false});
  EXPECT_TRUE(f.usable.empty());
  ASSERT_EQ(f.refused.size(), 1u);
  EXPECT_THAT(f.refused[0], HasSubstr("getifaddrs: no memory"));
}

TEST(SystemInterfaceAddressesTest, ListsLoopback) {
  absl::StatusOr<std::vector<IpAddress>> own = SystemInterfaceAddresses();
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_NE(std::find(own->begin(), own->end(), Ip("127.0.0.1")), own->end());
}

TEST(SystemLookupTest, LooksNamesUpAsAbsoluteSoNoSearchDomainIsTried) {
  EXPECT_EQ(AbsoluteLookupName("db.internal"), "db.internal.");
  EXPECT_EQ(AbsoluteLookupName("example.com."), "example.com.");
}

// A real getaddrinfo without network. The lookup is absolute ("localhost."), which glibc's
// /etc/hosts backend does not match, so without a DNS server that answers it the name is not
// found; whatever answers, the filter refuses loopback.
TEST(SystemLookupTest, LooksUpLocalhostAbsoluteAndTheFilterRefusesIt) {
  absl::StatusOr<std::vector<IpAddress>> addresses =
      SystemLookup("localhost", absl::InfiniteFuture());  // regression: no clock overflow
  if (!addresses.ok()) {
    EXPECT_TRUE(absl::IsNotFound(addresses.status()) || absl::IsUnavailable(addresses.status()) ||
                absl::IsInternal(addresses.status()))
        << addresses.status();
    EXPECT_THAT(std::string(addresses.status().message()), HasSubstr("getaddrinfo(localhost)"));
    return;
  }
  ASSERT_FALSE(addresses->empty());
  Resolution r{*addresses, false};
  EXPECT_TRUE(FilterAddresses(r).usable.empty());
}

}  // namespace
}  // namespace abox::net
