// The command-line entry point. Torch-free: the measurement engine is reached
// through probes/engine.h, which exposes plain C++ types only.
#pragma once

#include <functional>
#include <string>

#include "probes/engine.h"

namespace nd {

/// The measurement engine the CLI drives. The binary uses default_engine()
/// (run_check and engine_libtorch_version of src/probes); in-process tests
/// pass a fake that returns a synthetic MetricsDoc, so the CLI is tested
/// without LibTorch.
struct Engine {
  /// Measures one model (CheckOptions::model_path); throws nd::Error.
  std::function<MetricsDoc(const CheckOptions&, const ProgressFn&)> run;
  /// The LibTorch version the engine runs on ("2.13.0").
  std::function<std::string()> libtorch_version;
};

/// run_check + engine_libtorch_version (src/cli/default_engine.cpp; links nd_probes).
Engine default_engine();

/// Runs normdoctor with these arguments on `engine`; returns the process
/// exit code (0/1/2/3/4, DESIGN.md). Reports go to stdout or -o files,
/// messages and progress to stderr. Never throws.
int cli_main(int argc, char** argv, const Engine& engine);

/// cli_main on default_engine().
int cli_main(int argc, char** argv);

}  // namespace nd
