// Turns Debian's compressed kernel (bzImage with an LZ4 payload) into the uncompressed ELF
// vmlinux that QEMU boots through the PVH entry point (skipping in-guest decompression).
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::image {

// LZ4 "legacy frame" (what `lz4 -l` and the kernel's bzImage use): magic 02 21 4c 18, then
// blocks of {u32 LE compressed size, LZ4 block} each expanding to at most 8 MiB. Decoding
// stops at the end of input; a magic number between blocks (concatenated streams) is skipped,
// and a final 4-byte word (the kernel build appends the uncompressed size) is accepted when it
// equals the decoded size. Fails with kDataLoss on truncated or corrupt input and with
// kResourceExhausted when the output would exceed `max_output`.
[[nodiscard]] absl::StatusOr<std::string> DecodeLz4Legacy(absl::string_view in,
                                                          size_t max_output = size_t{1} << 30);

// Returns the compressed payload inside a bzImage (x86 boot protocol >= 2.08): the bytes at
// payload_offset/payload_length after the real-mode setup sectors.
[[nodiscard]] absl::StatusOr<absl::string_view> BzImagePayload(absl::string_view bzimage);

// Checks that `elf` is an x86-64 ELF executable with a PVH entry note (a PT_NOTE with owner
// "Xen" and type 18, XEN_ELFNOTE_PHYS32_ENTRY), which QEMU needs to boot it directly.
[[nodiscard]] absl::Status CheckPvhElf(absl::string_view elf);

// bzImage bytes -> uncompressed vmlinux ELF with a PVH note. Only LZ4 payloads are supported
// (Debian's kernels); other compressions fail with kUnimplemented naming the magic found.
[[nodiscard]] absl::StatusOr<std::string> ExtractVmlinux(absl::string_view bzimage);

}  // namespace abox::image
