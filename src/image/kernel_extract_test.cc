#include "src/image/kernel_extract.h"

#include <elf.h>
#include <lz4.h>

#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "src/image/test_util.h"

namespace abox::image {
namespace {

constexpr size_t kBlock = size_t{8} << 20;

void PutLe32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

// Compresses `data` into an LZ4 legacy frame the way `lz4 -l` does (8 MiB blocks).
std::string Lz4Legacy(const std::string& data) {
  std::string out("\x02\x21\x4c\x18", 4);
  for (size_t pos = 0; pos < data.size(); pos += kBlock) {
    size_t n = std::min(kBlock, data.size() - pos);
    std::string block(static_cast<size_t>(LZ4_compressBound(static_cast<int>(n))), '\0');
    int c = LZ4_compress_default(data.data() + pos, block.data(), static_cast<int>(n),
                                 static_cast<int>(block.size()));
    EXPECT_GT(c, 0);
    PutLe32(&out, static_cast<uint32_t>(c));
    out.append(block.data(), static_cast<size_t>(c));
  }
  return out;
}

// Half compressible text, half random bytes.
std::string TestData(size_t size) {
  std::mt19937 rng(42);
  std::string s;
  s.reserve(size);
  while (s.size() < size) {
    if ((s.size() / 4096) % 2 == 0) {
      s += "abox kernel payload ";
    } else {
      s.push_back(static_cast<char>(rng()));
    }
  }
  s.resize(size);
  return s;
}

// A minimal x86-64 ELF executable with one PT_NOTE segment holding (owner, type).
std::string FakeElf(const std::string& owner, uint32_t note_type) {
  std::string note;
  Elf64_Nhdr nh{static_cast<Elf64_Word>(owner.size() + 1), 4, note_type};
  note.append(reinterpret_cast<const char*>(&nh), sizeof(nh));
  note.append(owner);
  note.push_back('\0');
  note.resize((note.size() + 3) & ~size_t{3}, '\0');
  note.append("\x00\x10\x00\x01", 4);                              // entry point descriptor
  return testing::TestElf(PT_NOTE, note, std::string(5000, 'k'));  // + "kernel text"
}

// A bzImage shell (boot protocol 2.15, one setup sector) around `payload`.
std::string FakeBzImage(const std::string& payload) {
  std::string bz(size_t{2} * 512, '\0');
  bz[0x1f1] = 1;  // setup_sects
  std::memcpy(&bz[0x202], "HdrS", 4);
  bz[0x206] = 0x0f;
  bz[0x207] = 0x02;
  const uint32_t offset = 100, length = static_cast<uint32_t>(payload.size());
  std::memcpy(&bz[0x248], &offset, 4);
  std::memcpy(&bz[0x24c], &length, 4);
  bz += std::string(offset, 'x') + payload + std::string(64, 'z');
  return bz;
}

TEST(Lz4LegacyTest, DecodesSingleAndMultiBlockFrames) {
  for (size_t size : {size_t{1}, size_t{100000}, kBlock, kBlock + kBlock / 2}) {
    std::string data = TestData(size);
    auto out = DecodeLz4Legacy(Lz4Legacy(data));
    ASSERT_TRUE(out.ok()) << size << ": " << out.status();
    EXPECT_EQ(*out, data) << size;
  }
}

TEST(Lz4LegacyTest, AcceptsKernelSizeTrailerOnlyWhenItMatches) {
  std::string data = TestData(300000);
  std::string frame = Lz4Legacy(data);
  std::string good = frame, bad = frame;
  PutLe32(&good, static_cast<uint32_t>(data.size()));
  PutLe32(&bad, static_cast<uint32_t>(data.size() + 1));
  auto out = DecodeLz4Legacy(good);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, data);
  EXPECT_EQ(DecodeLz4Legacy(bad).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Lz4LegacyTest, SkipsConcatenatedStreamMagic) {
  std::string a = TestData(1000), b = TestData(2000);
  auto out = DecodeLz4Legacy(Lz4Legacy(a) + Lz4Legacy(b));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, a + b);
}

TEST(Lz4LegacyTest, RejectsTruncatedInput) {
  std::string frame = Lz4Legacy(TestData(200000));
  for (size_t cut : {size_t{1}, size_t{2}, size_t{100}, frame.size() - 9}) {
    auto out = DecodeLz4Legacy(frame.substr(0, frame.size() - cut));
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << "cut " << cut;
  }
  EXPECT_EQ(DecodeLz4Legacy(frame.substr(0, 4)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeLz4Legacy(frame.substr(0, 6)).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Lz4LegacyTest, RejectsCorruptInput) {
  EXPECT_FALSE(DecodeLz4Legacy("").ok());
  EXPECT_FALSE(DecodeLz4Legacy(std::string("\x04\x22\x4d\x18rest", 8)).ok());  // LZ4 frame magic
  // A block whose token promises 15+ literals that are not there.
  std::string bad("\x02\x21\x4c\x18", 4);
  PutLe32(&bad, 2);
  bad += "\xf0\xff";
  EXPECT_EQ(DecodeLz4Legacy(bad).status().code(), absl::StatusCode::kDataLoss);
  // A match offset pointing before the start of the output.
  std::string frame = Lz4Legacy(std::string(50000, 'a'));
  // Block bytes: token, literal 'a', then the 16-bit offset of the first match (1).
  frame[10] = '\x7f';
  frame[11] = '\x7f';
  EXPECT_EQ(DecodeLz4Legacy(frame).status().code(), absl::StatusCode::kDataLoss);
  // A block size larger than any legal block.
  std::string huge("\x02\x21\x4c\x18", 4);
  PutLe32(&huge, 0x7fffffff);
  huge += "xxxx";
  EXPECT_EQ(DecodeLz4Legacy(huge).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Lz4LegacyTest, EnforcesOutputLimit) {
  std::string frame = Lz4Legacy(std::string(1 << 20, 'a'));
  EXPECT_EQ(DecodeLz4Legacy(frame, 1000).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(DecodeLz4Legacy(frame, 1 << 20).ok());
}

TEST(KernelExtractTest, ExtractsPvhElfFromBzImage) {
  std::string elf = FakeElf("Xen", 18);
  std::string payload = Lz4Legacy(elf);
  PutLe32(&payload, static_cast<uint32_t>(elf.size()));
  auto out = ExtractVmlinux(FakeBzImage(payload));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, elf);
}

TEST(KernelExtractTest, RejectsKernelWithoutPvhNote) {
  auto no_pvh = ExtractVmlinux(FakeBzImage(Lz4Legacy(FakeElf("Xen", 17))));
  EXPECT_EQ(no_pvh.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_pvh.status().message().find("PVH"), std::string::npos);
  EXPECT_FALSE(CheckPvhElf(FakeElf("Linux", 18)).ok());
  EXPECT_FALSE(CheckPvhElf("\x7f"
                           "ELF but too short")
                   .ok());
  EXPECT_FALSE(CheckPvhElf(TestData(4096)).ok());
}

TEST(KernelExtractTest, RejectsNonLz4AndNonBzImage) {
  auto gz = ExtractVmlinux(FakeBzImage(std::string("\x1f\x8b\x08\x00 gzip payload", 17)));
  EXPECT_EQ(gz.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(gz.status().message().find("1f 8b"), std::string::npos) << gz.status();
  EXPECT_EQ(ExtractVmlinux(FakeElf("Xen", 18)).status().code(), absl::StatusCode::kInvalidArgument);
  std::string bz = FakeBzImage("short");
  uint32_t too_long = 1 << 30;
  std::memcpy(&bz[0x24c], &too_long, 4);
  EXPECT_EQ(BzImagePayload(bz).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace abox::image
