// The sequence probe (input layout, normalized axes by role, padding and
// sequence-length comparisons) and the noise_floors step after it.
#pragma once

#include <string>
#include <vector>

#include "probes/session.h"

namespace nd {

/// Input layout, normalized axes and the sequence probes (src/probes/sequence/sequence.cpp,
/// docs/metrics.md "Sequences and axes"): infers each input's role (batch,
/// time, feature axes; padding mask or lengths), names the axes every
/// normalization reduces over by role, and for sequence inputs runs the
/// padding probe (real-position outputs with extra padding appended) and the
/// sequence-length probe (shared positions at two lengths). Never throws for
/// a model that cannot run at another length: that is recorded as evidence.
void probe_sequence(Session& s);

/// The real (not padded) positions of the session's batch, [B, T] bool
/// (batch-major whatever the inputs' layout), when the batch is padded: a
/// padding mask or lengths argument, or runs of the embedding's padding_idx
/// in the token ids (infer_layout), with at least one padded position.
/// Undefined otherwise; `from` says how the padding was found. Never throws:
/// a layout that cannot be inferred gives undefined.
at::Tensor sample_real_positions(const Session& s, std::string& from);

/// The real positions [B, length] (bool) of a second sequence of the batch,
/// of another length than the one sample_real_positions reads (an
/// encoder-decoder's decoder_attention_mask [B, 12] beside the encoder's
/// [B, 16]): its one mask argument of that length, read with the first
/// mask's convention. Undefined when the batch has no such mask, two of
/// them, or no padded position in it. Never throws.
at::Tensor real_positions_of_length(const Session& s, int64_t length, std::string& from);

/// Checks --mask-input and --seq-dim against the loaded arguments before any
/// pass runs. Throws nd::Error (usage, exit 2) when they name no argument or axis.
void check_sequence_flags(const Session& s);

/// Session::declare for the passes of probe_sequence on the session's batch
/// (before any pass runs).
void declare_sequence_passes(Session& s);

/// Noise floors of the sequence comparisons (pad.*, seqlen.*): the floor
/// measured in this run (batchdep.noise_floor) and the difference over it.
/// Runs after probe_sequence.
void apply_noise_floors(Session& s);

/// The metric names and families (a prefix ending in '.') probe `sequence`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& sequence_writes();

/// The metric names and families (a prefix ending in '.') probe `noise_floors`
/// writes, model-scope and per layer (docs/metrics.md); Session::run_probe
/// checks every run against it (probe_declared_metrics).
const std::vector<std::string>& noise_floors_writes();

}  // namespace nd
