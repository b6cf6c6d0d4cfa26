// The failure-mode catalog: the slugs of docs/failure-modes.md (a copy of
// ../shared/failure-modes.md), embedded.
//
// Slugs are a stable contract (failure-modes.md): every rule names one, and
// every finding carries it. A unit test checks this list against the catalog
// file so the two cannot drift.
#pragma once

#include <string>
#include <vector>

namespace nd {

/// Every failure-mode slug, in the catalog's order.
const std::vector<std::string>& failure_mode_slugs();

/// True when `slug` is in failure_mode_slugs().
bool is_failure_mode(const std::string& slug);

}  // namespace nd
