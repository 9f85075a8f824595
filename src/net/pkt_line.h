// Reads the start of a git smart-HTTP push (the body of `POST .../git-receive-pack`) far enough
// to know which refs it updates, so the proxy can refuse a push to a ref the sandbox may not
// touch before the forge sees it (and before the token is added), and builds the reply git shows
// the user when it does.
//
// The body is pkt-lines (gitprotocol-common(5)): 4 hex digits giving the length including
// themselves, then the payload; "0000" is a flush. A push sends
//   *shallow-line, then the commands "<old-oid> <new-oid> <refname>", the first followed by
//   NUL and the capability list, then a flush, then the pack.
// The reader stops at the flush: the pack is never parsed.
//
// Trust boundary: every byte comes from the guest. One pkt-line is buffered at most
// (kMaxPktLineSize), at most kMaxRefUpdates commands are kept. Anything git itself would not
// send is refused with a message saying what was wrong: bad hex, a length of 1..4 or over the
// maximum, a special packet outside protocol v2, a first command without capabilities, a later
// one with, malformed object ids or ref names, push certificates (signed pushes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace abox::net {

inline constexpr size_t kMaxPktLineSize = 65520;  // LARGE_PACKET_MAX, length digits included
inline constexpr size_t kMaxRefUpdates = 1000;
inline constexpr size_t kMaxShallowLines = 1000;
inline constexpr size_t kMaxRefNameSize = 1024;

struct PktLine {
  enum class Kind : uint8_t {
    kData,
    kFlush,        // 0000
    kDelim,        // 0001 (protocol v2)
    kResponseEnd,  // 0002 (protocol v2)
  };
  Kind kind = Kind::kData;
  std::string payload;  // kData only
};

// Splits a byte stream into pkt-lines. Not thread-safe.
class PktLineReader final {
 public:
  // `allow_v2_markers`: accept 0001 and 0002 (protocol v2 only; a push never sends them).
  explicit PktLineReader(bool allow_v2_markers = false) : allow_v2_(allow_v2_markers) {}

  // Takes bytes from the front of `*data` until one pkt-line is complete and returns it, or
  // nullopt once `*data` is used up first (a partial line is kept for the next call).
  // InvalidArgument for a malformed length.
  [[nodiscard]] absl::StatusOr<std::optional<PktLine>> Next(absl::string_view* data);

 private:
  bool allow_v2_;
  std::string header_;  // the length digits read so far
  size_t size_ = 0;     // payload size once the header is complete
  std::string payload_;
};

// The zero object id (all '0'): as new-oid, a delete; as old-oid, a create.
struct RefUpdate {
  std::string old_oid;
  std::string new_oid;
  std::string refname;

  bool is_delete() const { return new_oid.find_first_not_of('0') == std::string::npos; }
  bool is_create() const { return old_oid.find_first_not_of('0') == std::string::npos; }
};

// Reads the command list of a receive-pack request body. Not thread-safe.
class ReceivePackCommandReader final {
 public:
  ReceivePackCommandReader() = default;

  // Reads body bytes. Returns true once the command list ended (the flush was read); bytes
  // after it (the pack) are not looked at, see consumed(). Once an error is returned, every
  // later call returns it again.
  [[nodiscard]] absl::StatusOr<bool> Feed(absl::string_view data);

  bool done() const { return done_; }
  const std::vector<RefUpdate>& updates() const { return updates_; }
  // The capabilities the client asked for ("report-status", "side-band-64k", "agent=git/2.43").
  const std::vector<std::string>& capabilities() const { return capabilities_; }
  bool HasCapability(absl::string_view name) const;
  // Bytes of the body read so far (up to and including the flush once done()).
  uint64_t consumed() const { return consumed_; }

 private:
  absl::Status Command(absl::string_view payload);

  PktLineReader reader_;
  std::vector<RefUpdate> updates_;
  std::vector<std::string> capabilities_;
  size_t shallow_lines_ = 0;
  uint64_t consumed_ = 0;
  bool done_ = false;
  absl::Status error_;
};

// A ref name as git check-ref-format(1) accepts it, limited to kMaxRefNameSize bytes: no
// control bytes, space, ~ ^ : ? * [ \, "..", "@{", "//", no component starting with '.' or
// ending in ".lock", not ending in '/' or '.'.
bool IsValidRefName(absl::string_view name);

// Encodes one pkt-line (payload of at most kMaxPktLineSize - 4 bytes).
std::string EncodePktLine(absl::string_view payload);

// One refused ref and why ("only refs/heads/agent/* may be pushed").
struct RefRefusal {
  std::string refname;
  std::string reason;
};

// "abox: push to refs/heads/main refused: <reason>".
std::string RefusalText(const RefRefusal& refusal);

// The body of the HTTP 200 answer (Content-Type application/x-git-receive-pack-result) that
// makes git report the push as rejected, every ref of `updates` with its reason: refs in
// `refusals` with theirs, the others "abox: not pushed: another ref in this push was refused".
// It speaks what the client asked for in `capabilities`: report-status lines ("unpack ok" as
// after a declined pre-receive hook, then "ng <ref> <reason>"), inside side-band channel 1 when
// side-band(-64k) was asked, with the refusals also on channel 2 (git prints them as
// "remote: abox: push to ... refused: ..."); without report-status or side-band, an
// "ERR <message>" line (git prints "remote error: ...").
std::string BuildReceivePackRefusal(const std::vector<RefUpdate>& updates,
                                    const std::vector<RefRefusal>& refusals,
                                    const std::vector<std::string>& capabilities);

}  // namespace abox::net
