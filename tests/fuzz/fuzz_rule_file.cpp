// libFuzzer target: the rule-file parser (src/rules load_rule_file) on a
// whole TOML file, then the loaded rule used as the tool uses it: its message
// template rendered, and evaluated on an empty metrics document. Any input
// must give a rule or nd::Error (kind rule_file).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_file.h"
#include "metrics/metrics.h"
#include "rules/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ndfuzz::write_scratch(data, size, "FUZZ001.toml");
  try {
    const nd::Rule r = nd::load_rule_file(path);
    (void)nd::message_placeholders(r.message);
    (void)nd::render_template(r.message, [](const std::string& key) { return "<" + key + ">"; });
    nd::MetricsDoc doc;
    (void)nd::evaluate_rules({r}, doc);
  } catch (const nd::Error&) {
  }
  return 0;
}
