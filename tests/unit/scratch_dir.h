// A fresh folder for each test (under the system's temp folder, unique per
// process, test and run), removed after it, and files written into it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace dtl::testing {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const char* suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    dir_ = std::filesystem::temp_directory_path() /
           ("dtl_" + std::string(suite) + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
            std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }


 public:  // helpers outside the fixture (free functions given the fixture) call these too
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::string p = path(name);
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
  std::string writeGz(const std::string& name, const std::string& bytes) const {
    std::string p = path(name);
    gzFile gz = gzopen(p.c_str(), "wb");
    if (!bytes.empty()) gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(gz);
    return p;
  }

 protected:
  std::filesystem::path dir_;
};

}  // namespace dtl::testing
