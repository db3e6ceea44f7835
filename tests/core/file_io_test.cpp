// write_file_atomically: whole or not at all. The mechanics under a full disk and
// signals are exercised through the GGUF writer (tests/formats/gguf_writer_test.cpp),
// which writes through it; here, the contract every caller relies on.
#include "switchyard/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace switchyard {
namespace {

namespace fs = std::filesystem;

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("switchyard_file_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  fs::path dir_;
};

TEST_F(FileIoTest, WritesAndReplacesARegularFile) {
  const fs::path p = dir_ / "page.html";
  ASSERT_TRUE(write_file_atomically(p.string(), "first", "the page").is_ok());
  EXPECT_EQ(read(p), "first");
  ASSERT_TRUE(write_file_atomically(p.string(), "second, longer", "the page").is_ok());
  EXPECT_EQ(read(p), "second, longer");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::others_read, fs::perms::others_read);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(FileIoTest, AFailingProducerLeavesTheOldFileAndNoTemporary) {
  const fs::path p = dir_ / "ledger.json";
  ASSERT_TRUE(write_file_atomically(p.string(), "old", "the ledger").is_ok());
  const Status failed = write_file_atomically(p.string(), [](const ByteSink& sink) {
    Status st = sink(std::as_bytes(std::span(std::string_view("half"))));
    if (!st.is_ok()) return st;
    return data_loss_error("the source ran dry");
  });
  EXPECT_EQ(failed.code(), StatusCode::kDataLoss);
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(FileIoTest, RefusesWhatIsNotARegularFileAndNamesWhatItWrites) {
  fs::create_directory(dir_ / "sub");
  const Status dir = write_file_atomically((dir_ / "sub").string(), "x", "the profile");
  EXPECT_EQ(dir.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dir.message().find("writing the profile"), std::string_view::npos) << dir.message();
  EXPECT_NE(dir.message().find("a directory"), std::string_view::npos) << dir.message();
  EXPECT_TRUE(fs::is_directory(dir_ / "sub"));
  const Status missing = write_file_atomically((dir_ / "no" / "f").string(), "x", "the page");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.to_string();
  EXPECT_EQ(entries(), 1u);
}

// A file written a piece at a time appears only when committed; abandoned (or
// destroyed), it leaves the old file; after either, writing is refused.
TEST_F(FileIoTest, APieceAtATimeAppearsOnlyOnCommit) {
  const fs::path p = dir_ / "logits.npy";
  ASSERT_TRUE(write_file_atomically(p.string(), "old", "the logits").is_ok());
  auto bytes = [](std::string_view s) { return std::as_bytes(std::span(s)); };
  {
    Result<AtomicFileWriter> out = AtomicFileWriter::create(p.string());
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    ASSERT_TRUE(out->write(bytes("never ")).is_ok());
    EXPECT_EQ(read(p), "old");
    EXPECT_EQ(entries(), 2u);  // the old file and the temporary
  }
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(entries(), 1u);

  Result<AtomicFileWriter> out = AtomicFileWriter::create(p.string());
  ASSERT_TRUE(out.is_ok());
  ASSERT_TRUE(out->write(bytes("new, ")).is_ok());
  ASSERT_TRUE(out->write(bytes("whole")).is_ok());
  ASSERT_TRUE(out->commit().is_ok());
  EXPECT_EQ(read(p), "new, whole");
  EXPECT_EQ(out->write(bytes("x")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(out->commit().code(), StatusCode::kFailedPrecondition);

  Result<AtomicFileWriter> dropped = AtomicFileWriter::create(p.string());
  ASSERT_TRUE(dropped.is_ok());
  ASSERT_TRUE(dropped->write(bytes("dropped")).is_ok());
  dropped->abandon();
  EXPECT_EQ(dropped->commit().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(read(p), "new, whole");
  EXPECT_EQ(entries(), 1u);
}

// Nothing at the path is opened: a FIFO there is refused at once, not waited on.
TEST_F(FileIoTest, AFifoIsRefusedWithoutOpeningIt) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<AtomicFileWriter> out = AtomicFileWriter::create(fifo.string());
  ASSERT_FALSE(out.is_ok());
  EXPECT_NE(out.status().message().find("a FIFO"), std::string_view::npos);
  EXPECT_TRUE(fs::is_fifo(fifo));
}

}  // namespace
}  // namespace switchyard
