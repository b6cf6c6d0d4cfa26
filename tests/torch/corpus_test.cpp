// The real-model corpus (corpus/, made by corpus/make_corpus.py): every model
// is checked as a user would run it, with its sample batch and with no input
// flags, and the findings are compared with its expectations file
// corpus/NAME.expect.toml:
//
//   [[expect]]        a finding that is true of the model and must appear
//                     (matched by failure_mode + layer; "" = model level);
//                     `runs = ["batch"]` or `["no-input"]` limits it to one
//                     run (default: both);
//   [[known_false]]   a finding the tool prints today that is FALSE of the
//                     model (an open bug of the tool; the test fails on it and
//                     says why it is false);
//   [[known_missed]]  a true finding the tool misses today (an open bug);
//   [[known_failure]] a run that crashes or fails today (`run`, `exit_code`,
//                     `message`): the test fails on it with that note.
//
// Anything outside `expect` and the open-bug ledger fails. The ledger
// (`known_false`, `known_failure`) lists the tool's open bugs on real code,
// each with why the finding is false: they are printed as "OPEN BUG" lines
// on every run and fail the test when ND_CORPUS_STRICT=1 (the goal: an empty
// ledger). A ledger entry that no longer reproduces fails the test too
// ("fixed: remove the entry"), so the ledger only shrinks with fixes of the
// tool, never by editing expectations.
// The compatibility build (LibTorch 1.x) skips a model whose file it cannot
// load (missing operator, newer file format), with the reason printed.
#include "torch_version.h"

#include <toml++/toml.h>

#include "e2e_util.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <cctype>
#include <functional>
#include <tuple>

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_corpus_test {

namespace {

namespace fs = std::filesystem;
using nde2e::json;

std::string corpus_dir() { return nde2e::source_dir() + "/corpus"; }

/// The model names of the corpus: every NAME.pt that is not a NAME.input.pt.
std::vector<std::string> corpus_models() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(corpus_dir(), ec)) {
    const std::string f = e.path().filename().string();
    const std::string suffix = ".pt", in_suffix = ".input.pt";
    if (f.size() <= suffix.size() || f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (f.size() > in_suffix.size() && f.compare(f.size() - in_suffix.size(), in_suffix.size(), in_suffix) == 0)
      continue;
    names.push_back(f.substr(0, f.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// One entry of an expectations file.
struct Entry {
  std::string failure_mode, rule_id, layer, why;
  std::set<std::string> runs;  ///< "batch", "no-input", "pt2" (the batch, on NAME.pt2); empty = all
  std::string severity;        ///< "info" | "warning" | "error": checked when given
  std::set<std::string> not_in;  ///< runs it cannot appear in, with the reason in `why`
  bool applies(const std::string& run) const {
    if (not_in.count(run)) return false;
    return runs.empty() || runs.count(run) > 0 || (run == "pt2" && runs.count("batch") > 0);
  }
  std::string describe() const {
    return failure_mode + (rule_id.empty() ? "" : " (" + rule_id + ")") + " at '" + layer + "'";
  }
};

struct KnownFailure {
  std::string run, message;
  int exit_code = -1;
};

/// A finding that one LibTorch major version gives and the others do not,
/// because that LibTorch computes something differently (not a fault of the
/// tool and not true of the model): `[[libtorch_difference]]` with
/// `libtorch = "1"` (the major version), failure_mode, rule_id, layer and why.
/// Accepted (and printed) on that version only.
struct LibTorchDifference {
  Entry finding;
  std::string libtorch;
};

struct Expectations {
  std::vector<Entry> expect, known_false, known_missed;
  std::vector<KnownFailure> known_failure;
  std::vector<LibTorchDifference> libtorch_difference;
};

std::string str(const toml::table& t, const char* key) { return t[key].value_or(std::string()); }

Expectations read_expectations(const std::string& path) {
  Expectations x;
  const toml::table doc = toml::parse_file(path);
  auto entries = [&](const char* key, std::vector<Entry>& out) {
    if (const toml::array* arr = doc[key].as_array()) {
      for (const auto& node : *arr) {
        const toml::table& t = *node.as_table();
        Entry e{str(t, "failure_mode"), str(t, "rule_id"), str(t, "layer"), str(t, "why"), {}, str(t, "severity"), {}};
        if (const toml::array* runs = t["runs"].as_array())
          for (const auto& r : *runs) e.runs.insert(r.value_or(std::string()));
        if (const toml::array* no = t["not_in"].as_array())
          for (const auto& r : *no) e.not_in.insert(r.value_or(std::string()));
        out.push_back(e);
      }
    }
  };
  entries("expect", x.expect);
  entries("known_false", x.known_false);
  entries("known_missed", x.known_missed);
  {
    std::vector<Entry> diffs;
    entries("libtorch_difference", diffs);
    const toml::array* arr = doc["libtorch_difference"].as_array();
    for (size_t i = 0; i < diffs.size(); ++i) {
      const toml::table& t = *(*arr)[i].as_table();
      const std::string v = t["libtorch"].value_or(std::string());
      if (v.empty()) throw std::runtime_error("[[libtorch_difference]] needs libtorch = \"MAJOR\"");
      x.libtorch_difference.push_back({diffs[i], v});
    }
  }
  if (const toml::array* arr = doc["known_failure"].as_array()) {
    for (const auto& node : *arr) {
      const toml::table& t = *node.as_table();
      x.known_failure.push_back({str(t, "run"), str(t, "message"), static_cast<int>(t["exit_code"].value_or(-1))});
    }
  }
  return x;
}

struct Case {
  std::string model, run;  // run: "batch", "no-input", or "pt2" (NAME.pt2, torch.export of the same model, with the batch)
};

/// gtest prints a parameter with this (instead of its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " (" << c.run << ")"; }

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const auto& m : corpus_models()) {
    for (const char* run : {"batch", "no-input"}) v.push_back({m, run});
    if (fs::exists(corpus_dir() + "/" + m + ".pt2")) v.push_back({m, "pt2"});
  }
  return v;
}

class CorpusRun : public ::testing::TestWithParam<Case> {};

/// On LibTorch 1.x, a file saved by PyTorch 2.x may call operators 1.x lacks
/// or use a newer file format: skipped with the reason, never silently.
void skip_if_unloadable_on_1x(const nde2e::NdRun& r) {
#if TORCH_VERSION_MAJOR < 2
  if (r.exit_code == 3 && r.has_report && r.report.contains("error")) {
    const json& e = r.report["error"];
    const std::string kind = e.value("kind", ""), msg = e.value("message", "");
    if (kind == "missing_operator" ||
        ((kind == "model_load" || kind == "model_run") &&
         (msg.find("does not have") != std::string::npos || msg.find("operator") != std::string::npos ||
          msg.find("file format") != std::string::npos || msg.find("version") != std::string::npos ||
          msg.find("LibTorch 2.x") != std::string::npos)))
      GTEST_SKIP() << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR
                   << " cannot run this PyTorch 2.x file: " << msg;
  }
#else
  (void)r;
#endif
}

TEST_P(CorpusRun, FindingsAreExactlyTheExpectedOnes) {
  const Case& c = GetParam();
  const std::string expect_path = corpus_dir() + "/" + c.model + ".expect.toml";
  ASSERT_TRUE(fs::exists(expect_path)) << "no expectations file " << expect_path;
  Expectations x;
  try {
    x = read_expectations(expect_path);
  } catch (const std::exception& e) {
    FAIL() << expect_path << ": " << e.what();
  }
  nde2e::TempDir tmp;
  std::vector<std::string> inputs;
  if (c.run != "no-input") inputs.push_back(corpus_dir() + "/" + c.model + ".input.pt");
  const auto r = nde2e::check(corpus_dir() + "/" + c.model + (c.run == "pt2" ? ".pt2" : ".pt"), inputs, {},
                              tmp.file("report.json"));
  skip_if_unloadable_on_1x(r);
  if (::testing::Test::IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only

  const char* strict_env = std::getenv("ND_CORPUS_STRICT");
  const bool strict = strict_env && std::string(strict_env) == "1";
  auto open_bug = [&](const std::string& what) {
    std::cout << "OPEN BUG " << c.model << " (" << c.run << "): " << what << "\n";
    if (strict) ADD_FAILURE() << "open bug of the tool (ND_CORPUS_STRICT=1): " << what;
  };
  for (const auto& k : x.known_failure) {
    if (!(k.run.empty() || k.run == c.run)) continue;
    if (r.exit_code == k.exit_code) {
      open_bug("known failure, exit " + std::to_string(k.exit_code) + ": " + k.message);
      return;
    }
    ADD_FAILURE() << "known failure no longer reproduces (exit " << r.exit_code << ", was " << k.exit_code
                  << "): remove the [[known_failure]] entry from " << expect_path << " (" << k.message << ")";
  }

  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.describe();
  ASSERT_TRUE(r.has_report) << r.describe();
  ASSERT_EQ(r.report.value("status", ""), "ok") << r.report.dump(2).substr(0, 4000);
  // Every probe wrote only the metrics it declares (src/probes/registry.cpp).
  EXPECT_FALSE(r.report.at("probes").contains("undeclared_metrics")) << r.report["probes"]["undeclared_metrics"].dump(1);
  // The parameter count is Python's sum over model.parameters(): a tensor
  // two modules share (GPT-2's head tied to its token embedding) once.
  const json facts = json::parse(nde2e::read_file(corpus_dir() + "/" + c.model + ".facts.json"));
  EXPECT_EQ(r.report.at("model").value("parameters", int64_t(-1)), facts.value("parameters", int64_t(-2)));

  // (failure_mode, layer) of every finding, with its rule id and message.
  std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>> got;
  for (const auto& f : r.report.at("findings"))
    got.emplace_back(f.value("failure_mode", ""), f.at("layer").is_null() ? "" : f.at("layer").get<std::string>(),
                     f.value("rule_id", ""), f.value("message", ""), f.value("severity", ""));

  // An entry is reported when a finding has its failure mode and layer.
  auto reported = [&](const Entry& e) {
    return std::any_of(got.begin(), got.end(),
                       [&](const auto& g) { return std::get<0>(g) == e.failure_mode && std::get<1>(g) == e.layer; });
  };
  for (const auto& e : x.expect) {
    if (!e.applies(c.run)) continue;
    const bool found = reported(e);
    EXPECT_TRUE(found) << "missing true finding " << e.describe() << ": " << e.why;
    if (found && !e.severity.empty())
      for (const auto& g : got)
        if (std::get<0>(g) == e.failure_mode && std::get<1>(g) == e.layer) {
          EXPECT_EQ(std::get<4>(g), e.severity) << e.describe() << ": " << std::get<3>(g) << "\n  " << e.why;
        }
  }
  for (const auto& g : got) {
    bool expected = false;
    for (const auto& e : x.expect)
      expected = expected || (e.applies(c.run) && e.failure_mode == std::get<0>(g) && e.layer == std::get<1>(g));
    if (expected) continue;
    const Entry* known = nullptr;
    for (const auto& e : x.known_false)
      if (e.applies(c.run) && e.failure_mode == std::get<0>(g) && e.layer == std::get<1>(g)) known = &e;
    const LibTorchDifference* diff = nullptr;
    for (const auto& d : x.libtorch_difference)
      if (d.libtorch == std::to_string(TORCH_VERSION_MAJOR) && d.finding.applies(c.run) &&
          d.finding.failure_mode == std::get<0>(g) && d.finding.layer == std::get<1>(g))
        diff = &d;
    if (known)
      open_bug("FALSE finding " + std::get<2>(g) + " " + std::get<0>(g) + " at '" + std::get<1>(g) +
               "': " + std::get<3>(g) + "\n  false because: " + known->why);
    else if (diff)
      std::cout << "LIBTORCH " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << " DIFFERENCE " << c.model << " ("
                << c.run << "): " << std::get<2>(g) << " " << std::get<0>(g) << " at '" << std::get<1>(g)
                << "': " << diff->finding.why << "\n";
    else
      ADD_FAILURE() << "unexpected finding " << std::get<2>(g) << " " << std::get<0>(g) << " at '" << std::get<1>(g)
                    << "': " << std::get<3>(g);
  }
  for (const auto& e : x.known_missed) {
    if (!e.applies(c.run)) continue;
    const bool present = reported(e);
    if (present)
      ADD_FAILURE() << "fixed: the missed true finding " << e.describe() << " now appears; move it from [[known_missed]] to [[expect]] in "
                    << expect_path;
    else
      open_bug("MISSED true finding " + e.describe() + ": " + e.why);
  }
  for (const auto& e : x.known_false) {
    if (!e.applies(c.run)) continue;
    const bool present = reported(e);
    EXPECT_TRUE(present) << "fixed: the false finding " << e.describe()
                         << " no longer appears; remove the [[known_false]] entry from " << expect_path;
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const std::string& run = info.param.run;
  std::string n = info.param.model + "_" + (run == "batch" ? "batch" : run == "pt2" ? "pt2" : "noinput");
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusRun, ::testing::ValuesIn(cases()), case_name);

TEST(CorpusFolder, HoldsAtLeastTwentyModelsEachWithBatchFactsAndExpectations) {
  const auto models = corpus_models();
  EXPECT_GE(models.size(), 20u);
  for (const auto& m : models) {
    EXPECT_TRUE(fs::exists(corpus_dir() + "/" + m + ".input.pt")) << m << " has no sample batch";
    EXPECT_TRUE(fs::exists(corpus_dir() + "/" + m + ".expect.toml")) << m << " has no expectations file";
    EXPECT_TRUE(fs::exists(corpus_dir() + "/" + m + ".facts.json")) << m << " has no facts file";
  }
}

// Per-module statistics against Python's (make_corpus.py's facts: the
// primary output tensor of every module, eval mode, forward hooks). The
// layer table's act.* come from the train pass; these five models compute
// the same in both modes (no BatchNorm, dropout probabilities 0, no
// stochastic depth), so every module must match within 1e-4 relative. Two
// of them have rotary embeddings returning (cos, sin): the primary is cos.
// Both files of each model: the TorchScript .pt and the exported .pt2
// (normdoctor's own graph interpreter), so the two agree with each other too.
TEST(CorpusStatistics, ModuleOutputsMatchPython) {
  for (const std::string name :
       {"hf_whisper_encoder_tiny", "timm_convnext_atto_tiny", "timm_deit_tiny_distilled", "hf_qwen2_tiny", "hf_mistral_tiny"})
  for (const std::string ext : {".pt", ".pt2"}) {
    SCOPED_TRACE(name + ext);
    const json facts = json::parse(nde2e::read_file(corpus_dir() + "/" + name + ".facts.json"));
    const json& want = facts.at("module_output_stats");
    nde2e::TempDir tmp;
    const auto r = nde2e::check(corpus_dir() + "/" + name + ext, {corpus_dir() + "/" + name + ".input.pt"},
                                {"--fail-on", "never"}, tmp.file("r.json"));
#if TORCH_VERSION_MAJOR < 2
    // The .pt2 part alone is left out on 1.x (its graph calls 2.x
    // operators), with the reason printed; the .pt part still runs.
    if (ext == ".pt2" && r.exit_code == 3) {
      std::cout << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << " cannot run " << name
                << ".pt2 (a PyTorch 2.x export): " << r.report.value("error", json::object()).value("message", "")
                << "\n";
      continue;
    }
#endif
    skip_if_unloadable_on_1x(r);
  if (::testing::Test::IsSkipped()) return;  // GTEST_SKIP in a helper returns from the helper only
    ASSERT_TRUE(r.has_report) << r.describe();
    int compared = 0;
    for (const auto& l : r.report.at("layers")) {
      const std::string path = l.at("path");
      if (!want.contains(path) || !want[path]["rms"].is_number() || !l.contains("metrics") ||
          !l.at("metrics").contains("act.rms"))
        continue;
      // Python's hook keeps a module's last call; normdoctor merges its
      // calls (DeiT's head_drop runs on the class and the distillation token).
      if (nde2e::as_number(l.at("metrics").value("act.calls", json(1))) != 1) continue;
      const double py = want[path]["rms"].get<double>(), got = nde2e::as_number(l.at("metrics").at("act.rms"));
      EXPECT_LE(std::fabs(got - py), 1e-4 * std::fabs(py) + 1e-7) << path << ": act.rms " << got << ", Python " << py;
      const double pya = want[path]["absmax"].get<double>(), gota = nde2e::as_number(l.at("metrics").at("act.absmax"));
      EXPECT_LE(std::fabs(gota - pya), 1e-4 * std::fabs(pya) + 1e-7) << path << ": act.absmax " << gota << ", Python " << pya;
      ++compared;
    }
    EXPECT_GE(compared, 20) << "modules compared";
  }
}

TEST(CorpusFolder, IsUnderFortyMegabytes) {
  std::uintmax_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus_dir()))
    if (e.is_regular_file()) total += e.file_size();
  EXPECT_LT(total, 40u * 1000 * 1000) << "corpus/ holds " << total << " bytes";
}

TEST(CorpusFolder, ExpectationsNameCatalogSlugs) {
  // Every failure_mode of an expectations file is a slug of the catalog
  // (normdoctor rules --format json lists the rules and their slugs).
  nde2e::TempDir tmp;
  const auto r = nde2e::run_nd({"rules", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const json rules = json::parse(r.out);
  std::set<std::string> slugs;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "failure_mode" && it->is_string()) slugs.insert(it->get<std::string>());
        if (it.key() == "failure_modes" && it->is_array())
          for (const auto& s : *it)
            if (s.is_string()) slugs.insert(s.get<std::string>());
        walk(*it);
      }
    } else if (j.is_array()) {
      for (const auto& v : j) walk(v);
    }
  };
  walk(rules);
  ASSERT_FALSE(slugs.empty()) << r.out.substr(0, 2000);
  for (const auto& m : corpus_models()) {
    const std::string p = corpus_dir() + "/" + m + ".expect.toml";
    if (!fs::exists(p)) continue;
    const Expectations x = read_expectations(p);
    for (const auto* list : {&x.expect, &x.known_false, &x.known_missed})
      for (const auto& e : *list) {
        EXPECT_TRUE(slugs.count(e.failure_mode)) << p << ": '" << e.failure_mode << "' is no rule's failure mode";
        EXPECT_FALSE(e.why.empty()) << p << ": " << e.describe() << " has no `why`";
      }
  }
}

}  // namespace

}  // namespace nd_test_corpus_test
