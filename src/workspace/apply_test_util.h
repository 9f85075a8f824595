// Test helpers for the apply / undo tests: temp trees, a snapshot of a tree (modes, content,
// symlink targets) for byte-for-byte comparisons, and a manifest + object store from a tree.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "src/base/io.h"
#include "src/workspace/apply.h"
#include "src/workspace/artifacts.h"
#include "src/workspace/host_tree.h"
#include "src/workspace/manifest.h"
#include "src/workspace/object_store.h"
#include "src/workspace/sha256.h"

namespace abox::workspace::testing {

namespace fs = std::filesystem;

// A directory removed when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "abox-ws-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    // Objects are 0444 in 0700 dirs: removable by the owner.
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline void Put(const std::string& path, const std::string& content, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(base::WriteFileAtomic(path, content, static_cast<int>(mode)).ok()) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

inline std::string Get(const std::string& path) {
  auto s = base::ReadFile(path);
  return s.ok() ? *s : "<" + std::string(s.status().message()) + ">";
}

// path -> "f <mode> <content>" / "l <target>" / "d" / "o" (everything below root, no symlink
// followed), for EXPECT_EQ on whole trees.
inline std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = it->path().lexically_relative(root).string();
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    if (S_ISLNK(st.st_mode)) {
      out[rel] = "l " + fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      out[rel] = "d";
    } else if (S_ISREG(st.st_mode)) {
      out[rel] = "f " + std::to_string(st.st_mode & 07777) + " " + Get(it->path().string());
    } else {
      out[rel] = "o";
    }
  }
  return out;
}

// The manifest of `root` (like the guest's scanner), storing every file's content in `objects`.
inline Manifest ScanInto(const std::string& root, ObjectStore& objects) {
  Manifest m;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string rel = it->path().lexically_relative(root).string();
    if (rel == ".git" || rel.rfind(".git/", 0) == 0) {
      continue;
    }
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    Entry e;
    if (S_ISLNK(st.st_mode)) {
      e.type = EntryType::kSymlink;
      e.mode = 0;
      e.link_target = fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      e.type = EntryType::kDir;
      e.mode = st.st_mode & 0777;
    } else if (S_ISREG(st.st_mode)) {
      e.type = EntryType::kFile;
      e.mode = st.st_mode & 07777;
      std::string data = Get(it->path().string());
      e.size = data.size();
      auto sha = objects.PutData(data);
      EXPECT_TRUE(sha.ok());
      e.sha256 = *sha;
    } else {
      continue;
    }
    m[rel] = e;
  }
  return m;
}

}  // namespace abox::workspace::testing

namespace abox::workspace::testing {
// A name with control characters, printable for SCOPED_TRACE.
inline std::string EscapeForTrace(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\x" + std::to_string(static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace abox::workspace::testing

namespace abox::workspace::testing {

// A host tree, a "guest" directory scanned into manifests, an object store and an artifact
// store, for the apply tests.
class ApplyFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(host_);
    fs::create_directories(guest_);
    store_.emplace(*ObjectStore::Open(dir_ / "objects"));
    artifacts_.emplace(*ArtifactStore::Open(dir_ / "artifacts"));
    tree_.emplace(*HostTree::Open(host_));
  }
  // The same file on both sides (before Sync).
  void Both(const std::string& rel, const std::string& content, mode_t mode = 0644) {
    Put(host_ + "/" + rel, content, mode);
    Put(guest_ + "/" + rel, content, mode);
  }
  void Sync() { base_ = testing::ScanInto(guest_, *store_); }
  absl::StatusOr<ApplyPlan> Plan(const ApplyOptions& options = {}) {
    Manifest guest = testing::ScanInto(guest_, *store_);
    return PlanApply(*tree_, base_, guest, *store_, options);
  }
  absl::StatusOr<ApplyResult> Run(const ApplyPlan& plan) {
    return Apply(*tree_, plan, *store_, *artifacts_, ArtifactMeta{.sandbox = "sb1"});
  }
  const PlannedChange* Find(const ApplyPlan& plan, const std::string& path) {
    for (const PlannedChange& c : plan.changes) {
      if (c.path == path) {
        return &c;
      }
    }
    return nullptr;
  }

  testing::TempDir dir_;
  std::string host_ = dir_ / "host";
  std::string guest_ = dir_ / "guest";
  std::optional<ObjectStore> store_;
  std::optional<ArtifactStore> artifacts_;
  std::optional<HostTree> tree_;
  Manifest base_;
};

}  // namespace abox::workspace::testing
