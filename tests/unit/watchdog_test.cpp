// The hard --timeout's watchdog (src/cli/watchdog.h): it fires once at the
// deadline with the last stage and ends the process with its exit code, and
// never fires after disarm(). Death tests: the firing one runs in a child.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/watchdog.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_watchdog_test {

namespace {

using Clock = std::chrono::steady_clock;

void fire_and_block() {
  nd::Watchdog w(0.05, Clock::now(), 3, [](const std::string& probe, const std::string& pass, double el) {
    std::fprintf(stderr, "fired in %s/%s after %.2f s\n", probe.c_str(), pass.c_str(), el);
  });
  w.set_stage("forward_backward", "train");
  // A pass that never ends: only the watchdog can end the process.
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TEST(WatchdogDeathTest, FiresWithTheStageAndExitsWithItsCode) {
  EXPECT_EXIT(fire_and_block(), ::testing::ExitedWithCode(3), "fired in forward_backward/train after");
}

TEST(WatchdogDeathTest, DisarmAfterFiringNeverReturns) {
  // The main thread reaching disarm() while the watchdog writes its reports
  // must wait for the process to end, never write its own.
  EXPECT_EXIT(
      {
        nd::Watchdog w(0.01, Clock::now(), 3, [](const std::string&, const std::string&, double) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // "writing"
          std::fprintf(stderr, "watchdog wrote\n");
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        w.disarm();
        std::fprintf(stderr, "main wrote\n");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(3), "^watchdog wrote\n$");
}

TEST(Watchdog, DisarmedNeverFires) {
  std::atomic<int> fired{0};
  {
    nd::Watchdog w(0.2, Clock::now(), 3, [&](const std::string&, const std::string&, double) { ++fired; });
    w.disarm();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_EQ(fired.load(), 0);
}

TEST(Watchdog, NoTimeoutStartsNothing) {
  std::atomic<int> fired{0};
  nd::Watchdog w(0, Clock::now(), 3, [&](const std::string&, const std::string&, double) { ++fired; });
  nd::Watchdog n(-1, Clock::now(), 3, [&](const std::string&, const std::string&, double) { ++fired; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace

}  // namespace nd_test_watchdog_test
