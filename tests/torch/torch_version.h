// LibTorch's version macros for tests that skip, with the reason, what a
// LibTorch 1.x build cannot run (files saved by PyTorch 2.x, 2.x operators).
#pragma once

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif
#ifndef TORCH_VERSION_MAJOR
#define TORCH_VERSION_MAJOR 1  // LibTorch before <torch/version.h> had the macros: the 1.x rules apply
#define TORCH_VERSION_MINOR 0
#endif
