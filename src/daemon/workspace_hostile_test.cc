// The workspace routes against a hostile guest: workspace tools that lie (what an agent with
// root in the guest can do) about the manifest and the packed files. Nothing they send may land
// outside the host tree, in .git, or with modes the host did not allow.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/status_macros.h"
#include "src/daemon/testing/workspace_api_fixture.h"
#include "src/workspace/apply_test_util.h"
#include "src/workspace/archive.h"
#include "src/workspace/guest_tools.h"
#include "src/workspace/manifest.h"
#include "src/workspace/paths.h"
#include "src/workspace/sha256.h"

namespace abox::daemon {
namespace {

namespace fs = std::filesystem;
using http::httptest::Response;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadAll;
using testing::WorkspaceApiTest;
using testing::WriteAll;

// A guest whose workspace tools lie (what an agent with root in the guest can do): its
// manifest is the real one edited by `edit` plus raw `extra_lines`, and its pack holds `files`
// for the paths the host asks for, then whatever `pack_more` adds, or is `raw_pack` as is, or is
// whatever `pack_stream` writes. `packs` counts the packs the host asked for.
struct HostileGuest {
  std::function<void(workspace::Manifest&)> edit;
  std::vector<std::string> extra_lines;
  std::map<std::string, std::string> files;
  std::function<absl::Status(workspace::SyncArchiveWriter&)> pack_more;
  std::optional<std::string> raw_pack;
  std::function<absl::Status(const workspace::GuestTools::OutputFn&)> pack_stream;
  std::shared_ptr<std::atomic<int>> packs = std::make_shared<std::atomic<int>>(0);
};

class HostileGuestTools final : public workspace::GuestTools {
 public:
  HostileGuestTools(workspace::GuestTools& real, HostileGuest guest)
      : real_(real), guest_(std::move(guest)) {}

  absl::Status Run(const std::vector<std::string>& args, const InputFn& input,
                   const OutputFn& output) override {
    if (!args.empty() && args[0] == "manifest") {
      std::string text;
      ABOX_RETURN_IF_ERROR(real_.Run(args, input, [&](absl::string_view out) {
        text.append(out.data(), out.size());
        return absl::OkStatus();
      }));
      ABOX_ASSIGN_OR_RETURN(workspace::Manifest m, workspace::ParseManifest(text));
      if (guest_.edit) {
        guest_.edit(m);
      }
      std::string crafted = workspace::SerializeManifest(m);
      for (const std::string& line : guest_.extra_lines) {
        absl::StrAppend(&crafted, line, "\n");
      }
      return output(crafted);
    }
    if (!args.empty() && args[0] == "pack") {
      std::string asked;
      if (input) {
        ABOX_RETURN_IF_ERROR(input([&](absl::string_view data) {
          asked.append(data.data(), data.size());
          return absl::OkStatus();
        }));
      }
      ++*guest_.packs;
      if (guest_.raw_pack) {
        return output(*guest_.raw_pack);
      }
      if (guest_.pack_stream) {
        return guest_.pack_stream(output);
      }
      std::string archive;
      ABOX_ASSIGN_OR_RETURN(auto writer,
                            workspace::SyncArchiveWriter::Create([&](absl::string_view data) {
                              archive.append(data.data(), data.size());
                              return absl::OkStatus();
                            }));
      for (absl::string_view path : absl::StrSplit(asked, '\0', absl::SkipEmpty())) {
        auto it = guest_.files.find(std::string(path));
        if (it == guest_.files.end()) {
          continue;  // left out (or sent otherwise by pack_more)
        }
        workspace::Entry e;
        e.size = it->second.size();
        ABOX_RETURN_IF_ERROR(writer->AddData(it->first, e, it->second));
      }
      if (guest_.pack_more) {
        ABOX_RETURN_IF_ERROR(guest_.pack_more(*writer));
      }
      ABOX_RETURN_IF_ERROR(writer->Finish());
      return output(archive);
    }
    return real_.Run(args, input, output);  // unpack (sync): the real tool
  }

 private:
  workspace::GuestTools& real_;
  HostileGuest guest_;
};

workspace::Entry FileEntry(const std::string& content, uint32_t mode = 0644) {
  workspace::Entry e;
  e.mode = mode;
  e.size = content.size();
  e.sha256 = workspace::Sha256Hex(content);
  return e;
}

workspace::Entry LinkEntry(const std::string& target) {
  workspace::Entry e;
  e.type = workspace::EntryType::kSymlink;
  e.mode = 0;
  e.link_target = target;
  return e;
}

// A zstd pax archive of regular files under any names, written with libarchive directly
// (SyncArchiveWriter refuses bad names, as an honest guest's tool does).
std::string RawPack(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  struct archive* a = archive_write_new();
  EXPECT_EQ(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  EXPECT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  EXPECT_EQ(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
  EXPECT_EQ(archive_write_open(
                a, &out, nullptr,
                [](struct archive*, void* sink, const void* buf, size_t len) -> la_ssize_t {
                  static_cast<std::string*>(sink)->append(static_cast<const char*>(buf), len);
                  return static_cast<la_ssize_t>(len);
                },
                nullptr),
            ARCHIVE_OK)
      << archive_error_string(a);
  for (const auto& [path, content] : files) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_copy_pathname(e, path.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  EXPECT_EQ(archive_write_close(a), ARCHIVE_OK) << archive_error_string(a);
  archive_write_free(a);
  return out;
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST_F(WorkspaceApiTest, HostileGuestContentNeverEscapesTheHostTree) {
  std::string id = Create();
  fs::path outside = fs::path(tmp_.path()) / "outside";
  fs::create_directories(outside);
  // The host tree without .git (which abox never writes), compared without printing it.
  auto snapshot = [&] {
    auto all = workspace::testing::Snapshot(host_.string());
    std::erase_if(all, [](const auto& kv) { return workspace::IsUnderGitDir(kv.first); });
    return all;
  };
  auto hostile = [&](HostileGuest guest) {
    daemon_->set_guest_tools_wrapper([guest](workspace::GuestTools& real) {
      return std::make_unique<HostileGuestTools>(real, guest);
    });
  };
  auto nothing_escaped = [&] {
    EXPECT_TRUE(fs::is_empty(outside));
    EXPECT_FALSE(fs::exists(fs::path(tmp_.path()) / "pwned"));
    EXPECT_FALSE(fs::exists(host_ / ".git/hooks/pre-commit"));
    EXPECT_FALSE(fs::exists(host_ / "tools/.git"));
  };

  // 1. Names out of the tree, absolute, with a newline: the manifest is refused whole.
  for (const std::string& name : {std::string("../outside/pwned"), std::string("src/../../pwned"),
                                  (outside / "pwned").string(), std::string("a\nb")}) {
    SCOPED_TRACE(workspace::testing::EscapeForTrace(name));
    auto before = snapshot();
    hostile({.edit = [name](workspace::Manifest& m) { m[name] = FileEntry("pwned\n"); },
             .files = {{name, "pwned\n"}}});
    Response r = Post(id, "apply", {{"conflicts", "markers"}, {"allow_exec_files", true}});
    EXPECT_NE(r.status, 200) << r.body;
    EXPECT_THAT(r.body, HasSubstr("bad workspace manifest"));
    EXPECT_TRUE(snapshot() == before);
    nothing_escaped();
  }

  // 2. Git state at any depth, in any case, next to an honest change: the git paths never
  // come back (not even with --allow-exec-files), the rest does.
  const std::string fsmonitor = "[core]\n\tfsmonitor = touch " + (outside / "ran").string() + "\n";
  hostile({.edit =
               [&](workspace::Manifest& m) {
                 m["tools/.git/config"] = FileEntry(fsmonitor);
                 m["tools/.git/HEAD"] = FileEntry("ref: refs/heads/main\n");
                 m["sub/.git"] = FileEntry("gitdir: ../../outside\n");  // a gitlink file
                 m[".GIT/config"] = FileEntry(fsmonitor);
                 m[".git/hooks/pre-commit"] = FileEntry("#!/bin/sh\nevil\n", 0755);
                 m["notes.txt"] = FileEntry("honest work\n");
               },
           .files = {{"notes.txt", "honest work\n"},
                     {"tools/.git/config", fsmonitor},
                     {"sub/.git", "gitdir: ../../outside\n"}}});
  nlohmann::json diff = Diff(id);
  EXPECT_THAT(diff["files"].dump(), Not(HasSubstr(".git")));
  EXPECT_THAT(diff["files"].dump(), Not(HasSubstr(".GIT")));
  EXPECT_EQ(diff["ignored"], 4) << diff.dump();  // the nested ones; the root .git is the agent's
  Response r = Post(id, "apply", {{"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ReadAll(host_ / "notes.txt"), "honest work\n");
  EXPECT_FALSE(fs::exists(host_ / "tools"));
  EXPECT_FALSE(fs::exists(host_ / "sub"));
  EXPECT_FALSE(fs::exists(host_ / ".GIT/config"));
  nothing_escaped();

  // 3. Symlinks each harmless by its text that together leave the tree: a -> . with
  // b -> a/.., a loop, and a chain of 50 links ending inside. Refused unless allowed by name.
  auto links = [](workspace::Manifest& m) {
    m["a"] = LinkEntry(".");
    m["b"] = LinkEntry("a/..");
    m["loop1"] = LinkEntry("loop2");
    m["loop2"] = LinkEntry("x/../loop1");
    for (int i = 0; i < 50; ++i) {
      m[absl::StrCat("chain/l", i)] =
          LinkEntry(i == 49 ? "../README.md" : absl::StrCat("l", i + 1));
    }
  };
  hostile({.edit = links});
  auto before = snapshot();
  r = Post(id, "apply", nlohmann::json::object());
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(r.body, HasSubstr("--allow-exec-files"));
  EXPECT_THAT(r.body,
              HasSubstr("b: a symlink pointing outside the workspace (a/.., through a -> .)"));
  EXPECT_THAT(r.body, HasSubstr("loop"));
  EXPECT_TRUE(snapshot() == before);
  Response dry = Post(id, "apply", {{"dry_run", true}});
  ASSERT_EQ(dry.status, 200) << dry.body;
  std::string refused = dry.Json()["exec_files_refused"].dump();
  for (const char* path : {"\"b\"", "\"loop1\"", "\"loop2\"", "\"chain/l0\""}) {
    EXPECT_THAT(refused, HasSubstr(path));
  }
  EXPECT_THAT(refused, Not(HasSubstr("\"a\"")));  // the root itself: inside
  EXPECT_THAT(refused, Not(HasSubstr("\"chain/l49\"")));
  nothing_escaped();
  // Taken by name, as before for links that leave: written as links, nothing through them.
  r = Post(id, "apply", {{"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fs::read_symlink(host_ / "b"), "a/..");
  nothing_escaped();

  // 4. Modes the guest chose: setuid and world-writable land as 0755 / 0644.
  auto modes = [&](workspace::Manifest& m) {
    links(m);  // already applied: unchanged
    m["tool.sh"] = FileEntry("#!/bin/sh\necho hi\n", 06777);
    m["data.txt"] = FileEntry("shared\n", 0666);
    m["README.md"].mode = 0666;  // only the mode changes
  };
  hostile(
      {.edit = modes, .files = {{"tool.sh", "#!/bin/sh\necho hi\n"}, {"data.txt", "shared\n"}}});
  r = Post(id, "apply", nlohmann::json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ModeOf(host_ / "tool.sh"), 0755u);
  EXPECT_EQ(ModeOf(host_ / "data.txt"), 0644u);
  EXPECT_EQ(ModeOf(host_ / "README.md"), 0644u);

  // 5. Packs that do not hold what the manifest promised, or more: refused, nothing written.
  // (Each promises a new file of its own content: content that a refused pack delivered
  // intact stays in the store, and what the store has is not asked for again.)
  auto promise = [&](const std::string& name) {
    return [&, name](workspace::Manifest& m) {
      modes(m);
      m[name] = FileEntry("promised " + name);
    };
  };
  std::vector<HostileGuest> packs;
  packs.push_back({.edit = promise("p0.txt"), .files = {{"p0.txt", "tampered"}}});
  packs.push_back({.edit = promise("p1.txt"),
                   .files = {{"p1.txt", "promised p1.txt"}},
                   .pack_more = [](workspace::SyncArchiveWriter& w) {
                     return w.AddData("README.md", FileEntry("unasked\n"), "unasked\n");
                   }});
  packs.push_back(
      {.edit = promise("p2.txt"),
       .raw_pack = RawPack({{"../outside/pwned", "pwned\n"}, {"p2.txt", "promised p2.txt"}})});
  packs.push_back({.edit = promise("p3.txt"),
                   .raw_pack = RawPack({{(outside / "pwned").string(), "pwned\n"},
                                        {"p3.txt", "promised p3.txt"}})});
  packs.push_back({.edit = promise("p4.txt"), .pack_more = [](workspace::SyncArchiveWriter& w) {
                     return w.AddData("p4.txt", LinkEntry("/etc/passwd"), "");
                   }});
  packs.push_back({.edit = promise("p5.txt")});  // sends nothing
  const char* why[] = {"changed in the sandbox", "not asked for",          "'..' components",
                       "absolute paths",         "changed in the sandbox", "went away"};
  ASSERT_EQ(packs.size(), std::size(why));
  for (size_t i = 0; i < packs.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("pack ", i));
    before = snapshot();
    hostile(packs[i]);
    r = Post(id, "apply", nlohmann::json::object());
    EXPECT_NE(r.status, 200) << r.body;
    EXPECT_THAT(r.body, HasSubstr(why[i]));
    EXPECT_TRUE(snapshot() == before);
    EXPECT_FALSE(fs::exists(host_ / absl::StrCat("p", i, ".txt")));
    nothing_escaped();
  }

  // 6. A directory the guest made a symlink out of the tree, and a file "beneath" it: the
  // host's src/ is a directory and stays one (a conflict the host keeps its version of).
  hostile({.edit =
               [&](workspace::Manifest& m) {
                 modes(m);
                 m["src"] = LinkEntry(outside.string());
                 m["src/main.c"] = FileEntry("int main(void) { return 1; }\n");
               },
           .files = {{"src/main.c", "int main(void) { return 1; }\n"}}});
  r = Post(id, "apply", {{"conflicts", "markers"}, {"allow_exec_files", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.Json()["conflicts"].dump(), HasSubstr("\"src\""));
  EXPECT_TRUE(fs::is_directory(host_ / "src") && !fs::is_symlink(host_ / "src"));
  EXPECT_FALSE(fs::exists(outside / "main.c"));
  nothing_escaped();
  daemon_->set_guest_tools_wrapper(nullptr);
}

// Disk: a guest's claims bound what a fetch may write, and the budget is checked against them
// before anything is fetched (issue 11 item 6).
TEST_F(WorkspaceApiTest, AGuestClaimingMoreThanTheQuotaIsRefusedBeforeAnythingIsFetched) {
  std::string id = Create();
  const fs::path state = fs::path(home_.path()) / "workspaces" / id;
  auto bytes_under = [](const fs::path& dir) {
    uintmax_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.is_regular_file()) {
        n += e.file_size();
      }
    }
    return n;
  };
  const uintmax_t before = bytes_under(state);
  // 40 files of a claimed 1 GiB each: 40 GiB, ten times the default 4 GiB quota.
  HostileGuest guest{.edit = [](workspace::Manifest& m) {
    for (int i = 0; i < 40; ++i) {
      workspace::Entry e = FileEntry(absl::StrCat("part ", i));
      e.size = uint64_t{1} << 30;
      m[absl::StrCat("dump/part", i, ".bin")] = e;
    }
  }};
  std::shared_ptr<std::atomic<int>> packs = guest.packs;
  daemon_->set_guest_tools_wrapper([guest](workspace::GuestTools& real) {
    return std::make_unique<HostileGuestTools>(real, guest);
  });
  for (const char* route : {"diff", "apply", "pull"}) {
    SCOPED_TRACE(route);
    Response r = std::string(route) == "diff"
                     ? Call("GET", absl::StrCat("/v1/sandboxes/", id, "/diff"))
                     : Post(id, route, {{"paths", {"dump"}}});
    EXPECT_EQ(r.status, 507) << r.body;
    EXPECT_THAT(r.body, HasSubstr("insufficient_storage"));
    EXPECT_THAT(r.body, HasSubstr("40960 MiB"));
    EXPECT_THAT(r.body, HasSubstr("--workspace-quota"));
  }
  EXPECT_EQ(packs->load(), 0) << "the guest was asked for content past the quota";
  EXPECT_LE(bytes_under(state), before + 4096);

  // Within the quota the same sandbox works again.
  daemon_->set_guest_tools_wrapper(nullptr);
  WriteAll(guest_ / "notes.txt", "fine\n");
  EXPECT_EQ(Diff(id)["files"].size(), 1u);
}

TEST_F(WorkspaceApiTest, ABrokenPackStreamStopsTheGuestsToolWithoutStagingIt) {
  std::string id = Create();
  // One file of a claimed 256 MiB, then a pack that is not an archive, sent for as long as the
  // host takes it. Staged first, the host would have taken ~290 MiB before reading any of it.
  const std::string claimed = "x";
  auto sent = std::make_shared<std::atomic<uint64_t>>(0);
  HostileGuest guest{
      .edit =
          [&](workspace::Manifest& m) {
            workspace::Entry e = FileEntry(claimed);
            e.size = uint64_t{256} << 20;
            m["big.bin"] = e;
          },
      .pack_stream = [sent](const workspace::GuestTools::OutputFn& output) -> absl::Status {
        const std::string junk(64 << 10, 'J');
        while (*sent < (uint64_t{512} << 20)) {
          ABOX_RETURN_IF_ERROR(output(junk));
          *sent += junk.size();
        }
        return absl::OkStatus();
      }};
  daemon_->set_guest_tools_wrapper([guest](workspace::GuestTools& real) {
    return std::make_unique<HostileGuestTools>(real, guest);
  });
  Response r = Call("GET", absl::StrCat("/v1/sandboxes/", id, "/diff"));
  EXPECT_NE(r.status, 200) << r.body;
  EXPECT_GT(sent->load(), 0u);
  // Refused within what the channel holds plus what libarchive reads ahead, not at the end.
  EXPECT_LE(sent->load(), uint64_t{4} << 20) << "the pack was read only after it was staged";
  EXPECT_FALSE(fs::exists(fs::path(home_.path()) / "workspaces" / id / "pack.tmp"));
}

}  // namespace
}  // namespace abox::daemon
