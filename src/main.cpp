#include "cli/cli.h"

int main(int argc, char** argv) { return nd::cli_main(argc, argv); }
