#include "src/image/initramfs.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace abox::image {

absl::Status WriteCpio(const std::filesystem::path& out, const std::vector<CpioEntry>& entries) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_write_new(), archive_write_free);
  auto fail = [&](absl::string_view what) {
    return absl::InternalError(
        absl::StrCat("writing ", out.string(), ": ", what, ": ", archive_error_string(a.get())));
  };
  if (archive_write_set_format_cpio_newc(a.get()) != ARCHIVE_OK ||
      archive_write_add_filter_none(a.get()) != ARCHIVE_OK ||
      archive_write_set_bytes_per_block(a.get(), 512) != ARCHIVE_OK ||
      archive_write_open_filename(a.get(), out.c_str()) != ARCHIVE_OK) {
    return fail("open");
  }
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                             archive_entry_free);
  int64_t ino = 1;
  for (const CpioEntry& c : entries) {
    archive_entry_clear(e.get());
    archive_entry_set_pathname(e.get(), c.path.c_str());
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_ino64(e.get(), ino++);
    archive_entry_set_size(e.get(), 0);
    switch (c.type) {
      case CpioEntry::Type::kDirectory:
        archive_entry_set_filetype(e.get(), AE_IFDIR);
        archive_entry_set_nlink(e.get(), 2);
        break;
      case CpioEntry::Type::kFile:
        archive_entry_set_filetype(e.get(), AE_IFREG);
        archive_entry_set_nlink(e.get(), 1);
        archive_entry_set_size(e.get(), static_cast<la_int64_t>(c.data.size()));
        break;
      case CpioEntry::Type::kCharDevice:
        archive_entry_set_filetype(e.get(), AE_IFCHR);
        archive_entry_set_nlink(e.get(), 1);
        archive_entry_set_rdev(e.get(), makedev(c.dev_major, c.dev_minor));
        break;
    }
    archive_entry_set_perm(e.get(), c.mode & 07777);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) {
      return fail(absl::StrCat("header of ", c.path));
    }
    if (c.type == CpioEntry::Type::kFile && !c.data.empty()) {
      la_ssize_t n = archive_write_data(a.get(), c.data.data(), c.data.size());
      if (n < 0 || static_cast<size_t>(n) != c.data.size()) {
        return fail(absl::StrCat("data of ", c.path));
      }
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return fail("close");
  }
  return absl::OkStatus();
}

std::vector<CpioEntry> InitramfsEntries(std::string agent_binary,
                                        const std::vector<InitramfsModule>& modules) {
  using Type = CpioEntry::Type;
  std::vector<CpioEntry> entries;
  for (const char* dir : {"dev", "proc", "sys", "newroot", "run", "abox", "abox/modules"}) {
    entries.push_back({dir, Type::kDirectory, 0755});
  }
  entries.push_back({"dev/console", Type::kCharDevice, 0600, "", 5, 1});
  entries.push_back({"init", Type::kFile, 0755, std::move(agent_binary)});
  entries.push_back({"abox/initramfs", Type::kFile, 0644, "abox initramfs\n"});
  int n = 0;
  for (const InitramfsModule& m : modules) {
    entries.push_back(
        {absl::StrFormat("abox/modules/%02d-%s.ko", ++n, m.name), Type::kFile, 0644, m.data});
  }
  return entries;
}

}  // namespace abox::image
