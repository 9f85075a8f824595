// Test helpers for the apply / undo tests: temp trees, a snapshot of a tree (modes, content,
// symlink targets) for byte-for-byte comparisons, and a manifest + object store from a tree.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "src/base/io.h"
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
