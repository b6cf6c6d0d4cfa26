// The real engine for the binary and the torch tests. Kept out of cli.cpp so
// that torch-free tests can link the CLI with a fake engine.
#include "cli/cli.h"

namespace nd {

Engine default_engine() {
  Engine e;
  e.run = [](const CheckOptions& o, const ProgressFn& p) { return run_check(o, p); };
  e.libtorch_version = [] { return engine_libtorch_version(); };
  return e;
}

int cli_main(int argc, char** argv) { return cli_main(argc, argv, default_engine()); }

}  // namespace nd
