// SyncIn's content check, with fake guest tools that record whether the guest was contacted:
// a refusal comes before anything reaches the guest and changes nothing on either side; the
// check sees exactly the bytes sent, in order, and only what a sync sends. The sync itself, end
// to end with the real guest tools: src/daemon/workspace_api_test.cc.
#include "src/workspace/sync.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadWholeFile;
using testing::ScratchDir;
using testing::WriteWholeFile;

// Takes the archive without unpacking it; counts the runs.
class RecordingTools final : public GuestTools {
 public:
  absl::Status Run(const std::vector<std::string>& /*args*/, const InputFn& input,
                   const OutputFn& /*output*/) override {
    ++runs;
    return input([&](absl::string_view data) {
      archive_bytes += data.size();
      return absl::OkStatus();
    });
  }
  int runs = 0;
  uint64_t archive_bytes = 0;
};

// Records what each file's scanner was fed; refuses content holding `refuse` (when set), as
// the daemon's check refuses a stored secret's value (which may straddle chunks).
struct RecordingCheck {
  std::map<std::string, std::string> seen;
  std::map<std::string, size_t> chunks;
  std::string refuse;

  ContentCheckFn Fn() {
    return [this](const std::string& path) -> ContentScanFn {
      seen[path].clear();  // a file may be empty
      return [this, path](absl::string_view data) -> absl::Status {
        seen[path].append(data.data(), data.size());
        ++chunks[path];
        if (!refuse.empty() && absl::StrContains(seen[path], refuse)) {
          return absl::PermissionDeniedError(absl::StrCat(path, " holds it"));
        }
        return absl::OkStatus();
      };
    };
  }
};

class SyncCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = fs::canonical(dir_.path()).string() + "/host";
    fs::create_directories(host_);
  }

  std::unique_ptr<WorkspaceState> NewState() {
    Binding binding;
    binding.host_root = host_;
    auto state = WorkspaceState::Create(dir_ / "state", binding);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *std::move(state) : nullptr;
  }

  void Write(const std::string& rel, const std::string& content) {
    WriteWholeFile(fs::path(host_) / rel, content);
  }

  ScratchDir dir_{"abox-sync-test"};
  std::string host_;
};

TEST_F(SyncCheckTest, ARefusedFileStopsTheSyncBeforeTheGuestIsContacted) {
  Write("a.txt", "fine\n");
  Write("src/config.js", "const token = 'REAL-VALUE';\n");
  Write("z.txt", "after\n");
  std::unique_ptr<WorkspaceState> state = NewState();
  ASSERT_NE(state, nullptr);
  RecordingTools tools;
  RecordingCheck check{.refuse = "REAL-VALUE"};

  absl::StatusOr<SyncReport> report = SyncIn(*state, tools, nullptr, check.Fn());
  ASSERT_EQ(report.status().code(), absl::StatusCode::kPermissionDenied) << report.status();
  EXPECT_THAT(report.status().message(), HasSubstr("src/config.js holds it"));
  EXPECT_EQ(tools.runs, 0) << "the guest was contacted";
  EXPECT_TRUE(state->base().empty());
  EXPECT_EQ(state->sync_count(), 0u);
  EXPECT_FALSE(state->objects().Has(Sha256Hex("const token = 'REAL-VALUE';\n")))
      << "the refused content was kept";
  EXPECT_EQ(ReadWholeFile(fs::path(host_) / "src/config.js"), "const token = 'REAL-VALUE';\n");

  // Once the value is gone from the file, the same sync goes through.
  Write("src/config.js", "const token = process.env.GH_TOKEN;\n");
  report = SyncIn(*state, tools, nullptr, check.Fn());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(tools.runs, 1);
  EXPECT_EQ(state->base().at("src/config.js").sha256,
            Sha256Hex("const token = process.env.GH_TOKEN;\n"));
}

TEST_F(SyncCheckTest, TheCheckSeesEveryByteSentInOrderAndOnlyWhatASyncSends) {
  std::string big;
  for (int i = 0; big.size() < 300000; ++i) {
    absl::StrAppend(&big, "line ", i, "\n");
  }
  Write("big.txt", big);
  Write("small.txt", "small\n");
  Write("empty", "");
  ASSERT_EQ(::symlink("small.txt", (fs::path(host_) / "link").c_str()), 0);
  std::unique_ptr<WorkspaceState> state = NewState();
  ASSERT_NE(state, nullptr);
  RecordingTools tools;
  RecordingCheck check;

  absl::StatusOr<SyncReport> report = SyncIn(*state, tools, nullptr, check.Fn());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(tools.runs, 1);
  EXPECT_EQ(check.seen["big.txt"], big);
  EXPECT_GT(check.chunks["big.txt"], 1u) << "a big file is scanned in chunks, not held whole";
  EXPECT_EQ(check.seen["small.txt"], "small\n");
  EXPECT_EQ(check.seen["empty"], "");
  EXPECT_EQ(check.seen["link"], "small.txt");  // a symlink: its target
  EXPECT_EQ(state->base().at("big.txt").sha256, Sha256Hex(big));

  // The next sync sends (and checks) only the changed file.
  check.seen.clear();
  Write("small.txt", "changed\n");
  report = SyncIn(*state, tools, nullptr, check.Fn());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->files, 1u);
  std::vector<std::string> checked;
  for (const auto& [path, data] : check.seen) {
    checked.push_back(path);
  }
  EXPECT_THAT(checked, ElementsAre("small.txt"));
  EXPECT_EQ(check.seen["small.txt"], "changed\n");

  // Nothing changed: nothing read, the guest not contacted.
  check.seen.clear();
  report = SyncIn(*state, tools, nullptr, check.Fn());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->changed);
  EXPECT_TRUE(check.seen.empty());
  EXPECT_EQ(tools.runs, 2);
}

TEST_F(SyncCheckTest, WithoutACheckTheSyncSendsTheSameBase) {
  Write("a.txt", "a\n");
  std::unique_ptr<WorkspaceState> state = NewState();
  ASSERT_NE(state, nullptr);
  RecordingTools tools;
  absl::StatusOr<SyncReport> report = SyncIn(*state, tools);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(tools.runs, 1);
  EXPECT_GT(tools.archive_bytes, 0u);
  EXPECT_EQ(state->base().at("a.txt").sha256, Sha256Hex("a\n"));
  EXPECT_TRUE(state->objects().Has(Sha256Hex("a\n")));
}

}  // namespace
}  // namespace abox::workspace
