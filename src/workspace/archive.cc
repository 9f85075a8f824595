#include "src/workspace/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"
#include "src/workspace/manifest_scan.h"
#include "src/workspace/paths.h"

namespace abox::workspace {
namespace {

constexpr size_t kChunkBytes = 256 << 10;

std::string ArchiveErrorText(struct archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? text : "unknown libarchive error";
}

absl::Status ChangedWhileSyncing(const std::string& rel, absl::string_view what) {
  return absl::AbortedError(
      absl::StrCat("'", EscapePath(rel), "' changed while syncing (", what, "); retry the sync"));
}

}  // namespace

// ---- Writer ----

absl::StatusOr<std::unique_ptr<SyncArchiveWriter>> SyncArchiveWriter::Create(ArchiveSink sink,
                                                                             int zstd_level) {
  std::unique_ptr<SyncArchiveWriter> w(new SyncArchiveWriter(std::move(sink)));
  w->archive_ = archive_write_new();
  if (w->archive_ == nullptr) {
    return absl::ResourceExhaustedError("archive_write_new failed");
  }
  struct archive* a = w->archive_;
  std::string level = absl::StrCat(zstd_level);
  // hdrcharset=BINARY: names are bytes; without it libarchive converts them from the locale to
  // UTF-8 and fails on (or mangles) names that are not valid in it.
  if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
      archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
      archive_write_set_filter_option(a, "zstd", "compression-level", level.c_str()) !=
          ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK) {
    return absl::InternalError(absl::StrCat("setting up the sync archive writer (zstd level ",
                                            zstd_level, "): ", ArchiveErrorText(a)));
  }
  if (archive_write_open(a, w.get(), nullptr, &SyncArchiveWriter::OnWrite, nullptr) != ARCHIVE_OK) {
    return w->Failed("opening the sync archive");
  }
  return w;
}

SyncArchiveWriter::~SyncArchiveWriter() {
  if (archive_ != nullptr) {
    archive_write_free(archive_);
  }
}

long SyncArchiveWriter::OnWrite(struct archive* a, void* self, const void* buf, size_t len) {
  auto* w = static_cast<SyncArchiveWriter*>(self);
  absl::Status status = w->sink_(absl::string_view(static_cast<const char*>(buf), len));
  if (!status.ok()) {
    w->sink_error_ = status;
    archive_set_error(a, EIO, "the archive sink failed");
    return -1;
  }
  w->bytes_out_ += len;
  return static_cast<long>(len);
}

absl::Status SyncArchiveWriter::Failed(absl::string_view what) {
  broken_ = true;
  if (!sink_error_.ok()) {
    return base::Annotate(sink_error_, what);
  }
  return absl::InternalError(absl::StrCat(what, ": ", ArchiveErrorText(archive_)));
}

absl::Status SyncArchiveWriter::WriteHeader(const std::string& rel, const Entry& e, uint64_t size) {
  if (broken_ || finished_) {
    return absl::FailedPreconditionError("the sync archive writer is finished or failed");
  }
  struct archive_entry* entry = archive_entry_new();
  if (entry == nullptr) {
    return absl::ResourceExhaustedError("archive_entry_new failed");
  }
  absl::Cleanup free_entry = [entry] { archive_entry_free(entry); };
  archive_entry_copy_pathname(entry, rel.c_str());
  switch (e.type) {
    case EntryType::kFile:
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, e.mode & 07777);
      break;
    case EntryType::kDir:
      archive_entry_set_filetype(entry, AE_IFDIR);
      archive_entry_set_perm(entry, e.mode & 07777);
      break;
    case EntryType::kSymlink:
      archive_entry_set_filetype(entry, AE_IFLNK);
      archive_entry_set_perm(entry, 0777);
      archive_entry_copy_symlink(entry, e.link_target.c_str());
      break;
  }
  archive_entry_set_size(entry, static_cast<la_int64_t>(size));
  int64_t sec = e.mtime_ns / 1'000'000'000;
  int64_t nsec = e.mtime_ns % 1'000'000'000;
  if (nsec < 0) {
    sec -= 1;
    nsec += 1'000'000'000;
  }
  archive_entry_set_mtime(entry, sec, nsec);
  if (archive_write_header(archive_, entry) != ARCHIVE_OK) {
    return Failed(absl::StrCat("writing the archive header of '", EscapePath(rel), "'"));
  }
  ++entries_;
  return absl::OkStatus();
}

absl::Status SyncArchiveWriter::WriteData(absl::string_view data) {
  while (!data.empty()) {
    la_ssize_t n = archive_write_data(archive_, data.data(), data.size());
    if (n <= 0) {
      return Failed("writing archive data");
    }
    data.remove_prefix(static_cast<size_t>(n));
    bytes_in_ += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status SyncArchiveWriter::AddDeletions(const std::vector<std::string>& paths) {
  if (entries_ != 0) {
    return absl::FailedPreconditionError(
        "AddDeletions must come first (and once): the unpacker deletes before it writes");
  }
  std::string content;
  for (const std::string& path : paths) {
    ABOX_RETURN_IF_ERROR(ValidateRelativePath(path));
    content.append(path);
    content.push_back('\0');
  }
  Entry e;
  e.type = EntryType::kFile;
  e.mode = 0600;
  e.size = content.size();
  ABOX_RETURN_IF_ERROR(WriteHeader(kDeletionsEntryName, e, content.size()));
  return WriteData(content);
}

absl::Status SyncArchiveWriter::AddData(const std::string& rel, const Entry& e,
                                        absl::string_view content) {
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(rel));
  if (e.type != EntryType::kFile && !content.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", EscapePath(rel), "': only a file has content"));
  }
  if (e.type == EntryType::kSymlink &&
      (e.link_target.empty() || e.link_target.size() > kMaxLinkTargetBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", EscapePath(rel), "': symlink target empty or too long"));
  }
  ABOX_RETURN_IF_ERROR(WriteHeader(rel, e, content.size()));
  return WriteData(content);
}

absl::Status SyncArchiveWriter::AddFromDisk(const std::string& root, const std::string& rel,
                                            const Entry& e) {
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd root_fd, OpenRoot(root));
  return AddFromDisk(root_fd.get(), rel, e);
}

absl::Status SyncArchiveWriter::AddFromDisk(int root_fd, const std::string& rel, const Entry& e) {
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(rel));
  auto [parent, name] = SplitParent(rel);
  absl::StatusOr<base::UniqueFd> dir = OpenDirBeneath(root_fd, parent);
  if (absl::IsNotFound(dir.status()) || absl::IsFailedPrecondition(dir.status())) {
    return ChangedWhileSyncing(rel, dir.status().message());
  }
  ABOX_RETURN_IF_ERROR(dir.status());
  std::string leaf(name);
  struct stat st {};
  if (::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return ChangedWhileSyncing(rel, "it is gone");
    }
    return base::ErrnoError(absl::StrCat("stat(", EscapePath(rel), ")"));
  }
  switch (e.type) {
    case EntryType::kDir:
      if (!S_ISDIR(st.st_mode)) {
        return ChangedWhileSyncing(rel, "no longer a directory");
      }
      return WriteHeader(rel, e, 0);
    case EntryType::kSymlink: {
      if (!S_ISLNK(st.st_mode)) {
        return ChangedWhileSyncing(rel, "no longer a symlink");
      }
      char target[kMaxLinkTargetBytes + 1];
      ssize_t n = ::readlinkat(dir->get(), leaf.c_str(), target, sizeof(target));
      if (n <= 0 || static_cast<size_t>(n) > kMaxLinkTargetBytes) {
        return ChangedWhileSyncing(rel, "its link target cannot be read");
      }
      Entry link = e;
      link.link_target.assign(target, static_cast<size_t>(n));
      if (!e.link_target.empty() && e.link_target != link.link_target) {
        return ChangedWhileSyncing(rel, "its link target changed");
      }
      return WriteHeader(rel, link, 0);
    }
    case EntryType::kFile:
      break;
  }
  if (!S_ISREG(st.st_mode)) {
    return ChangedWhileSyncing(rel, "no longer a regular file");
  }
  base::UniqueFd fd(::openat(dir->get(), leaf.c_str(),
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT || errno == ELOOP) {
      return ChangedWhileSyncing(rel, "replaced while opening");
    }
    return base::ErrnoError(absl::StrCat("open(", EscapePath(rel), ")"));
  }
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", EscapePath(rel), ")"));
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != e.size) {
    return ChangedWhileSyncing(rel, absl::StrCat("size ", st.st_size, ", expected ", e.size));
  }
  return AddFromFd(rel, e, fd.get());
}

absl::Status SyncArchiveWriter::AddFromFd(const std::string& rel, const Entry& e, int fd) {
  ABOX_RETURN_IF_ERROR(ValidateRelativePath(rel));
  if (e.type != EntryType::kFile) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", EscapePath(rel), "': only a file has content to stream"));
  }
  ABOX_RETURN_IF_ERROR(WriteHeader(rel, e, e.size));
  // From here on the header is out: any mismatch breaks the archive, and the caller restarts.
  std::unique_ptr<char[]> buf(new char[kChunkBytes]);
  uint64_t done = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.get(), kChunkBytes);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      broken_ = true;
      return base::ErrnoError(absl::StrCat("read(", EscapePath(rel), ")"));
    }
    if (n == 0) {
      break;
    }
    if (done + static_cast<uint64_t>(n) > e.size) {
      broken_ = true;
      return ChangedWhileSyncing(rel, "it grew");
    }
    done += static_cast<uint64_t>(n);
    ABOX_RETURN_IF_ERROR(WriteData(absl::string_view(buf.get(), static_cast<size_t>(n))));
  }
  if (done != e.size) {
    broken_ = true;
    return ChangedWhileSyncing(rel, "it shrank");
  }
  return absl::OkStatus();
}

absl::Status SyncArchiveWriter::Finish() {
  if (broken_ || finished_) {
    return absl::FailedPreconditionError("the sync archive writer is finished or failed");
  }
  finished_ = true;
  if (archive_write_close(archive_) != ARCHIVE_OK) {
    return Failed("finishing the sync archive");
  }
  return absl::OkStatus();
}

// ---- Reader ----

namespace {

constexpr size_t kReadBufferBytes = 64 << 10;

struct ReadContext {
  const ArchiveSource* source;
  std::unique_ptr<char[]> buf{new char[kReadBufferBytes]};
  absl::Status error;
};

la_ssize_t OnRead(struct archive* a, void* data, const void** out) {
  auto* ctx = static_cast<ReadContext*>(data);
  absl::StatusOr<size_t> n = (*ctx->source)(ctx->buf.get(), kReadBufferBytes);
  if (!n.ok()) {
    ctx->error = n.status();
    archive_set_error(a, EIO, "the archive source failed");
    return -1;
  }
  *out = ctx->buf.get();
  return static_cast<la_ssize_t>(std::min(*n, kReadBufferBytes));
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("refused sync archive: ", what));
}

// The status for a libarchive failure: the source's own error if it caused it.
absl::Status ArchiveFailure(struct archive* a, const ReadContext& ctx, absl::string_view what) {
  if (!ctx.error.ok()) {
    return base::Annotate(ctx.error, what);
  }
  return Malformed(absl::StrCat(what, ": ", ArchiveErrorText(a)));
}

class ArchiveEntryReader final : public EntryReader {
 public:
  ArchiveEntryReader(struct archive* a, const ReadContext& ctx, std::string rel, uint64_t size)
      : archive_(a), ctx_(ctx), rel_(std::move(rel)), remaining_(size) {}

  absl::StatusOr<size_t> Read(char* buf, size_t len) override {
    if (remaining_ == 0 || len == 0) {
      return 0;
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(len, remaining_));
    la_ssize_t n = archive_read_data(archive_, buf, want);
    if (n < 0) {
      return ArchiveFailure(archive_, ctx_, absl::StrCat("reading '", EscapePath(rel_), "'"));
    }
    if (n == 0) {
      return Malformed(absl::StrCat("'", EscapePath(rel_), "' is truncated"));
    }
    remaining_ -= static_cast<uint64_t>(n);
    return static_cast<size_t>(n);
  }

 private:
  struct archive* archive_;
  const ReadContext& ctx_;
  std::string rel_;
  uint64_t remaining_;
};

absl::StatusOr<std::vector<std::string>> ReadDeletions(EntryReader& reader, uint64_t size,
                                                       const ArchiveLimits& limits) {
  if (size > limits.max_deletion_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("refused sync archive: deletion list of ",
                                                     size, " bytes is over the limit of ",
                                                     limits.max_deletion_bytes));
  }
  std::string content(static_cast<size_t>(size), '\0');
  size_t got = 0;
  while (got < content.size()) {
    ABOX_ASSIGN_OR_RETURN(size_t n, reader.Read(content.data() + got, content.size() - got));
    got += n;
  }
  if (!content.empty() && content.back() != '\0') {
    return Malformed("the deletion list does not end with a NUL");
  }
  std::vector<std::string> paths;
  if (content.empty()) {
    return paths;
  }
  content.pop_back();
  for (absl::string_view path : absl::StrSplit(content, '\0')) {
    if (paths.size() >= limits.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("refused sync archive: more than ", limits.max_entries, " paths to delete"));
    }
    if (absl::Status valid = ValidateRelativePath(path); !valid.ok()) {
      return Malformed(absl::StrCat("deletion list: ", valid.message()));
    }
    paths.emplace_back(path);
  }
  return paths;
}

bool IsZstd(struct archive* a) {
  // Filters from the format outwards: zstd, then the raw stream ("none").
  return archive_filter_count(a) == 2 && archive_filter_code(a, 0) == ARCHIVE_FILTER_ZSTD;
}

}  // namespace

absl::Status ReadSyncArchive(const ArchiveSource& source, const ArchiveLimits& limits,
                             SyncArchiveHandler& handler) {
  struct archive* a = archive_read_new();
  if (a == nullptr) {
    return absl::ResourceExhaustedError("archive_read_new failed");
  }
  absl::Cleanup free_archive = [a] { archive_read_free(a); };
  // Only zstd and only tar: every other format and filter libarchive knows is attack surface.
  if (archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
      archive_read_support_format_tar(a) != ARCHIVE_OK) {
    return absl::InternalError(
        absl::StrCat("setting up the sync archive reader: ", ArchiveErrorText(a)));
  }
  ReadContext ctx{.source = &source};
  if (archive_read_open(a, &ctx, nullptr, OnRead, nullptr) != ARCHIVE_OK) {
    return ArchiveFailure(a, ctx, "opening the sync archive (is it zstd-compressed tar?)");
  }
  uint64_t index = 0;
  uint64_t total = 0;
  for (;; ++index) {
    struct archive_entry* entry = nullptr;
    int r = archive_read_next_header(a, &entry);
    if (!IsZstd(a)) {
      return Malformed("not zstd-compressed");
    }
    if (r == ARCHIVE_EOF) {
      break;
    }
    // Warnings included: they mean libarchive guessed (a charset, a broken header field).
    if (r != ARCHIVE_OK) {
      return ArchiveFailure(a, ctx, absl::StrCat("reading entry ", index + 1));
    }
    if (index >= limits.max_entries) {
      return absl::ResourceExhaustedError(
          absl::StrCat("refused sync archive: more than ", limits.max_entries, " entries"));
    }
    const char* name_c = archive_entry_pathname(entry);
    if (name_c == nullptr) {
      return Malformed(absl::StrCat("entry ", index + 1, " has no name"));
    }
    std::string rel = name_c;
    auto bad = [&](absl::string_view why) {
      return Malformed(
          absl::StrCat("entry ", index + 1, " '", EscapePath(rel.substr(0, 300)), "': ", why));
    };
    if (archive_entry_hardlink(entry) != nullptr) {
      return bad("hard links are not allowed");
    }
    if (archive_entry_sparse_count(entry) > 0) {
      return bad("sparse entries are not allowed");
    }
    if (!archive_entry_size_is_set(entry) || archive_entry_size(entry) < 0) {
      return bad("no valid size");
    }
    uint64_t size = static_cast<uint64_t>(archive_entry_size(entry));
    mode_t type = archive_entry_filetype(entry);
    if (rel == kDeletionsEntryName) {
      if (index != 0) {
        return bad("the deletion list may only be the first entry");
      }
      if (type != AE_IFREG) {
        return bad("the deletion list is not a regular entry");
      }
      ArchiveEntryReader reader(a, ctx, rel, size);
      ABOX_ASSIGN_OR_RETURN(std::vector<std::string> paths, ReadDeletions(reader, size, limits));
      ABOX_RETURN_IF_ERROR(handler.OnDeletions(std::move(paths)));
      continue;
    }
    Entry e;
    e.mode = archive_entry_perm(entry) & 07777;
    if (type == AE_IFREG) {
      e.type = EntryType::kFile;
      if (size > limits.max_file_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("refused sync archive: '", EscapePath(rel), "' has ", size,
                         " bytes, over the limit of ", limits.max_file_bytes));
      }
      total += size;
      if (total > limits.max_total_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "refused sync archive: more than ", limits.max_total_bytes, " bytes of content"));
      }
      e.size = size;
    } else if (type == AE_IFDIR) {
      e.type = EntryType::kDir;
      e.mode &= 0777;
      // tar marks a directory with one trailing '/'; that is the only thing we take off.
      if (rel.size() > 1 && rel.back() == '/') {
        rel.pop_back();
      }
    } else if (type == AE_IFLNK) {
      e.type = EntryType::kSymlink;
      e.mode = 0;
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr || *target == '\0') {
        return bad("a symlink without a target");
      }
      e.link_target = target;
      if (e.link_target.size() > kMaxLinkTargetBytes) {
        return bad(absl::StrCat("symlink target longer than ", kMaxLinkTargetBytes, " bytes"));
      }
    } else if (type == AE_IFCHR || type == AE_IFBLK) {
      return bad("device nodes are not allowed");
    } else if (type == AE_IFIFO) {
      return bad("fifos are not allowed");
    } else if (type == AE_IFSOCK) {
      return bad("sockets are not allowed");
    } else {
      return bad("unknown entry type");
    }
    if (absl::Status valid = ValidateRelativePath(rel); !valid.ok()) {
      return Malformed(absl::StrCat("entry ", index + 1, ": ", valid.message()));
    }
    ArchiveEntryReader reader(a, ctx, rel, e.type == EntryType::kFile ? size : 0);
    ABOX_RETURN_IF_ERROR(handler.OnEntry(rel, e, reader));
  }
  return absl::OkStatus();
}

}  // namespace abox::workspace
