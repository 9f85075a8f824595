#include "src/image/image_build.h"

#include <elf.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "src/image/fs_util.h"
#include "src/image/image_presets.h"
#include "src/image/image_store.h"
#include "src/image/sha256.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

using ::abox::image::testing::ReadFileOrDie;
using ::abox::image::testing::TempDir;
using ::abox::image::testing::WriteFileOrDie;

// An x86-64 executable; a PT_INTERP segment makes it "dynamic".
std::string Elf(bool dynamic, const std::string& tag) {
  return testing::TestElf(dynamic ? PT_INTERP : PT_LOAD, "", tag);
}

class ImageBuildTest : public ::testing::Test {
 protected:
  ImageBuildTest() {
    paths_.home = tmp_.path() / "home";
    paths_.cache_dir = tmp_.path() / "cache";
    opts_.agent_binary = tmp_.path() / "abox-guest";
    opts_.protocol_version = 7;
    opts_.preset = "minimal";  // SeedCache's package set: abox's own needs only
    WriteFileOrDie(opts_.agent_binary, Elf(false, "agent v1"));
  }

  // Puts a finished rootfs build for opts_ (with `agents`) in the cache, as BuildRootfsEntry
  // would.
  void SeedCache(const std::vector<ResolvedAgent>& agents = {}) {
    RootfsInputs in;
    in.suite = opts_.suite;
    in.mirror = opts_.mirror;
    in.arch = *HostDebianArch();
    in.packages = PackageSet(opts_.extra_packages);
    in.agents = agents;
    const std::filesystem::path dir = paths_.cache_dir / "rootfs" / RootfsCacheKey(in);
    const std::string rootfs = "fake ext4", vmlinux = "fake vmlinux";
    WriteFileOrDie(dir / kRootfsFile, rootfs);
    WriteFileOrDie(dir / kVmlinuxFile, vmlinux);
    WriteFileOrDie(dir / "modules" / "01-virtio.ko", "ko:virtio");
    WriteFileOrDie(dir / "modules" / "02-virtio_blk.ko", "ko:virtio_blk");
    nlohmann::json j = {{"key", RootfsCacheKey(in)},
                        {"kernel_version", "6.1.0-9-cloud-amd64"},
                        {"kernel_package", "6.1.1-1"},
                        {"packages", {"bash=5", "git=2"}},
                        {"modules", {"virtio", "virtio_blk"}},
                        {"rootfs", {{"sha256", Sha256Hex(rootfs)}, {"size", rootfs.size()}}},
                        {"vmlinux", {{"sha256", Sha256Hex(vmlinux)}, {"size", vmlinux.size()}}}};
    WriteFileOrDie(dir / "entry.json", j.dump());
  }

  absl::StatusOr<BuildResult> Build() {
    messages_.clear();
    return BuildImage(paths_, opts_, [&](const Progress& p) {
      EXPECT_EQ(p.total, 5);
      EXPECT_GE(p.stage, 1);
      EXPECT_LE(p.stage, 5);
      messages_.push_back(p.message);
    });
  }

  TempDir tmp_;
  base::HostLayout paths_;
  BuildOptions opts_;
  std::vector<std::string> messages_;
};

TEST(CheckStaticAgentBinaryTest, AcceptsStaticRejectsDynamicAndNonElf) {
  EXPECT_TRUE(CheckStaticAgentBinary(Elf(false, "")).ok());
  absl::Status dyn = CheckStaticAgentBinary(Elf(true, ""));
  EXPECT_EQ(dyn.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dyn.message().find("static"), std::string::npos);
  EXPECT_FALSE(CheckStaticAgentBinary("#!/bin/sh\necho hi\n").ok());
}

TEST(ImageInputsHashTest, DependsOnEveryInput) {
  const std::string k = Sha256Hex("key"), a = Sha256Hex("agent");
  const std::string base = ImageInputsHash(k, a, "1.0", 1);
  EXPECT_EQ(ImageInputsHash(k, a, "1.0", 1), base);
  EXPECT_NE(ImageInputsHash(Sha256Hex("key2"), a, "1.0", 1), base);
  EXPECT_NE(ImageInputsHash(k, Sha256Hex("agent2"), "1.0", 1), base);
  EXPECT_NE(ImageInputsHash(k, a, "1.1", 1), base);
  EXPECT_NE(ImageInputsHash(k, a, "1.0", 2), base);
}

TEST_F(ImageBuildTest, RejectsBadOptionsBeforeDoingWork) {
  opts_.name = "../x";
  EXPECT_EQ(Build().status().code(), absl::StatusCode::kInvalidArgument);
  opts_.name = "default";
  opts_.protocol_version = 0;
  EXPECT_EQ(Build().status().code(), absl::StatusCode::kInvalidArgument);
  opts_.protocol_version = 7;
  WriteFileOrDie(opts_.agent_binary, Elf(true, ""));
  EXPECT_NE(Build().status().message().find("dynamically linked"), std::string::npos);
  opts_.agent_binary = tmp_.path() / "missing";
  EXPECT_NE(Build().status().message().find("missing"), std::string::npos);
  WriteFileOrDie(opts_.agent_binary, Elf(false, "agent v1"));
  opts_.preset = "pyhton";
  EXPECT_NE(Build().status().message().find("unknown image preset 'pyhton'"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(paths_.ImagesDir()));
}

TEST_F(ImageBuildTest, ThePresetIsRecordedAndItsPackagesAreBuiltIn) {
  SeedCache();
  absl::StatusOr<BuildResult> minimal = Build();
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_EQ(minimal->manifest.preset, "minimal");
  // The developer preset is another package set, so another rootfs key (not in the cache).
  RootfsInputs in;
  in.arch = *HostDebianArch();
  in.packages = PackageSet({});
  const std::string minimal_key = RootfsCacheKey(in);
  in.packages = PackageSet((*FindImagePreset("developer"))->packages);
  EXPECT_NE(RootfsCacheKey(in), minimal_key);
  EXPECT_EQ(minimal->manifest.rootfs_key, minimal_key);
}

TEST_F(ImageBuildTest, UsesCacheThenIsNoOpThenRebuildsOnlyInitramfsForNewAgent) {
  SeedCache();
  auto first = Build();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->rootfs_cached);
  EXPECT_FALSE(first->up_to_date);
  const std::filesystem::path dir = paths_.ImageDir("default");
  EXPECT_EQ(ReadFileOrDie(dir / kRootfsFile), "fake ext4");
  EXPECT_EQ(first->manifest.protocol_version, 7u);
  EXPECT_EQ(first->manifest.kernel_version, "6.1.0-9-cloud-amd64");
  EXPECT_EQ(first->manifest.initramfs_modules, (std::vector<std::string>{"virtio", "virtio_blk"}));
  EXPECT_EQ(first->manifest.agent_sha256, Sha256Hex(Elf(false, "agent v1")));
  EXPECT_TRUE(VerifyImage(paths_, "default").ok());
  EXPECT_TRUE(OpenImageForBoot(paths_, "default", 7).ok());

  auto second = Build();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->up_to_date);
  EXPECT_EQ(messages_.back(), "image default is up to date");
  EXPECT_EQ(second->manifest, first->manifest);

  WriteFileOrDie(opts_.agent_binary, Elf(false, "agent v2"));
  auto third = Build();
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->up_to_date);
  EXPECT_TRUE(third->rootfs_cached);
  EXPECT_EQ(third->manifest.artifacts[kRootfsFile].sha256,
            first->manifest.artifacts[kRootfsFile].sha256);
  EXPECT_NE(third->manifest.artifacts[kInitramfsFile].sha256,
            first->manifest.artifacts[kInitramfsFile].sha256);
  EXPECT_NE(third->manifest.inputs, first->manifest.inputs);
  EXPECT_TRUE(VerifyImage(paths_, "default").ok());
  // The installed initramfs holds the new agent as /init.
  EXPECT_NE(ReadFileOrDie(dir / kInitramfsFile).find("agent v2"), std::string::npos);
}

TEST_F(ImageBuildTest, CodingAgentsAreResolvedCachedByVersionAndRecorded) {
  std::string latest = "2.1.332";
  std::vector<std::string> npm_calls;
  opts_.npm = [&](const NpmCommand& c) -> absl::StatusOr<NpmOutput> {
    npm_calls.push_back(c.argv[1] + " " + c.argv[3]);
    const std::string integrity = latest == "2.1.332" ? "sha512-AAA=" : "sha512-BBB=";
    return NpmOutput{{0, std::nullopt},
                     R"({"version": ")" + latest + R"(", "dist.integrity": ")" + integrity + "\"}"};
  };
  opts_.coding_agents = {"claude"};
  const ResolvedAgent v1{"claude", "@anthropic-ai/claude-code", "2.1.332", "sha512-AAA="};
  SeedCache({v1});
  auto first = Build();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->rootfs_cached);  // the cache entry with this version + integrity
  EXPECT_EQ(npm_calls, (std::vector<std::string>{"view @anthropic-ai/claude-code@latest"}));
  ASSERT_EQ(first->manifest.coding_agents.size(), 1u);
  const ManifestAgent& a = first->manifest.coding_agents[0];
  EXPECT_EQ(a.version, "2.1.332");
  EXPECT_EQ(a.integrity, "sha512-AAA=");
  EXPECT_EQ(a.command, "/usr/local/bin/claude");
  EXPECT_EQ(a.binary, "/opt/abox/agents/claude/2.1.332/claude");
  auto listed = ListImages(paths_);
  ASSERT_TRUE(listed.ok() && listed->size() == 1 && (*listed)[0].manifest.ok());
  EXPECT_EQ((*listed)[0].manifest->coding_agents, first->manifest.coding_agents);

  auto again = Build();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->up_to_date);

  // A new release is a new rootfs; its entry is in the cache here, so no mmdebstrap runs.
  latest = "2.1.333";
  SeedCache({{"claude", "@anthropic-ai/claude-code", "2.1.333", "sha512-BBB="}});
  auto newer = Build();
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_FALSE(newer->up_to_date);
  EXPECT_NE(newer->manifest.rootfs_key, first->manifest.rootfs_key);
  EXPECT_EQ(newer->manifest.coding_agents[0].binary, "/opt/abox/agents/claude/2.1.333/claude");
}

TEST_F(ImageBuildTest, UnknownCodingAgentIsRefusedBeforeAnyWork) {
  opts_.coding_agents = {"cursor"};
  opts_.npm = [](const NpmCommand&) -> absl::StatusOr<NpmOutput> {
    ADD_FAILURE() << "npm must not run";
    return absl::InternalError("");
  };
  auto r = Build();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("claude, codex"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(paths_.ImagesDir()));
}

TEST_F(ImageBuildTest, ChangedProtocolRebuildsImage) {
  SeedCache();
  ASSERT_TRUE(Build().ok());
  opts_.protocol_version = 8;
  auto r = Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->up_to_date);
  EXPECT_TRUE(OpenImageForBoot(paths_, "default", 8).ok());
  EXPECT_FALSE(OpenImageForBoot(paths_, "default", 7).ok());
}

TEST_F(ImageBuildTest, DamagedImageIsRebuiltNotReportedUpToDate) {
  SeedCache();
  ASSERT_TRUE(Build().ok());
  std::filesystem::remove(paths_.ImageDir("default") / kVmlinuxFile);
  auto r = Build();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->up_to_date);
  EXPECT_TRUE(VerifyImage(paths_, "default").ok());
}

TEST_F(ImageBuildTest, RemovesStaleTempDirsFromKilledBuilds) {
  SeedCache();
  const std::filesystem::path stale_image = paths_.ImagesDir() / ".tmp-default-AbCdEf";
  const std::filesystem::path stale_build = paths_.cache_dir / "tmp" / "build-XyZ123";
  WriteFileOrDie(stale_image / kRootfsFile, "half");
  WriteFileOrDie(stale_build / "root" / "etc" / "passwd", "half");
  ASSERT_TRUE(Build().ok());
  EXPECT_FALSE(std::filesystem::exists(stale_image));
  EXPECT_FALSE(std::filesystem::exists(stale_build));
  auto list = ListImages(paths_);
  ASSERT_EQ(list->size(), 1u);
}

TEST_F(ImageBuildTest, RefusesToRunConcurrently) {
  std::filesystem::create_directories(paths_.ImagesDir());
  auto lock = FileLock::TryAcquire(paths_.ImagesDir() / ".lock", "test");
  ASSERT_TRUE(lock.ok());
  auto r = Build();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("another `abox image build` is running"), std::string::npos);
}

TEST_F(ImageBuildTest, DamagedCacheEntryIsDiscarded) {
  SeedCache();
  RootfsInputs in;
  in.arch = *HostDebianArch();
  in.packages = PackageSet({});
  const std::string key = RootfsCacheKey(in);
  WriteFileOrDie(paths_.cache_dir / "rootfs" / key / kRootfsFile, "cut");  // size differs
  EXPECT_EQ(LoadRootfsEntry(paths_, key).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(paths_.cache_dir / "rootfs" / key));
}

}  // namespace
}  // namespace abox::image
