// Test-only helpers shared by the image tests.
#pragma once

#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "src/base/fenced_remove.h"
#include "src/base/io.h"
#include "src/image/fs_util.h"

namespace abox::image::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = ::getenv("TEST_TMPDIR");  // NOLINT(concurrency-mt-unsafe)
    std::string templ = std::string(base ? base : "/tmp") + "/abox-image-test-XXXXXX";
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    path_ = std::filesystem::path(templ).lexically_normal();
  }
  ~TempDir() { (void)base::RemoveUnder(path_.parent_path(), path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The ELF header of an x86-64 executable whose `phnum` program headers follow it.
inline Elf64_Ehdr TestElfHeader(uint16_t phnum) {
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = EM_X86_64;
  eh.e_phoff = sizeof(Elf64_Ehdr);
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = phnum;
  return eh;
}

// A minimal x86-64 ELF executable: header, one program header of `segment_type` whose file
// contents are `segment`, then `tail`.
inline std::string TestElf(uint32_t segment_type, const std::string& segment,
                           const std::string& tail = "") {
  const Elf64_Ehdr eh = TestElfHeader(1);
  Elf64_Phdr ph{};
  ph.p_type = segment_type;
  ph.p_offset = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
  ph.p_filesz = segment.size();
  std::string elf(reinterpret_cast<const char*>(&eh), sizeof(eh));
  elf.append(reinterpret_cast<const char*>(&ph), sizeof(ph));
  return elf + segment + tail;
}

inline void WriteFileOrDie(const std::filesystem::path& p, const std::string& data) {
  std::filesystem::create_directories(p.parent_path());
  ASSERT_TRUE(base::WriteFileAtomic(p.string(), data).ok()) << p;
}

inline std::string ReadFileOrDie(const std::filesystem::path& p) {
  auto s = base::ReadFile(p.string());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::string();
}

}  // namespace abox::image::testing
