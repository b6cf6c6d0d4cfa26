// libFuzzer target: the rule-case parser (src/rules load_rule_cases) on a
// whole BN002.cases.toml, then every case it loads run through the generic
// runner against the shipped BN002 rule, as `normdoctor rules --test` does.
// Any input must give cases or nd::Error (kind rule_file).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_file.h"
#include "rules/rule_cases.h"
#include "rules/rules.h"

#ifndef ND_RULES_DIR
#error "ND_RULES_DIR (the shipped rules folder) must be defined by the build"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<nd::Rule> rules = nd::load_rules(ND_RULES_DIR);
  static const nd::Rule* bn002 = nd::find_rule(rules, "BN002");
  const std::string path = ndfuzz::write_scratch(data, size, "BN002.cases.toml");
  try {
    const nd::RuleCaseFile f = nd::load_rule_cases(path);
    if (bn002)
      for (const auto& c : f.cases) (void)nd::run_rule_case(*bn002, c);
  } catch (const nd::Error&) {
  }
  return 0;
}
