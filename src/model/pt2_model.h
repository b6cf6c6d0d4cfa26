// torch.export `.pt2` archives as a runnable model. The ExportedProgram's
// graph (one aten op per node) is translated into a TorchScript graph: one
// node per op, its overload found by schema in the operator registry, so the
// interpreter runs each as a boxed dispatcher call that autograd records.
// Parameters and buffers (graph signature: inputs_to_parameters,
// inputs_to_buffers) become attributes of a torch::jit::Module built with a
// child module for every nn_module_stack path, so named_modules() gives the
// paths users see; every node carries its module chain (kModuleScopeAttr) for
// the instrumenter. Mutated buffers (buffers_to_mutate: BatchNorm running
// statistics in decomposed graphs) are written back in place, like
// TorchScript's in-place updates. The rest of normdoctor (taps, probes, pass
// cache, reports) sees an ordinary LoadedModel of kind "exported".
#pragma once

#include <string>

#include "model/model.h"

namespace nd {

/// True when `path` is a zip archive laid out as a torch.export `.pt2`
/// (an archive_format record at its root), whatever its extension. False
/// for anything else, unreadable files included (load_model reports those).
bool is_pt2_file(const std::string& path);

/// Loads a `.pt2` archive (src/formats/pt2_archive.h) and builds the module.
/// Throws nd::Error naming the file: model_load (corrupt archive, unknown
/// schema major version, AOTInductor-only package, unsupported graph
/// constructs such as dynamic shapes, higher-order ops or script objects,
/// LibTorch older than 2.0), missing_operator (an op this LibTorch lacks).
LoadedModel load_pt2_model(const std::string& path);

}  // namespace nd
