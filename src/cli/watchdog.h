// The hard --timeout: a thread that ends the process at a deadline, because a
// forward pass inside LibTorch cannot be interrupted. Torch-free.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace nd {

/// Ends the process at a deadline unless the main thread disarms it first.
///
/// At the deadline the watchdog thread takes the lock, calls `on_expire` with
/// the stage last given to set_stage() (probe and pass names, e.g.
/// "forward_backward", "train") and the seconds elapsed, then ends the process
/// with std::_Exit(exit_code): no destructors, no stdio flush, so `on_expire`
/// must write what it writes itself (atomically, src/cli/output.h).
///
/// The main thread calls disarm() before it writes its own reports. Exactly
/// one of the two writes: disarm() after the watchdog has fired blocks until
/// the process ends, so the main thread never writes concurrently.
class Watchdog {
 public:
  using OnExpire = std::function<void(const std::string& probe, const std::string& pass, double elapsed_s)>;

  /// Starts the thread; `seconds` <= 0 starts nothing (disarmed).
  /// The deadline is `start` + `seconds`.
  Watchdog(double seconds, std::chrono::steady_clock::time_point start, int exit_code, OnExpire on_expire);
  ~Watchdog();  ///< disarms and joins
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Records what is running now (thread-safe; called from the progress callback).
  void set_stage(const std::string& probe, const std::string& pass);

  /// After this returns the watchdog never fires. Blocks forever (until the
  /// process ends) when it has already fired. Idempotent.
  void disarm();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::string probe_ = "load", pass_ = "start";
  std::chrono::steady_clock::time_point start_, deadline_;
  int exit_code_;
  OnExpire on_expire_;
  std::thread thread_;
};

}  // namespace nd
