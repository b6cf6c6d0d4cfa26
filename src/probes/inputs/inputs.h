// Loading the forward arguments (the inputs stage of the pipeline): --input batch
// files bound to forward's parameters, --input-shape synthesis, inference from
// the model file when neither is given, and the batch layout every pass that
// slices examples uses.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Which axis of each forward argument holds the examples (issue 15,
/// "slicing only what is batch-major").
struct BatchLayout {
  int64_t batch = 0;          ///< examples in the batch; 0: no tensor argument has one
  std::vector<int64_t> axis;  ///< per argument of s.args: its batch axis; -1 not batch-major (scalars, tables, None)
  std::string from;           ///< how the batch size was found, in words
  /// nn.EmbeddingBag's flat layout (fastText, torchtext's text classifier,
  /// DLRM): argument `bag_indices` holds every example's ids one after the
  /// other (1-D) and `bag_offsets` where each example starts (1-D, [B], or
  /// [B + 1] with include_last_offset), both read by aten::embedding_bag.
  /// Examples are selected by cutting and re-joining the bags
  /// (select_examples); -1 when the model has no such pair.
  int64_t bag_indices = -1;
  int64_t bag_offsets = -1;
  bool bag_last_offset = false;  ///< include_last_offset: bag_offsets has B + 1 entries
  /// Other 1-D arguments aligned with bag_indices (per_sample_weights), cut the same way.
  std::vector<int64_t> bag_aligned;
  /// Argument `i` holds bags of ids (bag_indices or one aligned with them).
  bool bag_ids(int64_t i) const {
    return i == bag_indices || std::find(bag_aligned.begin(), bag_aligned.end(), i) != bag_aligned.end();
  }
  /// A graph batch (PyTorch Geometric's layout): `graph_edges` is an integer
  /// edge list ([2, E], or [E, 2] when graph_edge_axis is 0) that forward
  /// uses as row indices into the node tensors, `graph_nodes` the node
  /// features [N, ...] it numbers, `graph_ids` PyG's `batch` (the graph of
  /// each node, integer [N], non-decreasing from 0) or -1 for one graph.
  /// The examples are the graphs (one when graph_ids is -1: its nodes are
  /// not independent examples, messages pass between them). Selected by
  /// keeping the chosen graphs' nodes, their edges (renumbered) and the
  /// arguments aligned with either; -1 when the model takes no graph.
  int64_t graph_edges = -1;
  int64_t graph_edge_axis = 1;  ///< the axis of graph_edges that runs over the edges
  int64_t graph_nodes = -1;
  int64_t graph_ids = -1;
  int64_t graph_num_nodes = 0;                ///< N: the nodes of every graph together
  at::Tensor node_graph;                      ///< long [N] on the CPU: the graph of each node
  std::vector<int64_t> graph_node_aligned;    ///< other arguments [N, ...] (positions, node masks)
  std::vector<int64_t> graph_edge_aligned;    ///< arguments [E, ...] (edge_attr, edge_weight)
  /// Argument `i` holds one row per edge (edge_attr, edge_weight).
  bool graph_per_edge(int64_t i) const {
    return std::find(graph_edge_aligned.begin(), graph_edge_aligned.end(), i) != graph_edge_aligned.end();
  }
  /// Argument `i` is part of the graph layout (cut by graph, not by axis).
  bool graph_arg(int64_t i) const {
    return graph_edges >= 0 &&
           (i == graph_edges || i == graph_nodes || i == graph_ids || graph_per_edge(i) ||
            std::find(graph_node_aligned.begin(), graph_node_aligned.end(), i) != graph_node_aligned.end());
  }
  /// The node rows of the graphs at batch positions `index` (in its order,
  /// repeats repeated): long [n] on the CPU. `positions` is the batch
  /// position of each node of the batch the rows are taken from (default:
  /// node_graph, the batch as given; graph_positions of a selection for a
  /// batch that select_examples made). Undefined without a graph layout.
  at::Tensor graph_node_rows(const at::Tensor& index, const at::Tensor& positions = at::Tensor()) const;
  /// The batch position of each node of the batch select_examples(index)
  /// makes: long [n] on the CPU. Undefined without a graph layout.
  at::Tensor graph_positions(const at::Tensor& index) const;
};

/// The batch layout of s.args. The batch size comes from --batch-dim D
/// (axis D of the first tensor that has it), else from a lengths vector
/// (integer [B] named *len*), else from a padding mask ([B, T] bool or named
/// *mask*: nn.Transformer's key padding mask stays [B, T] when the inputs
/// are [T, B, F]), else from axis 1 of a rank-3 argument (or rank-2 token
/// ids an embedding widens) that a recurrent op
/// or a scripted nn.MultiheadAttention / nn.TransformerEncoder[Layer] with
/// batch_first=False (their default) reads in axis order,
/// else from axis 0 of the first tensor. Each tensor's batch
/// axis is --batch-dim when its size there is B, else axis 0 when its size
/// is B, else its first axis of size B, else none.
BatchLayout batch_layout(const Session& s);

/// The examples `index` of every batch-major argument, along its own batch
/// axis; the other arguments unchanged. An EmbeddingBag layout's indices
/// (and the arguments aligned with them) keep the selected bags, joined in
/// the order of `index`, and its offsets are rebuilt for them.
std::vector<c10::IValue> select_examples(const Session& s, const BatchLayout& L, const at::Tensor& index);

/// The batch axis of an output tensor of the model: the main input's batch
/// axis when the output has B there, else axis 0, else its first axis of
/// size B; -1 when none has size B.
int64_t output_batch_axis(const BatchLayout& L, const at::Tensor& t);

/// Loads --input files / synthesizes --input-shape arguments into s.args and
/// fills s.doc.inputs (input metrics). Throws nd::Error.
void load_arguments(Session& s);

/// No --input and no --input-shape: makes forward's required arguments from
/// the model file (src/probes/inputs/infer_inputs.cpp, docs/inputs.md): the example
/// inputs torch.jit.trace stored (traced_inputs record), else what forward's
/// graph does with each argument, checked by running forward in eval mode.
/// Appends to s.args (source "inferred: <how>") and one sentence per input to
/// s.doc.assumptions. Throws nd::Error (input_inference, exit 2) naming the
/// argument that could not be inferred and the flags that give it.
void infer_arguments(Session& s);

}  // namespace nd
