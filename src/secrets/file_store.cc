#include "src/secrets/file_store.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <system_error>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "src/base/io.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::secrets {
namespace {

using nlohmann::json;
using Entries = std::map<std::string, SecretValue>;

constexpr size_t kMaxFileBytes = 16 << 20;
constexpr int kFormatVersion = 1;

// Checks what an fstat says about a file or directory abox keeps secrets in: the user's own, and
// closed to group and others. `mode` is what it should be.
absl::Status CheckOwnerAndMode(const struct stat& st, const std::string& path, unsigned mode) {
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        path, " belongs to uid ", st.st_uid, ", not to you (uid ", ::geteuid(),
        "): abox does not use secrets another user could have planted or can read. Move it "
        "aside and set the secrets again"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s is readable or writable by group or others (mode %03o): abox refuses to use it. "
        "Run `chmod %03o %s`, and change any secret that other users could have read",
        path, st.st_mode & 0777, mode, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<base::UniqueFd> OpenCheckedDir(const std::filesystem::path& dir) {
  base::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir.string(),
                       " is a symlink or not a directory: abox keeps secrets only in a real "
                       "directory of its own. Remove it (abox recreates it)"));
    }
    return base::ErrnoError(absl::StrCat("open(", dir.string(), ")"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", dir.string(), ")"));
  }
  ABOX_RETURN_IF_ERROR(CheckOwnerAndMode(st, dir.string(), 0700));
  return fd;
}

// flock(2), EINTR retried: held until the descriptor closes.
absl::Status Lock(int fd, int how, const std::string& what) {
  while (::flock(fd, how) != 0) {
    if (errno != EINTR) {
      return base::ErrnoError(absl::StrCat("flock(", what, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Damaged(const std::string& path, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(path, " is damaged (", why,
                   "): abox changes nothing in it. Repair it, or move it aside "
                   "(mv ",
                   path, " ", path, ".damaged) and set the secrets again"));
}

absl::StatusOr<Entries> Decode(std::string& text, const std::string& path) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  Cleanse(text);
  absl::Cleanup wipe = [&doc] { CleanseJson(doc); };
  if (doc.is_discarded() || !doc.is_object()) {
    return Damaged(path, "not a JSON object");
  }
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kFormatVersion) {
    return Damaged(path, "no \"version\": 1; a newer abox may have written it");
  }
  auto values = doc.find("values");
  if (values == doc.end() || !values->is_object()) {
    return Damaged(path, "no \"values\" object");
  }
  Entries entries;
  for (auto& [name, encoded] : values->items()) {
    if (!ValidateSecretName(name).ok()) {
      return Damaged(path,
                     absl::StrCat("an entry has the invalid name \"", name.substr(0, 64), "\""));
    }
    std::string decoded;
    if (!encoded.is_string() ||
        !absl::Base64Unescape(encoded.get_ref<const std::string&>(), &decoded)) {
      Cleanse(decoded);
      return Damaged(path, absl::StrCat("the value of ", name, " is not base64 text"));
    }
    entries.emplace(name, SecretValue(std::move(decoded)));
  }
  return entries;
}

absl::StatusOr<Entries> ReadEntries(int dir_fd, const std::string& path) {
  base::UniqueFd fd(
      ::openat(dir_fd, FileValueStore::kFileName, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) {
      return Entries{};
    }
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is a symlink: abox does not follow it. Remove it (rm ", path,
                       ") and set the secrets again"));
    }
    return base::ErrnoError(absl::StrCat("open(", path, ")"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("fstat(", path, ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file: move it aside and set the secrets again"));
  }
  ABOX_RETURN_IF_ERROR(CheckOwnerAndMode(st, path, 0600));
  absl::StatusOr<std::string> text = base::ReadAllFd(fd.get(), kMaxFileBytes);
  if (!text.ok()) {
    return base::Annotate(text.status(), absl::StrCat("reading ", path));
  }
  return Decode(*text, path);
}

// Replaces the file with `entries`: temp file in the same directory, fsync, rename, fsync dir.
absl::Status WriteEntries(int dir_fd, const std::string& path, const Entries& entries) {
  json doc = {{"version", kFormatVersion}, {"values", json::object()}};
  absl::Cleanup wipe_doc = [&doc] { CleanseJson(doc); };
  for (const auto& [name, value] : entries) {
    std::string encoded;
    absl::Base64Escape(value.Reveal(), &encoded);
    doc["values"][name] = std::move(encoded);
    Cleanse(encoded);
  }
  std::string text = doc.dump(2);
  text.push_back('\n');
  absl::Cleanup wipe_text = [&text] { Cleanse(text); };

  unsigned char random[8];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::InternalError("RAND_bytes failed while naming a temporary file");
  }
  std::string temp = absl::StrCat(".", FileValueStore::kFileName, ".tmp-",
                                  absl::BytesToHexString(absl::string_view(
                                      reinterpret_cast<const char*>(random), sizeof(random))));
  base::UniqueFd fd(
      ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return base::ErrnoError(absl::StrCat("creating a temporary file beside ", path));
  }
  bool renamed = false;
  absl::Cleanup unlink_temp = [&] {
    if (!renamed) {
      ::unlinkat(dir_fd, temp.c_str(), 0);
    }
  };
  // The umask could only have narrowed 0600; make it exact.
  if (::fchmod(fd.get(), 0600) != 0) {
    return base::ErrnoError(absl::StrCat("fchmod(", temp, ")"));
  }
  ABOX_RETURN_IF_ERROR(
      base::Annotate(base::WriteAll(fd.get(), text), absl::StrCat("writing ", path)));
  if (::fsync(fd.get()) != 0) {
    return base::ErrnoError(absl::StrCat("fsync(", temp, ")"));
  }
  if (::renameat(dir_fd, temp.c_str(), dir_fd, FileValueStore::kFileName) != 0) {
    return base::ErrnoError(absl::StrCat("rename(", temp, " -> ", path, ")"));
  }
  renamed = true;
  if (::fsync(dir_fd) != 0) {
    return base::ErrnoError(absl::StrCat("fsync(directory of ", path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileValueStore>> FileValueStore::Open(
    const std::filesystem::path& given) {
  // "…/secrets/" names the same directory as "…/secrets"; its parent is "…", not "…/secrets".
  std::filesystem::path dir = given.lexically_normal();
  if (!dir.has_filename()) {
    dir = dir.parent_path();
  }
  if (dir.empty()) {
    return absl::InvalidArgumentError("the secrets directory is empty");
  }
  std::error_code ec;
  if (dir.has_parent_path()) {
    std::filesystem::create_directories(dir.parent_path(), ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("creating ", dir.parent_path().string(), ": ", ec.message()));
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return base::ErrnoError(absl::StrCat("mkdir(", dir.string(), ")"));
  }
  ABOX_RETURN_IF_ERROR(OpenCheckedDir(dir).status());
  return std::unique_ptr<FileValueStore>(new FileValueStore(dir));
}

absl::Status FileValueStore::Put(const std::string& name, const SecretValue& value) {
  ABOX_RETURN_IF_ERROR(ValidateSecretName(name));
  std::lock_guard lock(mu_);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenCheckedDir(dir_));
  ABOX_RETURN_IF_ERROR(Lock(dir.get(), LOCK_EX, dir_.string()));
  ABOX_ASSIGN_OR_RETURN(Entries entries, ReadEntries(dir.get(), file().string()));
  entries.insert_or_assign(name, value.Clone());
  return WriteEntries(dir.get(), file().string(), entries);
}

absl::StatusOr<SecretValue> FileValueStore::Get(const std::string& name) {
  std::lock_guard lock(mu_);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenCheckedDir(dir_));
  ABOX_RETURN_IF_ERROR(Lock(dir.get(), LOCK_SH, dir_.string()));
  ABOX_ASSIGN_OR_RETURN(Entries entries, ReadEntries(dir.get(), file().string()));
  auto it = entries.find(name);
  if (it == entries.end()) {
    return absl::NotFoundError(absl::StrCat("no value is stored for secret ", name, " in ",
                                            file().string(), ": set it with `abox secret set`"));
  }
  return std::move(it->second);
}

absl::Status FileValueStore::Remove(const std::string& name) {
  std::lock_guard lock(mu_);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenCheckedDir(dir_));
  ABOX_RETURN_IF_ERROR(Lock(dir.get(), LOCK_EX, dir_.string()));
  ABOX_ASSIGN_OR_RETURN(Entries entries, ReadEntries(dir.get(), file().string()));
  if (entries.erase(name) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no value is stored for secret ", name, " in ", file().string()));
  }
  return WriteEntries(dir.get(), file().string(), entries);
}

absl::StatusOr<std::vector<std::string>> FileValueStore::List() {
  std::lock_guard lock(mu_);
  ABOX_ASSIGN_OR_RETURN(base::UniqueFd dir, OpenCheckedDir(dir_));
  ABOX_RETURN_IF_ERROR(Lock(dir.get(), LOCK_SH, dir_.string()));
  ABOX_ASSIGN_OR_RETURN(Entries entries, ReadEntries(dir.get(), file().string()));
  std::vector<std::string> names;
  names.reserve(entries.size());
  for (const auto& [name, value] : entries) {
    names.push_back(name);
  }
  return names;
}

std::string FileValueStore::Describe() const { return absl::StrCat("file ", file().string()); }

}  // namespace abox::secrets
