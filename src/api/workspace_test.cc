#include "src/api/workspace.h"

#include "gtest/gtest.h"
#include "src/api/errors.h"
#include "src/api/wire.h"

namespace abox::api {
namespace {

TEST(WorkspaceJsonTest, EncodeThenDecodeGivesTheSameAnswers) {
  SyncReport sync{.changed = true,
                  .files = 3,
                  .deleted = 1,
                  .total_files = 40,
                  .bytes = 1 << 20,
                  .archive_bytes = 4096,
                  .hashed = 7,
                  .excluded = {".env (.env)"},
                  .notes = {"skipped a socket"},
                  .duration_ms = 12};
  EXPECT_EQ(*DecodeSyncReport(ToJson(sync)), sync);

  Diff diff{.files = {{.path = "a.sh",
                       .status = "modified",
                       .old_kind = "file",
                       .new_kind = "file",
                       .old_mode = 0644,
                       .new_mode = 0755,
                       .additions = 2,
                       .exec_sensitive = "shell script",
                       .patch = "--- a/a.sh\n"},
                      {.path = "b.bin", .status = "added", .new_kind = "file", .binary = true}},
            .ignored = 2};
  EXPECT_EQ(*DecodeDiff(ToJson(diff)), diff);
  EXPECT_FALSE(ToJson(diff)["files"][1].contains("patch"));
  EXPECT_FALSE(ToJson(diff)["files"][1].contains("exec_sensitive"));
  EXPECT_FALSE(ToJson(diff)["files"][0].contains("control_characters"));

  ApplyResult apply{
      .kind = "apply",
      .changes = {{.path = "a", .action = "conflict", .reason = "both changed", .markers = true}},
      .conflicts = {"a"},
      .written = 1,
      .artifact = "20261130-1"};
  EXPECT_EQ(*DecodeApplyResult(ToJson(apply)), apply);
  ApplyResult dry{.kind = "pull", .dry_run = true};
  EXPECT_EQ(ToJson(dry)["artifact"], nullptr);
  EXPECT_EQ(*DecodeApplyResult(ToJson(dry)), dry);

  std::vector<Artifact> artifacts = {{.id = "x",
                                      .created_at = "2026-11-30T16:05:31Z",
                                      .sandbox = "0123456789ab",
                                      .host_root = "/src",
                                      .kind = "apply",
                                      .state = "committed",
                                      .files = 3}};
  EXPECT_EQ(*DecodeArtifactList(ArtifactListToJson(artifacts)), artifacts);
  UndoResult undo{.id = "x", .files = 3, .notes = {"n"}};
  EXPECT_EQ(*DecodeUndoResult(ToJson(undo)), undo);
}

TEST(WorkspaceJsonTest, RequestsRoundTripAndStayStrict) {
  ApplyRequest apply{.paths = {"a", "b"}, .dry_run = true, .markers = true};
  EXPECT_EQ(*DecodeApplyRequest(Dump(ToJson(apply))), apply);
  EXPECT_EQ(*DecodeApplyRequest(""), ApplyRequest{});
  EXPECT_EQ(FieldOf(DecodeApplyRequest(R"({"conflicts":"merge"})").status()).value_or(""),
            "conflicts");
  EXPECT_EQ(FieldOf(DecodeApplyRequest(R"({"path":["a"]})").status()).value_or(""), "path");
  PullRequest pull{.paths = {"a"}, .to = "/elsewhere", .force = true};
  EXPECT_EQ(*DecodePullRequest(Dump(ToJson(pull))), pull);
  EXPECT_EQ(FieldOf(DecodePullRequest("{}").status()).value_or(""), "paths");
  EXPECT_TRUE(*DecodeUndoRequest(Dump(UndoRequestToJson(true))));
  EXPECT_FALSE(*DecodeUndoRequest(""));
  EXPECT_FALSE(DecodeUndoRequest(R"({"force":"yes"})").ok());
}

TEST(WorkspaceJsonTest, DecodeNamesMistypedFields) {
  EXPECT_EQ(FieldOf(DecodeDiff({{"files", {{{"additions", "2"}}}}}).status()).value_or(""),
            "files[0].additions");
  EXPECT_EQ(FieldOf(DecodeSyncReport({{"changed", "yes"}}).status()).value_or(""), "changed");
  EXPECT_EQ(FieldOf(DecodeApplyResult({{"artifact", 5}}).status()).value_or(""), "artifact");
  EXPECT_EQ(FieldOf(DecodeArtifactList({{"artifacts", {{{"files", -0.5}}}}}).status()).value_or(""),
            "artifacts[0].files");
  EXPECT_TRUE(DecodeUndoResult({{"id", "x"}, {"later", 1}}).ok());
}

}  // namespace
}  // namespace abox::api
