#include "cli/cli.h"

namespace nd {
int cli_main(int, char**) { return 4; }
}  // namespace nd
