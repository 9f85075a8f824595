#include "src/secrets/file_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/base/io.h"

namespace abox::secrets {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kValue = "ghp_s3cr3t-VALUE-0123456789";

unsigned ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class FileValueStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "/file_store_XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = fs::path(templ).lexically_normal();
    dir_ = root_ / "home" / "secrets";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<FileValueStore> OpenStore() {
    auto store = FileValueStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  fs::path root_;
  fs::path dir_;
};

TEST_F(FileValueStoreTest, DirectoryIs0700AndFile0600EvenWithAPermissiveUmask) {
  mode_t old = ::umask(0);
  auto store = OpenStore();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Put("GH_TOKEN", SecretValue(std::string(kValue))).ok());
  ::umask(old);
  EXPECT_EQ(ModeOf(dir_), 0700u);
  EXPECT_EQ(ModeOf(store->file()), 0600u);
  EXPECT_EQ(store->file(), dir_ / "values.json");
  EXPECT_EQ(store->Describe(), absl::StrCat("file ", (dir_ / "values.json").string()));
}

TEST_F(FileValueStoreTest, ATrailingSlashNamesTheSameDirectory) {
  auto store = FileValueStore::Open(dir_.string() + "/");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(ModeOf(dir_), 0700u);
  EXPECT_EQ((*store)->file(), dir_ / "values.json");
}

TEST_F(FileValueStoreTest, PutGetListRemoveRoundTrip) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  std::string binary("\0\xff\n\"{}", 6);
  ASSERT_TRUE(store->Put("B", SecretValue(std::string(binary))).ok());
  ASSERT_TRUE(store->Put("A", SecretValue(std::string(kValue))).ok());
  ASSERT_TRUE(store->Put("A", SecretValue(std::string("replaced"))).ok());

  auto reopened = OpenStore();  // another instance reads what the first wrote
  auto a = reopened->Get("A");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Reveal(), "replaced");
  auto b = reopened->Get("B");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->Reveal(), binary);
  EXPECT_THAT(*reopened->List(), ElementsAre("A", "B"));

  ASSERT_TRUE(reopened->Remove("A").ok());
  EXPECT_EQ(reopened->Get("A").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reopened->Remove("A").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(*store->List(), ElementsAre("B"));
  // Values are base64 on disk, never in clear.
  EXPECT_THAT(Slurp(store->file()), Not(HasSubstr("replaced")));
  // No temporary file is left behind.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(names, ElementsAre("values.json"));
}

TEST_F(FileValueStoreTest, EmptyStoreListsNothingAndRefusesBadNames) {
  auto store = OpenStore();
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->List()->empty());
  auto missing = store->Get("NOPE");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("abox secret set"));
  EXPECT_EQ(store->Put("bad name", SecretValue(std::string("x"))).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FileValueStoreTest, RefusesAFileOthersCanRead) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Put("A", SecretValue(std::string(kValue))).ok());
  ASSERT_EQ(::chmod(store->file().c_str(), 0640), 0);
  auto got = store->Get("A");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(got.status().message(),
              HasSubstr(absl::StrCat("chmod 600 ", store->file().string())));
  EXPECT_EQ(store->Put("B", SecretValue(std::string("x"))).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ModeOf(store->file()), 0640u);  // nothing rewritten behind the user's back
}

TEST_F(FileValueStoreTest, RefusesADirectoryOthersCanEnter) {
  ASSERT_TRUE(OpenStore());
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  auto store = FileValueStore::Open(dir_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(store.status().message(), HasSubstr(absl::StrCat("chmod 700 ", dir_.string())));
}

TEST_F(FileValueStoreTest, RefusesSymlinks) {
  auto store = OpenStore();
  fs::path elsewhere = root_ / "elsewhere.json";
  { std::ofstream(elsewhere) << R"({"version": 1, "values": {}})"; }
  ::chmod(elsewhere.c_str(), 0600);
  fs::create_symlink(elsewhere, store->file());
  auto got = store->List();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("symlink"));
  EXPECT_FALSE(store->Put("A", SecretValue(std::string(kValue))).ok());
  EXPECT_THAT(Slurp(elsewhere), Not(HasSubstr("A")));  // the link's target is untouched

  fs::path linked_dir = root_ / "linked";
  fs::create_directory_symlink(dir_, linked_dir);
  auto via_link = FileValueStore::Open(linked_dir);
  EXPECT_EQ(via_link.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(via_link.status().message(), HasSubstr("symlink"));
}

TEST_F(FileValueStoreTest, RefusesAFileOfAnotherUser) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to chown a file to another uid";
  }
  auto store = OpenStore();
  ASSERT_TRUE(store->Put("A", SecretValue(std::string(kValue))).ok());
  ASSERT_EQ(::chown(store->file().c_str(), 12345, 12345), 0);
  auto got = store->Get("A");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(got.status().message(), HasSubstr("belongs to uid 12345"));
}

TEST_F(FileValueStoreTest, DamagedFileIsReportedAndKept) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Put("KEEP_ME", SecretValue(std::string(kValue))).ok());
  std::string good = Slurp(store->file());
  std::string damaged = good.substr(0, good.size() / 2);  // a torn write
  ASSERT_TRUE(base::WriteFileAtomic(store->file().string(), damaged, 0600).ok());

  auto got = store->Get("KEEP_ME");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("damaged"));
  EXPECT_THAT(got.status().message(), HasSubstr("mv "));
  // Put and Remove refuse rather than write a file without the entry they could not read.
  EXPECT_EQ(store->Put("OTHER", SecretValue(std::string("x"))).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store->Remove("KEEP_ME").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Slurp(store->file()), damaged);
}

TEST_F(FileValueStoreTest, DamagedEntriesAreNamed) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Put("A", SecretValue(std::string(kValue))).ok());
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c : {
           Case{R"({"values": {}})", "\"version\": 1"},
           Case{R"({"version": 2, "values": {}})", "newer abox"},
           Case{R"({"version": 1})", "\"values\""},
           Case{R"({"version": 1, "values": {"A": "!!!"}})", "value of A is not base64"},
           Case{R"({"version": 1, "values": {"A": 5}})", "value of A is not base64"},
           Case{R"({"version": 1, "values": {"bad": ""}})", "invalid name \"bad\""},
       }) {
    ASSERT_TRUE(base::WriteFileAtomic(store->file().string(), c.text, 0600).ok());
    auto got = store->List();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << c.text;
    EXPECT_THAT(got.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST_F(FileValueStoreTest, ConcurrentWritersLoseNoEntry) {
  auto store = OpenStore();
  auto other = OpenStore();  // a second instance: the flock, not only the mutex, orders them
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      FileValueStore* s = t % 2 == 0 ? store.get() : other.get();
      for (int i = 0; i < 10; ++i) {
        std::string name = absl::StrCat("S_", t, "_", i);
        EXPECT_TRUE(s->Put(name, SecretValue(absl::StrCat("value-", t, "-", i))).ok());
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  auto names = store->List();
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(names->size(), 40u);
  auto one = other->Get("S_3_9");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->Reveal(), "value-3-9");
}

TEST_F(FileValueStoreTest, ErrorsNeverContainTheValue) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Put("A", SecretValue(std::string(kValue))).ok());
  std::string encoded = absl::Base64Escape(kValue);
  std::vector<absl::Status> errors;
  // Damaged around a stored value: the message must not quote the file.
  ASSERT_TRUE(base::WriteFileAtomic(store->file().string(),
                                    absl::StrCat(R"({"version": 1, "values": {"A": ")", encoded,
                                                 R"(", "B": "!)", kValue, "\"}}"),
                                    0600)
                  .ok());
  errors.push_back(store->Get("A").status());
  ASSERT_TRUE(
      base::WriteFileAtomic(store->file().string(), absl::StrCat("{\"", kValue, "\": 1"), 0600)
          .ok());
  errors.push_back(store->List().status());
  ::chmod(store->file().c_str(), 0644);
  errors.push_back(store->Get("A").status());
  for (const absl::Status& error : errors) {
    EXPECT_FALSE(error.ok());
    EXPECT_THAT(error.message(), Not(HasSubstr(kValue)));
    EXPECT_THAT(error.message(), Not(HasSubstr(encoded)));
  }
}

}  // namespace
}  // namespace abox::secrets
