#include "src/daemon/lifecycle/checkpoints.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A VMM that saves nothing and reports, per run dir, the frozen disk layers its VM stands on.
class LayersVmm final : public vmm::Vmm {
 public:
  [[nodiscard]] const char* name() const override { return "layers"; }
  absl::StatusOr<std::unique_ptr<vmm::Vm>> StartVm(const vmm::VmSpec&) override {
    return absl::UnimplementedError("no VMs here");
  }
  absl::StatusOr<std::unique_ptr<vmm::Vm>> Attach(const std::string&) override {
    return absl::UnimplementedError("no VMs here");
  }
  std::vector<std::string> DiskLayers(const std::string& run_dir) override {
    auto it = layers.find(fs::path(run_dir).filename().string());
    return it == layers.end() ? std::vector<std::string>{} : it->second;
  }
  std::map<std::string, std::vector<std::string>> layers;  // run dir name -> layers
};

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/abox-checkpoints-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    layout_.home = tmpl;
    fs::create_directories(layout_.SandboxesDir());
  }
  void TearDown() override { fs::remove_all(layout_.home); }

  // A checkpoint folder as Save leaves it (files empty: nothing here reads them).
  fs::path Plant(const std::string& sandbox, const std::string& id, const std::string& name,
                 int64_t created_ms) {
    fs::path dir = layout_.home / "checkpoints" / sandbox / id;
    fs::create_directories(dir);
    std::ofstream(dir / "state") << "x";
    std::ofstream(dir / "disk.qcow2") << "x";
    nlohmann::json info = {{"id", id},
                           {"name", name},
                           {"sandbox_id", sandbox},
                           {"image", "default"},
                           {"cpus", 1},
                           {"memory_mib", 512},
                           {"disk_layers", nlohmann::json::array()},
                           {"workspace", false},
                           {"pause", false},
                           {"created_at_ms", created_ms},
                           {"save_ms", 100}};
    std::ofstream(dir / "checkpoint.json") << info.dump();
    return dir;
  }

  base::HostLayout layout_;
  LayersVmm vmm_;
};

TEST_F(CheckpointStoreTest, ListsOldestFirstAndFindsByIdNameOrPrefix) {
  Plant("sb1", "ck0000000002", "later", 2000);
  Plant("sb1", "ck1111111111", "ck1111111111", 1000);
  CheckpointStore store(vmm_, layout_, uint64_t{1} << 30);
  std::vector<CheckpointInfo> all = store.List("sb1");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "ck1111111111");
  EXPECT_EQ(all[1].name, "later");
  EXPECT_GT(all[0].bytes, 0u);
  EXPECT_EQ(store.Find("sb1", "later")->id, "ck0000000002");
  EXPECT_EQ(store.Find("sb1", "ck11")->id, "ck1111111111");
  absl::StatusOr<CheckpointInfo> ambiguous = store.Find("sb1", "ck");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<CheckpointInfo> missing = store.Find("sb1", "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("later (ck0000000002)"));
  EXPECT_THAT(store.Find("sb2", "x").status().message(), HasSubstr("it has none"));
}

TEST_F(CheckpointStoreTest, ADamagedRecordIsSkippedNotACrash) {
  Plant("sb1", "ck0000000001", "good", 1000);
  fs::path bad = Plant("sb1", "ck0000000002", "bad", 2000);
  for (const char* text : {"not json", "[]", R"({"id": 5})", R"({"id":"x","cpus":0})"}) {
    std::ofstream(bad / "checkpoint.json", std::ios::trunc) << text;
    CheckpointStore store(vmm_, layout_, uint64_t{1} << 30);
    std::vector<CheckpointInfo> all = store.List("sb1");
    ASSERT_EQ(all.size(), 1u) << text;
    EXPECT_EQ(all[0].name, "good");
  }
}

// A crash in the middle of a save leaves a dot-folder: never listed, removed at the next start.
TEST_F(CheckpointStoreTest, WhatACrashLeftIsNeverListedAndGoesAtStart) {
  Plant("sb1", "ck0000000001", "kept", 1000);
  fs::path half = layout_.home / "checkpoints" / "sb1" / ".incomplete-ck0000000002";
  fs::create_directories(half);
  std::ofstream(half / "state") << "partial";
  CheckpointStore store(vmm_, layout_, uint64_t{1} << 30);
  EXPECT_EQ(store.List("sb1").size(), 1u);
  store.RemoveIncomplete();
  EXPECT_FALSE(fs::exists(half));
  EXPECT_TRUE(fs::exists(layout_.home / "checkpoints" / "sb1" / "ck0000000001"));
}

// A checkpoint a VM's disk stands on (a fork, or the sandbox restored from it) is kept until
// that VM is gone; then the checkpoints of removed sandboxes go.
TEST_F(CheckpointStoreTest, ACheckpointInUseIsKeptUntilItsLastUserGoes) {
  fs::path dir = Plant("parent", "ck0000000001", "base", 1000);
  vmm_.layers["fork1"] = {(dir / "disk.qcow2").string()};
  fs::create_directories(layout_.SandboxesDir() / "fork1");
  CheckpointStore store(vmm_, layout_, uint64_t{1} << 30);
  absl::Status refused = store.Remove(*store.Find("parent", "base"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("fork1"));
  EXPECT_EQ(store.RemoveOrphans({"fork1"}), 0);  // parent is gone, but fork1 stands on it
  EXPECT_TRUE(fs::exists(dir));

  fs::remove_all(layout_.SandboxesDir() / "fork1");  // the fork's VM went
  EXPECT_EQ(store.RemoveOrphans({}), 1);
  EXPECT_FALSE(fs::exists(layout_.home / "checkpoints" / "parent"));
}

}  // namespace
}  // namespace abox::daemon
