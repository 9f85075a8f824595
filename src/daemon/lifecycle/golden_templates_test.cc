#include "src/daemon/lifecycle/golden_templates.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/base/unique_fd.h"
#include "tests/testing/fake_vmm.h"

namespace abox::daemon {
namespace {

constexpr int kMib = 1;
constexpr size_t kBytes = size_t{kMib} << 20;

base::UniqueFd TemplateMemory(char fill) {
  base::UniqueFd fd(::memfd_create("test-template", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_TRUE(fd);
  EXPECT_EQ(::ftruncate(fd.get(), kBytes), 0);
  std::string page(4096, fill);
  EXPECT_EQ(::pwrite(fd.get(), page.data(), page.size(), 0), 4096);
  return fd;
}

// What a clone (or a QEMU taken over) can do with the template's memory once it is sealed:
// read it, map it copy-on-write and write its own copy; never change it for the others.
TEST(GoldenTemplatesTest, SealedTemplateMemoryCanOnlyBeCopiedOnWrite) {
  base::UniqueFd fd = TemplateMemory('t');
  ASSERT_TRUE(SealTemplateMemory(fd.get(), kMib).ok());

  // Reopened read-write, as QEMU reopens /proc/self/fd/N: writes and resizes are refused.
  base::UniqueFd reopened(
      ::open(absl::StrCat("/proc/self/fd/", fd.get()).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(reopened) << std::strerror(errno);
  EXPECT_EQ(::pwrite(reopened.get(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(reopened.get(), kBytes * 2), 0);
  EXPECT_NE(::ftruncate(reopened.get(), 0), 0);
  EXPECT_EQ(::fcntl(reopened.get(), F_ADD_SEALS, 0), -1);  // F_SEAL_SEAL: no changing the seals
  // A shared writable mapping (share=on) is refused.
  void* shared = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, reopened.get(), 0);
  EXPECT_EQ(shared, MAP_FAILED);

  // A private mapping (share=off, what clones get) may be written: only its own copy changes.
  void* mine = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, reopened.get(), 0);
  ASSERT_NE(mine, MAP_FAILED) << std::strerror(errno);
  auto* bytes = static_cast<char*>(mine);
  EXPECT_EQ(bytes[0], 't');
  bytes[0] = 'c';
  void* other = ::mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  ASSERT_NE(other, MAP_FAILED);
  EXPECT_EQ(static_cast<char*>(other)[0], 't');
  char on_file = 0;
  ASSERT_EQ(::pread(fd.get(), &on_file, 1, 0), 1);
  EXPECT_EQ(on_file, 't');
  ::munmap(mine, kBytes);
  ::munmap(other, kBytes);
}

TEST(GoldenTemplatesTest, MemoryOfAnotherSizeIsNotSealedAsATemplate) {
  base::UniqueFd fd = TemplateMemory('t');
  EXPECT_FALSE(SealTemplateMemory(fd.get(), kMib * 2).ok());
  EXPECT_EQ(::pwrite(fd.get(), "x", 1, 0), 1);  // still writable: nothing was sealed
}

// A VMM that cannot save state gets no templates: creates boot, with no error.
TEST(GoldenTemplatesTest, AVmmThatCannotSaveStateHasNoTemplates) {
  abox::testing::FakeVmm vmm;
  base::HostLayout layout;
  layout.home = "/nonexistent";
  GoldenTemplates templates(vmm, layout);
  absl::StatusOr<std::shared_ptr<const GoldenTemplate>> tpl = templates.Get({});
  EXPECT_EQ(tpl.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace abox::daemon
