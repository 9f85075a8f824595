#include "src/workspace/object_store.h"

#include <sys/stat.h>

#include "gtest/gtest.h"
#include "src/workspace/apply_test_util.h"
#include "src/workspace/sha256.h"
#include "src/workspace/testing/scratch_tree.h"

namespace abox::workspace {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

ObjectStore OpenStore(const TempDir& dir) {
  auto store = ObjectStore::Open(dir / "store");
  EXPECT_TRUE(store.ok()) << store.status();
  return std::move(*store);
}

TEST(ObjectStoreTest, PutDataStoresReadOnlyObjectByHash) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  auto sha = store.PutData("hello\n");
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, Sha256Hex("hello\n"));
  EXPECT_TRUE(store.Has(*sha));
  EXPECT_EQ(store.PathOf(*sha), dir / "store/objects/" + sha->substr(0, 2) + "/" + *sha);
  struct stat st {};
  ASSERT_EQ(::stat(store.PathOf(*sha).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  auto data = store.Read(*sha, 100);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "hello\n");
  // Same content again: same digest, still one object.
  EXPECT_EQ(*store.PutData("hello\n"), *sha);
}

TEST(ObjectStoreTest, PutFileHashesWhileCopying) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  testing::Put(dir / "f", std::string(200000, 'x'));
  auto sha = store.PutFile(dir / "f");
  ASSERT_TRUE(sha.ok());
  EXPECT_EQ(*sha, Sha256Hex(std::string(200000, 'x')));
}

TEST(ObjectStoreTest, PutFileRefusesSymlink) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  testing::Put(dir / "f", "x");
  ASSERT_EQ(::symlink((dir / "f").c_str(), (dir / "l").c_str()), 0);
  EXPECT_FALSE(store.PutFile(dir / "l").ok());
}

ObjectStore::Reader StringReader(std::string data) {
  auto offset = std::make_shared<size_t>(0);
  return [data = std::move(data), offset](char* buf, size_t len) -> absl::StatusOr<size_t> {
    size_t n = std::min(len, data.size() - *offset);
    std::copy_n(data.data() + *offset, n, buf);
    *offset += n;
    return n;
  };
}

TEST(ObjectStoreTest, PutVerifiedStoresMatchingContent) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  std::string sha = Sha256Hex("guest bytes");
  ASSERT_TRUE(store.PutVerified(sha, StringReader("guest bytes")).ok());
  EXPECT_TRUE(store.Has(sha));
}

TEST(ObjectStoreTest, PutVerifiedRejectsMismatchAndStoresNothing) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  std::string promised = Sha256Hex("what the manifest said");
  absl::Status s = store.PutVerified(promised, StringReader("something else"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_FALSE(store.Has(promised));
  EXPECT_FALSE(store.Has(Sha256Hex("something else")));
  EXPECT_TRUE(fs::is_empty(dir / "store/tmp"));
}

TEST(ObjectStoreTest, PutStreamStoresWhatTheReaderYieldsAndNothingWhenItFails) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  uint64_t size = 0;
  auto sha = store.PutStream(StringReader("streamed"), &size);
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(*sha, Sha256Hex("streamed"));
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(*store.Read(*sha, 100), "streamed");

  // A reader that gives up half way (a content check refusing the bytes): nothing stored.
  bool first = true;
  auto refused = store.PutStream([&](char* buf, size_t /*len*/) -> absl::StatusOr<size_t> {
    if (!first) {
      return absl::PermissionDeniedError("refused");
    }
    first = false;
    buf[0] = 'x';
    return size_t{1};
  });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(store.Has(Sha256Hex("x")));
  EXPECT_TRUE(fs::is_empty(dir / "store/tmp"));
}

TEST(ObjectStoreTest, PutVerifiedRejectsBadDigestAndOversize) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  EXPECT_EQ(store.PutVerified("../../etc/passwd", StringReader("x")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PutVerified(Sha256Hex("12345"), StringReader("12345"), 4).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(ObjectStoreTest, ReadErrors) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  EXPECT_EQ(store.Read(Sha256Hex("absent"), 10).status().code(), absl::StatusCode::kNotFound);
  auto sha = store.PutData("0123456789");
  EXPECT_EQ(store.Read(*sha, 5).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(store.Has("not-a-digest"));
  EXPECT_EQ(store.OpenObject("zz").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ObjectStoreTest, RetainDeletesEverythingElse) {
  TempDir dir;
  ObjectStore store = OpenStore(dir);
  std::string keep = *store.PutData("keep");
  std::string drop = *store.PutData("drop");
  ASSERT_TRUE(store.Retain({keep}).ok());
  EXPECT_TRUE(store.Has(keep));
  EXPECT_FALSE(store.Has(drop));
  ASSERT_TRUE(store.Retain({}).ok());
  EXPECT_FALSE(store.Has(keep));
}

TEST(ObjectStoreTest, OpenRejectsRelativeDir) {
  EXPECT_EQ(ObjectStore::Open("relative/dir").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::workspace

namespace abox::workspace {
namespace {

TEST(ObjectStoreBulkTest, DeferredSyncStoresTheSameObjectsAndFlushes) {
  testing::ScratchDir dir("abox-objects-bulk");
  absl::StatusOr<ObjectStore> store = ObjectStore::Open(dir.path() + "/store");
  ASSERT_TRUE(store.ok()) << store.status();
  store->set_deferred_sync(true);
  absl::StatusOr<std::string> sha = store->PutData("bulk content");
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_TRUE(store->Flush().ok());
  store->set_deferred_sync(false);
  absl::StatusOr<std::string> back = store->Read(*sha, 1024);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "bulk content");
}

}  // namespace
}  // namespace abox::workspace
