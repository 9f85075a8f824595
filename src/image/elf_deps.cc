#include "src/image/elf_deps.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/status_macros.h"
#include "src/base/unique_fd.h"

namespace abox::image {
namespace {

// Caps on what a hostile header can make us read or loop over.
constexpr size_t kMaxPhdrs = 512;
constexpr size_t kMaxDynamic = 1 << 20;  // bytes of PT_DYNAMIC
constexpr size_t kMaxStrtab = 64 << 20;  // bytes of DT_STRTAB
constexpr size_t kMaxVerneed = 4096;     // entries, files and their versions together
constexpr size_t kMaxString = 4096;

constexpr char kInterpreter[] = "/lib64/ld-linux-x86-64.so.2";

// A library the image can provide, and the Debian package that ships it.
struct LibraryPackage {
  const char* soname;
  const char* package;
};
// minbase always installs these packages (libc6, libgcc-s1 and zlib1g are Priority required;
// apt needs libstdc++6).
constexpr const char* kAlwaysInstalled[] = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"};
constexpr LibraryPackage kLibraries[] = {
    {"libc.so.6", "libc6"},         {"libm.so.6", "libc6"},           {"libpthread.so.0", "libc6"},
    {"libdl.so.2", "libc6"},        {"librt.so.1", "libc6"},          {"libresolv.so.2", "libc6"},
    {"libutil.so.1", "libc6"},      {"libanl.so.1", "libc6"},         {kInterpreter + 7, "libc6"},
    {"libgcc_s.so.1", "libgcc-s1"}, {"libstdc++.so.6", "libstdc++6"}, {"libz.so.1", "zlib1g"},
};
// glibc of each Debian suite, as {major, minor}.
struct SuiteGlibc {
  const char* suite;
  int major;
  int minor;
};
constexpr SuiteGlibc kSuiteGlibc[] = {{"bookworm", 2, 36}, {"trixie", 2, 41}};

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("corrupt ELF file: ", what));
}

class ElfFile {
 public:
  ElfFile(base::UniqueFd fd, uint64_t size) : fd_(std::move(fd)), size_(size) {}

  absl::Status Read(uint64_t offset, size_t len, void* out) const {
    if (offset > size_ || len > size_ - offset) {
      return Corrupt("offset beyond the end of the file");
    }
    char* p = static_cast<char*>(out);
    while (len > 0) {
      ssize_t n = ::pread(fd_.get(), p, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        return base::ErrnoError("pread");
      }
      if (n == 0) {
        return Corrupt("file shrank while being read");
      }
      p += n;
      len -= static_cast<size_t>(n);
      offset += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadBytes(uint64_t offset, size_t len) const {
    std::string s(len, '\0');
    ABOX_RETURN_IF_ERROR(Read(offset, len, s.data()));
    return s;
  }

 private:
  base::UniqueFd fd_;
  uint64_t size_;
};

// Maps a virtual address to a file offset through the PT_LOAD segments.
absl::StatusOr<uint64_t> VaddrToOffset(const std::vector<Elf64_Phdr>& phdrs, uint64_t vaddr) {
  for (const Elf64_Phdr& ph : phdrs) {
    if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
      return ph.p_offset + (vaddr - ph.p_vaddr);
    }
  }
  return Corrupt("dynamic table points outside the loaded segments");
}

// The NUL-terminated string at `off` in `strtab`.
absl::StatusOr<std::string> StrAt(const std::string& strtab, uint64_t off) {
  if (off >= strtab.size()) {
    return Corrupt("string offset beyond the string table");
  }
  const size_t end = strtab.find('\0', off);
  if (end == std::string::npos || end - off > kMaxString) {
    return Corrupt("unterminated string");
  }
  return strtab.substr(off, end - off);
}

absl::Status ReadDynamic(const ElfFile& f, const std::vector<Elf64_Phdr>& phdrs,
                         const Elf64_Phdr& dyn_ph, ElfDeps* out) {
  if (dyn_ph.p_filesz > kMaxDynamic) {
    return Corrupt("dynamic section too large");
  }
  std::vector<Elf64_Dyn> dyn(dyn_ph.p_filesz / sizeof(Elf64_Dyn));
  ABOX_RETURN_IF_ERROR(f.Read(dyn_ph.p_offset, dyn.size() * sizeof(Elf64_Dyn), dyn.data()));
  uint64_t strtab = 0;
  uint64_t strsz = 0;
  uint64_t verneed = 0;
  uint64_t verneednum = 0;
  std::vector<uint64_t> needed;
  for (const Elf64_Dyn& d : dyn) {
    if (d.d_tag == DT_NULL) {
      break;
    }
    switch (d.d_tag) {
      case DT_NEEDED:
        needed.push_back(d.d_un.d_val);
        break;
      case DT_STRTAB:
        strtab = d.d_un.d_ptr;
        break;
      case DT_STRSZ:
        strsz = d.d_un.d_val;
        break;
      case DT_VERNEED:
        verneed = d.d_un.d_ptr;
        break;
      case DT_VERNEEDNUM:
        verneednum = d.d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (needed.empty() && verneednum == 0) {
    return absl::OkStatus();
  }
  if (strsz == 0 || strsz > kMaxStrtab) {
    return Corrupt("missing or oversized string table");
  }
  ABOX_ASSIGN_OR_RETURN(uint64_t str_off, VaddrToOffset(phdrs, strtab));
  ABOX_ASSIGN_OR_RETURN(std::string strs, f.ReadBytes(str_off, strsz));
  for (uint64_t n : needed) {
    ABOX_ASSIGN_OR_RETURN(std::string name, StrAt(strs, n));
    out->needed.push_back(std::move(name));
  }
  if (verneednum == 0) {
    return absl::OkStatus();
  }
  ABOX_ASSIGN_OR_RETURN(uint64_t vn_off, VaddrToOffset(phdrs, verneed));
  std::set<std::string> versions;
  size_t budget = kMaxVerneed;
  for (uint64_t i = 0; i < verneednum; ++i) {
    Elf64_Verneed vn;
    if (budget-- == 0) {
      return Corrupt("too many version entries");
    }
    ABOX_RETURN_IF_ERROR(f.Read(vn_off, sizeof(vn), &vn));
    uint64_t aux_off = vn_off + vn.vn_aux;
    for (uint16_t j = 0; j < vn.vn_cnt; ++j) {
      Elf64_Vernaux aux;
      if (budget-- == 0) {
        return Corrupt("too many version entries");
      }
      ABOX_RETURN_IF_ERROR(f.Read(aux_off, sizeof(aux), &aux));
      ABOX_ASSIGN_OR_RETURN(std::string name, StrAt(strs, aux.vna_name));
      versions.insert(std::move(name));
      if (aux.vna_next == 0) {
        break;
      }
      aux_off += aux.vna_next;
    }
    if (vn.vn_next == 0) {
      break;
    }
    vn_off += vn.vn_next;
  }
  out->versions.assign(versions.begin(), versions.end());
  return absl::OkStatus();
}

// "GLIBC_2.17" -> {2, 17}; false for other version names.
bool GlibcVersion(absl::string_view v, int* major, int* minor) {
  if (!absl::ConsumePrefix(&v, "GLIBC_")) {
    return false;
  }
  std::vector<absl::string_view> parts = absl::StrSplit(v, '.');
  return parts.size() >= 2 && absl::SimpleAtoi(parts[0], major) &&
         absl::SimpleAtoi(parts[1], minor);
}

}  // namespace

absl::StatusOr<ElfDeps> ReadElfDeps(const std::filesystem::path& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    return base::ErrnoError(absl::StrCat("open(", path.string(), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a regular file"));
  }
  const ElfFile f(std::move(fd), static_cast<uint64_t>(st.st_size));
  Elf64_Ehdr eh;
  if (static_cast<uint64_t>(st.st_size) < sizeof(eh) || !f.Read(0, sizeof(eh), &eh).ok() ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not an ELF executable"));
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), " is not an x86-64 ELF executable"));
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > kMaxPhdrs) {
    return Corrupt("bad program header table");
  }
  std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
  ABOX_RETURN_IF_ERROR(f.Read(eh.e_phoff, phdrs.size() * sizeof(Elf64_Phdr), phdrs.data()));
  ElfDeps deps;
  for (const Elf64_Phdr& ph : phdrs) {
    if (ph.p_type == PT_INTERP) {
      if (ph.p_filesz == 0 || ph.p_filesz > kMaxString) {
        return Corrupt("bad PT_INTERP");
      }
      ABOX_ASSIGN_OR_RETURN(deps.interpreter, f.ReadBytes(ph.p_offset, ph.p_filesz));
      deps.interpreter = deps.interpreter.substr(0, deps.interpreter.find('\0'));
    }
  }
  for (const Elf64_Phdr& ph : phdrs) {
    if (ph.p_type == PT_DYNAMIC) {
      ABOX_RETURN_IF_ERROR(ReadDynamic(f, phdrs, ph, &deps));
      break;
    }
  }
  return deps;
}

absl::Status CheckImageProvides(const ElfDeps& deps, const std::string& suite,
                                const std::vector<std::string>& packages, absl::string_view what) {
  if (!deps.interpreter.empty() && deps.interpreter != kInterpreter) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " asks for the ELF interpreter ", deps.interpreter, ", which a Debian image lacks (",
        kInterpreter, " is the glibc one): it is not a build for glibc x86-64"));
  }
  std::set<std::string> have(std::begin(kAlwaysInstalled), std::end(kAlwaysInstalled));
  for (const std::string& p : packages) {
    have.insert(p.substr(0, p.find('=')));
  }
  for (const std::string& lib : deps.needed) {
    const auto* it = std::find_if(std::begin(kLibraries), std::end(kLibraries),
                                  [&](const LibraryPackage& l) { return lib == l.soname; });
    if (it == std::end(kLibraries)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " needs the library ", lib,
                       ", which abox does not know a Debian package for; report this (the "
                       "agent's native build changed) and pin an older version with "
                       "--agent NAME@VERSION meanwhile"));
    }
    if (have.count(it->package) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(what, " needs ", lib,
                                                        " from Debian package ", it->package,
                                                        ": add --packages ", it->package));
    }
  }
  const auto* glibc = std::find_if(std::begin(kSuiteGlibc), std::end(kSuiteGlibc),
                                   [&](const SuiteGlibc& s) { return suite == s.suite; });
  if (glibc == std::end(kSuiteGlibc)) {
    return absl::OkStatus();
  }
  for (const std::string& v : deps.versions) {
    int major = 0;
    int minor = 0;
    if (GlibcVersion(v, &major, &minor) &&
        (major > glibc->major || (major == glibc->major && minor > glibc->minor))) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " needs ", v, " but Debian ", suite, " has glibc ", glibc->major, ".",
                       glibc->minor, ": pin an older agent version with --agent NAME@VERSION"));
    }
  }
  return absl::OkStatus();
}

}  // namespace abox::image
