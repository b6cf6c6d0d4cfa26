#include "cli/watchdog.h"

#include <cstdlib>

namespace nd {

Watchdog::Watchdog(double seconds, std::chrono::steady_clock::time_point start, int exit_code, OnExpire on_expire)
    : start_(start), exit_code_(exit_code), on_expire_(std::move(on_expire)) {
  if (!(seconds > 0)) {
    disarmed_ = true;
    return;
  }
  deadline_ = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  disarm();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::set_stage(const std::string& probe, const std::string& pass) {
  std::lock_guard<std::mutex> lock(mu_);
  probe_ = probe;
  pass_ = pass;
}

void Watchdog::disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // blocks forever once the watchdog fired: it never unlocks
    disarmed_ = true;
  }
  cv_.notify_all();
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  if (cv_.wait_until(lock, deadline_, [this] { return disarmed_; })) return;
  // Fired: keep the lock until the process ends.
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (on_expire_) on_expire_(probe_, pass_, elapsed);
  std::_Exit(exit_code_);
}

}  // namespace nd
