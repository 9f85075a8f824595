// libFuzzer target: the body of a git push is hostile guest bytes. The command reader must
// never crash, must give the same answer however the bytes are split, may only report
// well-formed updates (valid ref names, at most kMaxRefUpdates), and the refusal reply built
// for them must itself be well-formed pkt-lines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "src/net/git_ref_policy.h"
#include "src/net/pkt_line.h"

namespace {

void Check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

struct Run {
  absl::Status status;
  bool done = false;
  uint64_t consumed = 0;
  std::vector<abox::net::RefUpdate> updates;
};

Run Read(absl::string_view bytes, size_t a, size_t b) {
  abox::net::ReceivePackCommandReader reader;
  Run run;
  for (absl::string_view part : {bytes.substr(0, a), bytes.substr(a, b - a), bytes.substr(b)}) {
    absl::StatusOr<bool> r = reader.Feed(part);
    if (!r.ok()) {
      run.status = r.status();
      break;
    }
    if (*r) {
      break;
    }
  }
  run.done = reader.done();
  run.consumed = reader.consumed();
  run.updates = reader.updates();
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  Run whole = Read(bytes, size, size);
  size_t a = size == 0 ? 0 : data[0] % (size + 1);
  size_t b = size == 0 ? 0 : a + data[size - 1] % (size - a + 1);
  Run split = Read(bytes, a, b);
  Check(whole.status.code() == split.status.code());
  Check(whole.done == split.done);
  Check(whole.updates.size() == split.updates.size());
  Check(whole.updates.size() <= abox::net::kMaxRefUpdates);
  Check(whole.consumed <= size);
  if (whole.status.ok() && whole.done) {
    Check(whole.consumed == split.consumed);
  }
  if (!whole.status.ok()) {
    Check(!whole.status.message().empty());
  }
  for (size_t i = 0; i < whole.updates.size(); ++i) {
    Check(abox::net::IsValidRefName(whole.updates[i].refname));
    Check(whole.updates[i].refname == split.updates[i].refname);
  }
  abox::net::RefPolicy policy{{"agent/*", "x/**"}, size % 2 == 0};
  std::vector<abox::net::RefRefusal> refusals = abox::net::CheckRefUpdates(policy, whole.updates);
  std::string reply = abox::net::BuildReceivePackRefusal(
      whole.updates, refusals, {"report-status", size % 3 == 0 ? "side-band" : "side-band-64k"});
  absl::string_view rest = reply;
  abox::net::PktLineReader reader;
  bool flushed = false;
  while (!rest.empty()) {
    auto line = reader.Next(&rest);
    Check(line.ok() && line->has_value());
    flushed = (*line)->kind == abox::net::PktLine::Kind::kFlush;
  }
  Check(flushed);
  return 0;
}
