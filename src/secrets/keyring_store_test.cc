// The keyring store needs a desktop Secret Service, which CI and this test do not assume: these
// tests cover the probe's answers without one and the fallback to the file store.
#include "src/secrets/keyring_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/child_process.h"
#include "src/base/io.h"

// LeakSanitizer (the sanitize build): libsecret 0.20.5 leaks 8 bytes per item that
// secret_password_search_sync finds (a GAsyncInitable closure in secret_item_new_for_dbus_path,
// none of ours: the stacks run through libsecret and GIO only). Only that frame is suppressed.
// GLib has no frame pointers, so the allocation stacks are unwound the slow way to see it.
extern "C" const char* __lsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier)
  return "leak:secret_item_new_for_dbus_path\n";
}
extern "C" const char* __asan_default_options() {  // NOLINT(bugprone-reserved-identifier)
  return "fast_unwind_on_malloc=0";
}

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
    root_ = fs::path(templ).lexically_normal();
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

// A private session bus (dbus-daemon) listening in `dir`, and its address.
struct PrivateBus {
  base::ChildProcess daemon;
  std::string address;
};
std::optional<PrivateBus> StartPrivateBus(const fs::path& dir) {
  auto daemon_path = base::FindExecutable("dbus-daemon");
  if (!daemon_path) {
    return std::nullopt;
  }
  auto out = base::MakePipe();
  EXPECT_TRUE(out.ok());
  fs::path config = dir / "bus.conf";
  EXPECT_TRUE(base::WriteFileAtomic(config.string(), R"(<!DOCTYPE busconfig PUBLIC
 "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=)" + dir.string() + R"(</listen>
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
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) {
    return std::nullopt;
  }
  out->write.reset();
  PrivateBus bus{std::move(*daemon), ""};
  char c;
  while (bus.address.size() < 4096) {
    auto n = base::ReadSome(out->read.get(), &c, 1);
    if (!n.ok() || *n == 0 || c == '\n') {
      break;
    }
    bus.address.push_back(c);
  }
  EXPECT_THAT(bus.address, StartsWith("unix:"));
  return bus;
}

TEST_F(KeyringStoreTest, ABusWithoutASecretServiceIsNoKeyring) {
  std::optional<PrivateBus> bus = StartPrivateBus(root_);
  if (!bus) {
    GTEST_SKIP() << "dbus-daemon is not installed";
  }
  ScopedBusAddress address(bus->address);
  absl::Status probe = KeyringValueStore::Probe({.abox_home = root_.string()});
  EXPECT_FALSE(probe.ok());
  EXPECT_THAT(probe.message(), HasSubstr("keyring"));
}

// Runs only where gnome-keyring is installed (not a dependency): a real Secret Service on a
// private bus, with a fresh login keyring unlocked by a password on stdin.
TEST_F(KeyringStoreTest, RoundTripThroughGnomeKeyringWhenInstalled) {
  auto keyring_path = base::FindExecutable("gnome-keyring-daemon");
  std::optional<PrivateBus> bus;
  if (keyring_path) {
    bus = StartPrivateBus(root_);
  }
  if (!bus) {
    GTEST_SKIP() << "needs dbus-daemon and gnome-keyring-daemon";
  }
  fs::path home = root_ / "home";
  fs::path run = root_ / "run";
  fs::create_directories(home);
  fs::create_directories(run);
  ::chmod(run.c_str(), 0700);
  auto password = base::MakePipe();
  ASSERT_TRUE(password.ok());
  auto keyring = base::ChildProcess::Spawn(
      {.argv = {*keyring_path, "--foreground", "--unlock", "--components=secrets"},
       .env = std::vector<std::string>{"PATH=/usr/bin:/bin", "HOME=" + home.string(),
                                       "XDG_RUNTIME_DIR=" + run.string(),
                                       "DBUS_SESSION_BUS_ADDRESS=" + bus->address},
       .stdin_fd = password->read.get()});
  ASSERT_TRUE(keyring.ok()) << keyring.status();
  password->read.reset();
  ASSERT_TRUE(base::WriteAll(password->write.get(), "test-password").ok());
  password->write.reset();

  ScopedBusAddress address(bus->address);
  KeyringOptions options{.abox_home = "/home/a/abox"};
  absl::Status probe;
  for (int i = 0; i < 100; ++i) {  // until the daemon has claimed its bus name
    probe = KeyringValueStore::Probe(options);
    if (probe.ok()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(probe.ok()) << probe;

  auto store = KeyringValueStore::Create(options);
  auto other_home = KeyringValueStore::Create({.abox_home = "/home/b/abox"});
  EXPECT_EQ(store->Describe(), "keyring");
  std::string binary("tok\0\xff", 5);
  ASSERT_TRUE(store->Put("GH_TOKEN", SecretValue(std::string("ghp_from_keyring"))).ok());
  ASSERT_TRUE(store->Put("BIN", SecretValue(std::string(binary))).ok());
  ASSERT_TRUE(store->Put("GH_TOKEN", SecretValue(std::string("ghp_rotated"))).ok());
  ASSERT_TRUE(other_home->Put("GH_TOKEN", SecretValue(std::string("other-home"))).ok());

  auto value = store->Get("GH_TOKEN");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Reveal(), "ghp_rotated");
  EXPECT_EQ(store->Get("BIN")->Reveal(), binary);
  EXPECT_EQ(other_home->Get("GH_TOKEN")->Reveal(), "other-home");
  EXPECT_THAT(*store->List(), ::testing::ElementsAre("BIN", "GH_TOKEN"));
  EXPECT_THAT(*other_home->List(), ::testing::ElementsAre("GH_TOKEN"));

  ASSERT_TRUE(store->Remove("GH_TOKEN").ok());
  EXPECT_EQ(store->Get("GH_TOKEN").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Remove("GH_TOKEN").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(other_home->Get("GH_TOKEN")->Reveal(), "other-home");

  // The default store keys items by the secrets directory's parent, the abox home.
  auto opened = OpenDefaultValueStore("/home/a/abox/secrets/");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->store->Describe(), "keyring");
  EXPECT_EQ(opened->warning, "");
  auto through_default = opened->store->Get("BIN");
  ASSERT_TRUE(through_default.ok()) << through_default.status();
  EXPECT_EQ(through_default->Reveal(), binary);
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
