// "Did you mean ...?" for unknown names (rule-file keys, slugs, rule ids),
// in the manner of ninja's SpellcheckString.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nd {

/// Levenshtein distance (insertions, deletions, substitutions each cost 1).
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate closest to `word` when it is close enough to be a likely
/// typo (distance <= max(2, word.size() / 3); a candidate that starts with
/// `word`, 3+ characters, counts as distance 1); "" otherwise. Ties go to the
/// earlier candidate.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

/// "; did you mean 'x'?" when closest_name() finds one, else "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace nd
