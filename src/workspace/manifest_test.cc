#include "src/workspace/manifest.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/workspace/sha256.h"

namespace abox::workspace {
namespace {

using ::testing::HasSubstr;

Entry File(absl::string_view content, uint32_t mode = 0644) {
  Entry e;
  e.type = EntryType::kFile;
  e.mode = mode;
  e.size = content.size();
  e.mtime_ns = 1'700'000'000'123'456'789;
  e.sha256 = Sha256Hex(content);
  return e;
}

Entry Dir(uint32_t mode = 0755) {
  Entry e;
  e.type = EntryType::kDir;
  e.mode = mode;
  e.mtime_ns = -5;  // before 1970: still an integer the format carries
  return e;
}

Entry Link(std::string target) {
  Entry e;
  e.type = EntryType::kSymlink;
  e.mode = 0;
  e.link_target = std::move(target);
  return e;
}

bool SameManifest(const Manifest& a, const Manifest& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || !ia->second.SameContent(ib->second) ||
        ia->second.mtime_ns != ib->second.mtime_ns) {
      return false;
    }
  }
  return true;
}

std::string Hash() { return Sha256Hex("x"); }

TEST(ManifestTest, RoundTripsEveryEntryTypeExactly) {
  Manifest m;
  m["a.txt"] = File("hello");
  m["bin/run"] = File("#!/bin/sh\n", 0755);
  m["bin"] = Dir();
  m["empty"] = File("");
  m["link"] = Link("../outside/target");
  m["caf\xc3\xa9/\xe2\x9c\x93.md"] = File("utf8");              // valid UTF-8: stays text
  m[std::string("latin1-\xe9\xff.txt")] = File("bytes", 0600);  // not UTF-8: p64
  m["badlink"] = Link(std::string("\xff\xfe-target"));          // not UTF-8: l64
  m["quote\"and\\backslash"] = File("q");
  std::string text = SerializeManifest(m);
  EXPECT_THAT(text, HasSubstr("\"p64\""));
  EXPECT_THAT(text, HasSubstr("\"l64\""));
  EXPECT_THAT(text, HasSubstr("caf\xc3\xa9"));
  absl::StatusOr<Manifest> back = ParseManifest(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameManifest(m, *back));
  EXPECT_EQ(SerializeManifest(*back), text);
}

TEST(ManifestTest, SerializesOneSortedLinePerEntry) {
  Manifest m;
  m["b"] = Dir(0700);
  m["a"] = File("x");
  EXPECT_EQ(
      SerializeManifest(m),
      absl::StrCat("{\"h\":\"", Hash(),
                   "\",\"m\":420,\"mt\":1700000000123456789,\"p\":\"a\",\"s\":1,\"t\":\"f\"}\n"
                   "{\"m\":448,\"mt\":-5,\"p\":\"b\",\"s\":0,\"t\":\"d\"}\n"));
}

TEST(ManifestTest, EmptyInputIsAnEmptyManifest) {
  absl::StatusOr<Manifest> m = ParseManifest("");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->empty());
}

struct BadCase {
  const char* name;
  std::string line;
  const char* why;
};

TEST(ManifestTest, RefusesEachKindOfBadLineNamingTheLine) {
  const std::string h = Hash();
  const std::string ok_file =
      "{\"p\":\"a\",\"t\":\"f\",\"m\":420,\"s\":1,\"mt\":0,\"h\":\"" + h + "\"}";
  ASSERT_TRUE(ParseManifest(ok_file + "\n").ok());
  const BadCase cases[] = {
      {"not json", "{", "not valid JSON"},
      {"not an object", "[1]", "not a JSON object"},
      {"unknown field", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0,\"x\":1}",
       "unknown field"},
      {"missing path", "{\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "missing \"p\""},
      {"path not string", "{\"p\":1,\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "not a string"},
      {"both p and p64", "{\"p\":\"a\",\"p64\":\"YQ==\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}",
       "both"},
      {"bad base64", "{\"p64\":\"!!\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "not base64"},
      {"absolute", "{\"p\":\"/etc\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "absolute"},
      {"dotdot", "{\"p\":\"a/../../x\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "'..'"},
      {"nul in path", "{\"p\":\"a\\u0000b\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0}", "control"},
      {"bad type", "{\"p\":\"a\",\"t\":\"c\",\"m\":0,\"s\":0,\"mt\":0}", "\"t\""},
      {"missing type", "{\"p\":\"a\",\"m\":0,\"s\":0,\"mt\":0}", "\"t\""},
      {"mode too big", "{\"p\":\"a\",\"t\":\"d\",\"m\":4096,\"s\":0,\"mt\":0}", "above 07777"},
      {"negative mode", "{\"p\":\"a\",\"t\":\"d\",\"m\":-1,\"s\":0,\"mt\":0}", "non-negative"},
      {"float size", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":1.5,\"mt\":0}", "non-negative"},
      {"string mtime", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":\"0\"}", "\"mt\""},
      {"huge mtime", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":18446744073709551615}",
       "out of range"},
      {"missing mtime", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":0}", "\"mt\""},
      {"size on dir", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":3,\"mt\":0}", "a size on"},
      {"file without hash", "{\"p\":\"a\",\"t\":\"f\",\"m\":0,\"s\":0,\"mt\":0}", "needs \"h\""},
      {"uppercase hash",
       "{\"p\":\"a\",\"t\":\"f\",\"m\":0,\"s\":0,\"mt\":0,\"h\":\"" + std::string(64, 'A') + "\"}",
       "needs \"h\""},
      {"short hash", "{\"p\":\"a\",\"t\":\"f\",\"m\":0,\"s\":0,\"mt\":0,\"h\":\"abc\"}",
       "needs \"h\""},
      {"hash on dir", "{\"p\":\"a\",\"t\":\"d\",\"m\":0,\"s\":0,\"mt\":0,\"h\":\"" + h + "\"}",
       "\"h\" on"},
      {"link on file", ok_file.substr(0, ok_file.size() - 1) + ",\"l\":\"x\"}", "link target on"},
      {"symlink without target", "{\"p\":\"a\",\"t\":\"l\",\"m\":0,\"s\":0,\"mt\":0}", "non-empty"},
      {"empty target", "{\"p\":\"a\",\"t\":\"l\",\"m\":0,\"s\":0,\"mt\":0,\"l\":\"\"}",
       "non-empty"},
      {"nul in target", "{\"p\":\"a\",\"t\":\"l\",\"m\":0,\"s\":0,\"mt\":0,\"l\":\"a\\u0000\"}",
       "NUL"},
      {"long target",
       "{\"p\":\"a\",\"t\":\"l\",\"m\":0,\"s\":0,\"mt\":0,\"l\":\"" + std::string(4097, 'x') +
           "\"}",
       "longer than 4096"},
  };
  for (const BadCase& c : cases) {
    // The bad line is line 2: the error must say so.
    absl::StatusOr<Manifest> m = ParseManifest(ok_file + "\n" + c.line + "\n");
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(m.status().message(), HasSubstr("manifest line 2: ")) << c.name;
    EXPECT_THAT(m.status().message(), HasSubstr(c.why)) << c.name << ": " << m.status();
  }
}

TEST(ManifestTest, RefusesDuplicatesAndEmptyLines) {
  std::string line = "{\"p\":\"d\",\"t\":\"d\",\"m\":493,\"s\":0,\"mt\":0}\n";
  absl::StatusOr<Manifest> dup = ParseManifest(line + line);
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("line 2: duplicate path 'd'"));
  absl::StatusOr<Manifest> empty = ParseManifest(line + "\n" + line);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("line 2: empty line"));
}

TEST(ManifestTest, EnforcesEntryAndByteLimits) {
  Manifest m;
  for (int i = 0; i < 10; ++i) {
    m[absl::StrCat("f", i)] = File("x");
  }
  std::string text = SerializeManifest(m);
  absl::StatusOr<Manifest> few = ParseManifest(text, {.max_entries = 9});
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(few.status().message(), HasSubstr("line 10"));
  absl::StatusOr<Manifest> small = ParseManifest(text, {.max_bytes = text.size() - 1});
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ParseManifest(text, {.max_entries = 10, .max_bytes = text.size()}).ok());
}

TEST(ManifestTest, RefusesAnOverlongLine) {
  std::string line = "{\"p\":\"" + std::string(70'000, 'a') + "\"}";
  absl::StatusOr<Manifest> m = ParseManifest(line);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("line 1: longer than"));
}

TEST(ManifestTest, CompareManifestsListsAddedModifiedDeleted) {
  Manifest base;
  base["same"] = File("1");
  base["changed"] = File("1");
  base["gone"] = File("1");
  Manifest current = base;
  current.erase("gone");
  current["changed"] = File("2");
  current["new"] = Dir();
  current["same"].mtime_ns += 10;  // mtime alone is no change
  ManifestChanges c = CompareManifests(base, current);
  EXPECT_THAT(c.added, ::testing::ElementsAre("new"));
  EXPECT_THAT(c.modified, ::testing::ElementsAre("changed"));
  EXPECT_THAT(c.deleted, ::testing::ElementsAre("gone"));
}

}  // namespace
}  // namespace abox::workspace
