// The keyring store needs a desktop Secret Service, which CI and this test do not assume: these
// tests cover the probe's answers without one and the fallback to the file store.
#include "src/secrets/keyring_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/io.h"

namespace abox::secrets {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* NoEnvironment(const char* /*name*/) { return nullptr; }

// Sets DBUS_SESSION_BUS_ADDRESS for the test's duration (libsecret reads the real environment).
class ScopedBusAddress {
 public:
  explicit ScopedBusAddress(const std::string& address) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): tests run on one thread
    if (const char* old = ::getenv("DBUS_SESSION_BUS_ADDRESS")) {
      old_ = old;
    }
    ::setenv("DBUS_SESSION_BUS_ADDRESS", address.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
  ~ScopedBusAddress() {
    if (old_) {
      ::setenv("DBUS_SESSION_BUS_ADDRESS", old_->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    } else {
      ::unsetenv("DBUS_SESSION_BUS_ADDRESS");  // NOLINT(concurrency-mt-unsafe)
    }
  }

 private:
  std::optional<std::string> old_;
};

class KeyringStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/keyring_store_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(KeyringStoreTest, NoSessionBusMeansNoKeyring) {
  absl::Status probe = KeyringValueStore::Probe({.getenv = NoEnvironment});
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(probe.message(), HasSubstr("DBUS_SESSION_BUS_ADDRESS is not set"));
  EXPECT_FALSE(KeyringValueStore::Available({.getenv = NoEnvironment}));
}

TEST_F(KeyringStoreTest, ADeadBusAddressFailsFast) {
  ScopedBusAddress bus("unix:path=" + (root_ / "no-bus-here").string());
  auto start = std::chrono::steady_clock::now();
  absl::Status probe = KeyringValueStore::Probe({.abox_home = root_.string()});
  EXPECT_FALSE(probe.ok());
  // Bounded by the probe timeout, not D-Bus's 25 s default (a bound, not a speed check).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(KeyringStoreTest, ABusWithoutASecretServiceIsNoKeyring) {
  auto daemon_path = base::FindExecutable("dbus-daemon");
  if (!daemon_path) {
    GTEST_SKIP() << "dbus-daemon is not installed";
  }
  auto out = base::MakePipe();
  ASSERT_TRUE(out.ok());
  fs::path config = root_ / "bus.conf";
  ASSERT_TRUE(base::WriteFileAtomic(config.string(), R"(<!DOCTYPE busconfig PUBLIC
 "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=)" + root_.string() + R"(</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
)")
                  .ok());
  auto daemon = base::ChildProcess::Spawn(
      {.argv = {*daemon_path, "--config-file=" + config.string(), "--nofork", "--print-address"},
       .stdout_fd = out->write.get()});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  out->write.reset();
  std::string address;
  char c;
  while (address.size() < 4096) {
    auto n = base::ReadSome(out->read.get(), &c, 1);
    if (!n.ok() || *n == 0 || c == '\n') {
      break;
    }
    address.push_back(c);
  }
  ASSERT_THAT(address, StartsWith("unix:"));
  ScopedBusAddress bus(address);
  absl::Status probe = KeyringValueStore::Probe({.abox_home = root_.string()});
  EXPECT_FALSE(probe.ok());
  EXPECT_THAT(probe.message(), HasSubstr("keyring"));
}

TEST_F(KeyringStoreTest, WithoutAKeyringTheFileStoreIsChosenWithAWarning) {
  fs::path dir = root_ / "home" / "secrets";
  auto opened = OpenDefaultValueStore(dir, {.getenv = NoEnvironment});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->store->Describe(), "file " + (dir / "values.json").string());
  EXPECT_THAT(opened->warning, HasSubstr("no desktop keyring"));
  EXPECT_THAT(opened->warning, HasSubstr((dir / "values.json").string()));
  EXPECT_THAT(opened->warning, HasSubstr("0600"));
  EXPECT_EQ(opened->warning.find('\n'), std::string::npos);  // one line

  ASSERT_TRUE(opened->store->Put("A", SecretValue(std::string("v"))).ok());
  EXPECT_EQ(opened->store->Get("A")->Reveal(), "v");
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(KeyringStoreTest, FallbackReportsAnUnusableDirectory) {
  fs::path dir = root_ / "secrets";
  ASSERT_TRUE(fs::create_directory(dir));
  ::chmod(dir.c_str(), 0755);
  auto opened = OpenDefaultValueStore(dir, {.getenv = NoEnvironment});
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(opened.status().message(), HasSubstr("chmod 700"));
}

}  // namespace
}  // namespace abox::secrets
