// Error type shared by every layer of normdoctor.
//
// One exception type carries a stable error kind (searchable by users, asserted
// by tests) and the process exit code it maps to (see DESIGN.md, "Contract with
// users"). Everything a user can cause throws nd::Error; anything else that
// escapes to the CLI is a bug and exits 4.
#pragma once

#include <stdexcept>
#include <string>

namespace nd {

/// Process exit codes (stable contract, documented in README and man page).
enum class ExitCode : int {
  kOk = 0,        ///< nothing at or above --fail-on
  kFindings = 1,  ///< findings at or above --fail-on
  kUsage = 2,     ///< usage or configuration error
  kLoad = 3,      ///< model or inputs could not be loaded or run
  kInternal = 4,  ///< a bug in normdoctor
};

/// Stable error kinds, written to the JSON report's `error.kind`.
namespace error_kind {
inline constexpr const char* kUsage = "usage";                ///< bad flag or flag value
inline constexpr const char* kConfig = "config";              ///< normdoctor.toml problem
inline constexpr const char* kRuleFile = "rule_file";         ///< a rules/*.toml problem
inline constexpr const char* kOutput = "output";              ///< -o path not writable
inline constexpr const char* kModelLoad = "model_load";       ///< model file unusable
inline constexpr const char* kInputLoad = "input_load";       ///< batch file unusable
inline constexpr const char* kWeightsLoad = "weights_load";   ///< --weights / --optimizer-state file unusable or not matching the model
inline constexpr const char* kInputMismatch = "input_mismatch";  ///< forward rejects inputs
inline constexpr const char* kInputInference = "input_inference";  ///< no inputs given, none inferable
inline constexpr const char* kMissingOperator = "missing_operator";  ///< op absent in this LibTorch
inline constexpr const char* kModelRun = "model_run";         ///< forward/backward raised
inline constexpr const char* kTimeout = "timeout";            ///< --timeout exceeded
inline constexpr const char* kOutOfMemory = "out_of_memory";  ///< allocation failed in a pass
inline constexpr const char* kInternal = "internal";          ///< a bug in normdoctor
}  // namespace error_kind

/// A failure the user can act on: carries a stable kind and an exit code.
/// The message names the file, layer or argument and what was expected.
class Error : public std::runtime_error {
 public:
  Error(std::string kind, ExitCode code, const std::string& message)
      : std::runtime_error(message), kind_(std::move(kind)), code_(code) {}

  const std::string& kind() const noexcept { return kind_; }
  ExitCode exit_code() const noexcept { return code_; }

 private:
  std::string kind_;
  ExitCode code_;
};

/// Shorthands for the common cases.
inline Error usage_error(const std::string& msg) {
  return Error(error_kind::kUsage, ExitCode::kUsage, msg);
}
inline Error load_error(const char* kind, const std::string& msg) {
  return Error(kind, ExitCode::kLoad, msg);
}

}  // namespace nd
