#include "src/image/kernel_extract.h"

#include <elf.h>
#include <lz4.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace abox::image {
namespace {

constexpr uint32_t kLz4LegacyMagic = 0x184C2102;
constexpr size_t kLz4LegacyBlockMax = size_t{8} << 20;  // LZ4_DEFAULT_UNCOMPRESSED_CHUNK_SIZE
constexpr uint32_t kXenElfNotePhys32Entry = 18;

uint32_t Le32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}

uint16_t Le16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | u[1] << 8);
}

template <typename T>
T Load(absl::string_view data, size_t off) {
  T v;
  std::memcpy(&v, data.data() + off, sizeof(T));
  return v;
}

}  // namespace

absl::StatusOr<std::string> DecodeLz4Legacy(absl::string_view in, size_t max_output) {
  if (in.size() < 4 || Le32(in.data()) != kLz4LegacyMagic) {
    return absl::DataLossError("not an LZ4 legacy frame (magic 02 21 4c 18 missing)");
  }
  const auto max_block = static_cast<size_t>(LZ4_compressBound(kLz4LegacyBlockMax));
  std::string out;
  size_t pos = 4;
  size_t blocks = 0;
  while (pos < in.size()) {
    if (in.size() - pos < 4) {
      return absl::DataLossError(absl::StrCat("LZ4 legacy frame truncated at offset ", pos));
    }
    uint32_t n = Le32(in.data() + pos);
    if (n == kLz4LegacyMagic) {  // Start of a concatenated stream.
      pos += 4;
      continue;
    }
    if (in.size() - pos == 4 && blocks > 0) {
      // The kernel's build appends the uncompressed size after the frame.
      if (n != static_cast<uint32_t>(out.size())) {
        return absl::DataLossError(
            absl::StrCat("LZ4 legacy frame: trailing size ", n, " != decoded size ", out.size()));
      }
      break;
    }
    pos += 4;
    if (n == 0 || n > max_block) {
      return absl::DataLossError(
          absl::StrCat("LZ4 legacy frame: bad block size ", n, " at offset ", pos - 4));
    }
    if (n > in.size() - pos) {
      return absl::DataLossError(absl::StrCat("LZ4 legacy frame truncated: block at offset ",
                                              pos - 4, " needs ", n, " bytes, ", in.size() - pos,
                                              " left"));
    }
    size_t old = out.size();
    out.resize(old + kLz4LegacyBlockMax);
    int got = LZ4_decompress_safe(in.data() + pos, out.data() + old, static_cast<int>(n),
                                  static_cast<int>(kLz4LegacyBlockMax));
    if (got < 0) {
      return absl::DataLossError(
          absl::StrCat("LZ4 legacy frame: corrupt block at offset ", pos - 4));
    }
    out.resize(old + static_cast<size_t>(got));
    if (out.size() > max_output) {
      return absl::ResourceExhaustedError(
          absl::StrCat("LZ4 legacy frame expands beyond ", max_output, " bytes"));
    }
    pos += n;
    ++blocks;
  }
  if (blocks == 0) {
    return absl::DataLossError("LZ4 legacy frame has no blocks");
  }
  return out;
}

absl::StatusOr<absl::string_view> BzImagePayload(absl::string_view bz) {
  // Offsets from Documentation/x86/boot.rst.
  constexpr size_t kSetupSects = 0x1f1, kHeaderMagic = 0x202, kVersion = 0x206;
  constexpr size_t kPayloadOffset = 0x248, kPayloadLength = 0x24c;
  if (bz.size() < 0x250 || bz.substr(kHeaderMagic, 4) != "HdrS") {
    return absl::InvalidArgumentError("not a bzImage (no 'HdrS' boot header)");
  }
  uint16_t version = Le16(bz.data() + kVersion);
  if (version < 0x0208) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bzImage boot protocol %x.%02x is older than 2.08 (no payload fields)",
                        version >> 8, version & 0xff));
  }
  size_t setup_sects = static_cast<unsigned char>(bz[kSetupSects]);
  if (setup_sects == 0) {
    setup_sects = 4;
  }
  size_t pm_start = (setup_sects + 1) * 512;
  uint64_t off = uint64_t{pm_start} + Le32(bz.data() + kPayloadOffset);
  uint64_t len = Le32(bz.data() + kPayloadLength);
  if (len == 0 || off > bz.size() || len > bz.size() - off) {
    return absl::InvalidArgumentError(absl::StrCat("bzImage payload (offset ", off, ", length ",
                                                   len, ") lies outside the file of ", bz.size(),
                                                   " bytes"));
  }
  return bz.substr(off, len);
}

absl::Status CheckPvhElf(absl::string_view elf) {
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError("not an ELF file");
  }
  auto eh = Load<Elf64_Ehdr>(elf, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_X86_64 || eh.e_type != ET_EXEC) {
    return absl::InvalidArgumentError("not a little-endian x86-64 ELF executable");
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > elf.size() ||
      uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > elf.size() - eh.e_phoff) {
    return absl::InvalidArgumentError("ELF program headers out of bounds");
  }
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    auto ph = Load<Elf64_Phdr>(elf, eh.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type != PT_NOTE) {
      continue;
    }
    if (ph.p_offset > elf.size() || ph.p_filesz > elf.size() - ph.p_offset) {
      return absl::InvalidArgumentError("ELF note segment out of bounds");
    }
    absl::string_view notes = elf.substr(ph.p_offset, ph.p_filesz);
    size_t pos = 0;
    while (notes.size() - pos >= sizeof(Elf64_Nhdr)) {
      auto nh = Load<Elf64_Nhdr>(notes, pos);
      pos += sizeof(Elf64_Nhdr);
      size_t name_len = (uint64_t{nh.n_namesz} + 3) & ~uint64_t{3};
      size_t desc_len = (uint64_t{nh.n_descsz} + 3) & ~uint64_t{3};
      if (name_len > notes.size() - pos || desc_len > notes.size() - pos - name_len) {
        break;  // Malformed tail: stop scanning this segment.
      }
      absl::string_view name = notes.substr(pos, nh.n_namesz);
      if (nh.n_type == kXenElfNotePhys32Entry && nh.n_namesz == 4 &&
          name == absl::string_view("Xen\0", 4)) {
        return absl::OkStatus();
      }
      pos += name_len + desc_len;
    }
  }
  return absl::NotFoundError(
      "kernel ELF has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): it needs CONFIG_PVH=y");
}

absl::StatusOr<std::string> ExtractVmlinux(absl::string_view bzimage) {
  auto payload = BzImagePayload(bzimage);
  if (!payload.ok()) {
    return payload.status();
  }
  if (payload->size() < 4 || Le32(payload->data()) != kLz4LegacyMagic) {
    unsigned char m[4] = {};
    std::memcpy(m, payload->data(), std::min<size_t>(4, payload->size()));
    return absl::UnimplementedError(absl::StrFormat(
        "kernel payload is not LZ4 (magic %02x %02x %02x %02x); only LZ4 kernels are supported",
        m[0], m[1], m[2], m[3]));
  }
  auto elf = DecodeLz4Legacy(*payload);
  if (!elf.ok()) {
    return absl::DataLossError(absl::StrCat("kernel payload: ", elf.status().message()));
  }
  if (absl::Status s = CheckPvhElf(*elf); !s.ok()) {
    return s;
  }
  return elf;
}

}  // namespace abox::image
