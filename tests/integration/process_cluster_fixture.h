// ProcessClusterFixture: a gtest fixture owning a ProcessCluster in a fresh
// temporary folder named after the test (removed again at the end), for
// tests that start and kill real controller and worker processes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "process_cluster.h"

namespace hmpmd::testing {

class ProcessClusterFixture : public ::testing::Test {
 protected:
  // `prefix` names the folder: PREFIX-PID-TESTNAME under the temp directory.
  explicit ProcessClusterFixture(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + "-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    cluster_ = std::make_unique<ProcessCluster>(dir_.string());
  }
  // A failed test keeps its folder (the processes' logs, the exec log and
  // the store) for whoever reads why; the path is printed.
  void TearDown() override {
    cluster_.reset();
    if (::testing::Test::HasFailure()) {
      std::fprintf(stderr, "logs kept in %s\n", dir_.c_str());
      return;
    }
    std::filesystem::remove_all(dir_);
  }

  // Waits (at most 30 s) until the job has at least `done` finished runs.
  void WaitDone(uint32_t job, uint64_t done) {
    for (int i = 0; i < 3000; ++i) {
      auto j = cluster_->Get("/api/v1/jobs/" + std::to_string(job));
      if (j.is_object() && j.value("done", uint64_t{0}) >= done) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "job " << job << " never reached " << done << " done runs";
  }

  // A file of the test's folder: its path, and what it holds ("" when none).
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Slurp(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path dir_;
  std::unique_ptr<ProcessCluster> cluster_;

 private:
  std::string prefix_;
};

}  // namespace hmpmd::testing
