// The command-line entry point. Torch-free: the measurement engine is reached
// through probes/engine.h, which exposes plain C++ types only.
#pragma once

namespace nd {

/// Runs normdoctor with these arguments; returns the process exit code
/// (0/1/2/3/4, DESIGN.md). Never throws.
int cli_main(int argc, char** argv);

}  // namespace nd
