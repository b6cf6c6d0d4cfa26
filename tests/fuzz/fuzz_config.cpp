// libFuzzer target: the config parser (src/config load_config) on a whole
// normdoctor.toml, validated against the shipped rules, then applied to them
// and rendered as the report's "config" object. Any input must give a config
// or nd::Error (kind config).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "fuzz_file.h"
#include "rules/rules.h"

#ifndef ND_RULES_DIR
#error "ND_RULES_DIR (the shipped rules folder) must be defined by the build"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<nd::Rule> rules = nd::load_rules(ND_RULES_DIR);
  const std::string path = ndfuzz::write_scratch(data, size, "normdoctor.toml");
  try {
    const nd::Config cfg = nd::load_config(path, rules);
    const std::vector<nd::Rule> applied = nd::apply_config(rules, cfg);
    (void)nd::config_json(cfg, applied, rules, cfg.severity.value_or("info"), cfg.fail_on.value_or("error"));
  } catch (const nd::Error&) {
  }
  return 0;
}
