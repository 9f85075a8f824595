#include "src/image/elf_deps.h"

#include <elf.h>

#include <cstring>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

using ::abox::image::testing::TempDir;
using ::abox::image::testing::WriteFileOrDie;

template <typename T>
void Put(std::string* s, size_t off, const T& v) {
  if (s->size() < off + sizeof(T)) {
    s->resize(off + sizeof(T));
  }
  std::memcpy(s->data() + off, &v, sizeof(T));
}

// A dynamically linked x86-64 executable: PT_LOAD over the whole file at kBase, PT_INTERP,
// PT_DYNAMIC with DT_NEEDED per library and one DT_VERNEED entry (for libc.so.6) carrying
// `versions`.
std::string DynamicElf(const std::string& interp, const std::vector<std::string>& needed,
                       const std::vector<std::string>& versions) {
  constexpr uint64_t kBase = 0x400000;
  constexpr size_t kPhnum = 3;
  const size_t interp_off = sizeof(Elf64_Ehdr) + kPhnum * sizeof(Elf64_Phdr);
  std::string strtab(1, '\0');
  auto add = [&](const std::string& str) {
    size_t off = strtab.size();
    strtab += str;
    strtab.push_back('\0');
    return off;
  };
  std::vector<size_t> needed_offs;
  for (const auto& n : needed) {
    needed_offs.push_back(add(n));
  }
  const size_t libc_name = add("libc.so.6");
  std::vector<size_t> version_offs;
  for (const auto& v : versions) {
    version_offs.push_back(add(v));
  }
  const size_t str_off = interp_off + interp.size() + 1;
  const size_t vn_off = (str_off + strtab.size() + 7) & ~size_t{7};
  const size_t aux_off = vn_off + sizeof(Elf64_Verneed);
  const size_t dyn_off = aux_off + versions.size() * sizeof(Elf64_Vernaux);

  std::string elf;
  Put(&elf, 0, testing::TestElfHeader(kPhnum));
  elf.resize(interp_off);
  elf += interp + '\0';
  elf += strtab;
  Elf64_Verneed vn{1, static_cast<uint16_t>(versions.size()), static_cast<uint32_t>(libc_name),
                   sizeof(Elf64_Verneed), 0};
  Put(&elf, vn_off, vn);
  for (size_t i = 0; i < versions.size(); ++i) {
    Elf64_Vernaux aux{0, 0, static_cast<uint16_t>(i + 2), static_cast<uint32_t>(version_offs[i]),
                      i + 1 < versions.size() ? uint32_t{sizeof(Elf64_Vernaux)} : 0};
    Put(&elf, aux_off + i * sizeof(Elf64_Vernaux), aux);
  }
  std::vector<Elf64_Dyn> dyn;
  for (size_t off : needed_offs) {
    dyn.push_back({DT_NEEDED, {off}});
  }
  dyn.push_back({DT_STRTAB, {kBase + str_off}});
  dyn.push_back({DT_STRSZ, {strtab.size()}});
  if (!versions.empty()) {
    dyn.push_back({DT_VERNEED, {kBase + vn_off}});
    dyn.push_back({DT_VERNEEDNUM, {1}});
  }
  dyn.push_back({DT_NULL, {0}});
  for (size_t i = 0; i < dyn.size(); ++i) {
    Put(&elf, dyn_off + i * sizeof(Elf64_Dyn), dyn[i]);
  }
  Elf64_Phdr load{PT_LOAD, PF_R | PF_X, 0, kBase, kBase, elf.size(), elf.size(), 0x1000};
  Elf64_Phdr pinterp{PT_INTERP, PF_R, interp_off, kBase + interp_off, 0, interp.size() + 1, 0, 1};
  Elf64_Phdr pdyn{PT_DYNAMIC, PF_R, dyn_off, kBase + dyn_off, 0, dyn.size() * sizeof(Elf64_Dyn),
                  0,          8};
  Put(&elf, sizeof(Elf64_Ehdr), load);
  Put(&elf, sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), pinterp);
  Put(&elf, sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr), pdyn);
  return elf;
}

// What Claude Code 2.1.x's native build asks for.
std::string ClaudeLike() {
  return DynamicElf("/lib64/ld-linux-x86-64.so.2",
                    {"librt.so.1", "libc.so.6", "ld-linux-x86-64.so.2", "libpthread.so.0",
                     "libdl.so.2", "libm.so.6"},
                    {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.26"});
}

class ElfDepsTest : public ::testing::Test {
 protected:
  absl::StatusOr<ElfDeps> Read(const std::string& bytes) {
    WriteFileOrDie(tmp_.path() / "exe", bytes);
    return ReadElfDeps(tmp_.path() / "exe");
  }
  TempDir tmp_;
};

TEST_F(ElfDepsTest, ReadsInterpreterLibrariesAndGlibcVersions) {
  auto deps = Read(ClaudeLike());
  ASSERT_TRUE(deps.ok()) << deps.status();
  EXPECT_EQ(deps->interpreter, "/lib64/ld-linux-x86-64.so.2");
  EXPECT_EQ(deps->needed.size(), 6u);
  EXPECT_EQ(deps->needed[0], "librt.so.1");
  EXPECT_EQ(deps->versions, (std::vector<std::string>{"GLIBC_2.17", "GLIBC_2.2.5", "GLIBC_2.26"}));
}

TEST_F(ElfDepsTest, StaticExecutableNeedsNothing) {
  auto deps = Read(testing::TestElf(PT_LOAD, "code"));
  ASSERT_TRUE(deps.ok()) << deps.status();
  EXPECT_TRUE(deps->interpreter.empty());
  EXPECT_TRUE(deps->needed.empty());
  EXPECT_TRUE(CheckImageProvides(*deps, "bookworm", {}, "codex").ok());
}

TEST_F(ElfDepsTest, ReadsTheRealTestBinary) {
  auto deps = ReadElfDeps("/proc/self/exe");
  ASSERT_TRUE(deps.ok()) << deps.status();
  EXPECT_NE(std::find(deps->needed.begin(), deps->needed.end(), "libc.so.6"), deps->needed.end());
}

TEST_F(ElfDepsTest, RefusesNonElfOtherArchesAndCorruptHeaders) {
  EXPECT_EQ(Read("#!/bin/sh\necho hi\n").status().code(), absl::StatusCode::kInvalidArgument);
  std::string arm = ClaudeLike();
  uint16_t machine = EM_AARCH64;
  std::memcpy(arm.data() + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof(machine));
  EXPECT_NE(Read(arm).status().message().find("not an x86-64"), std::string::npos);
  // Truncated: the dynamic section lies past the end.
  std::string cut = ClaudeLike();
  cut.resize(cut.size() - 40);
  EXPECT_EQ(Read(cut).status().code(), absl::StatusCode::kInvalidArgument);
  // A huge program header count.
  std::string many = ClaudeLike();
  uint16_t phnum = 60000;
  std::memcpy(many.data() + offsetof(Elf64_Ehdr, e_phnum), &phnum, sizeof(phnum));
  EXPECT_EQ(Read(many).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ElfDepsTest, BookwormProvidesClaudeLikeBinary) {
  auto deps = Read(ClaudeLike());
  ASSERT_TRUE(deps.ok());
  EXPECT_TRUE(CheckImageProvides(*deps, "bookworm", {"bash", "git"}, "claude").ok());
}

TEST_F(ElfDepsTest, RefusesTooNewGlibcUnknownLibrariesAndMissingPackages) {
  auto newer = Read(DynamicElf("/lib64/ld-linux-x86-64.so.2", {"libc.so.6"}, {"GLIBC_2.38"}));
  ASSERT_TRUE(newer.ok());
  absl::Status s = CheckImageProvides(*newer, "bookworm", {}, "claude 9.9.9");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("GLIBC_2.38"), std::string::npos);
  EXPECT_NE(s.message().find("claude 9.9.9"), std::string::npos);
  EXPECT_TRUE(CheckImageProvides(*newer, "trixie", {}, "x").ok());

  auto odd = Read(DynamicElf("/lib64/ld-linux-x86-64.so.2", {"libfoo.so.3"}, {}));
  ASSERT_TRUE(odd.ok());
  s = CheckImageProvides(*odd, "bookworm", {}, "x");
  EXPECT_NE(s.message().find("libfoo.so.3"), std::string::npos);

  auto musl = Read(DynamicElf("/lib/ld-musl-x86_64.so.1", {"libc.so"}, {}));
  ASSERT_TRUE(musl.ok());
  EXPECT_NE(CheckImageProvides(*musl, "bookworm", {}, "x").message().find("ld-musl"),
            std::string::npos);
}

}  // namespace
}  // namespace abox::image
