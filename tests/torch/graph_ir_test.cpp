// Issue 14, item 5: the graph rewriting tested from text, without fixture
// files. Each test builds a module tree in memory (the named_modules() paths
// and class names a user's model has, with its parameters, buffers and
// attributes) and gives it a forward written either
//   * as TorchScript source, compiled by LibTorch's own frontend
//     (Module::define): real prim::CallMethod calls, inlined call stacks,
//     `if self.training:` blocks, configuration branches, containers
//     unrolled into getattr(self.layers, "0") as torch.jit.script does; or
//   * as IR text (torch::jit::parseIR): the flat aten graph a trace records,
//     with constants where the tracer baked flags, each node's module chain
//     given by the normdoctor_scope attribute that normdoctor's own graph
//     builder (.pt2) writes.
// Then InstrumentedModel rewrites it, and the tests assert what the rewrite
// found (norm sites with axes and eps, residual placement, mode ops, taps per
// module) and what a pass through the rewritten graph measures, recomputed
// here directly from the same tensors.
#include <gtest/gtest.h>

#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/script.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "instrument/instrument.h"
#include "model/model.h"

// Everything in this file lives in its own namespace: the torch tests build
// as one executable, in unity batches (tests/CMakeLists.txt).
namespace nd_test_graph_ir_test {

namespace {

using torch::jit::Module;

/// A module tree built in memory. Paths are named_modules() paths; classes
/// are TorchScript qualified names whose last part is the Python class
/// ("__torch__.torch.nn.modules.normalization.LayerNorm").
class Tree {
 public:
  explicit Tree(const std::string& root_class = "__torch__.Model") : root_(make(root_class)) { mods_[""] = root_; }

  /// Adds a module at `path` (its parent must exist).
  Module& add(const std::string& path, const std::string& qualified_class) {
    const auto dot = path.rfind('.');
    const std::string parent = dot == std::string::npos ? std::string() : path.substr(0, dot);
    const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
    Module m = make(qualified_class);
    mods_.at(parent).register_module(name, m);
    return mods_[path] = m;
  }
  Module& at(const std::string& path) { return mods_.at(path); }

  /// An nn.LayerNorm(n) at `path`: weight, bias, eps and normalized_shape.
  Module& layer_norm(const std::string& path, int64_t n, double eps = 1e-5) {
    Module& m = add(path, "__torch__.torch.nn.modules.normalization.LayerNorm");
    m.register_parameter("weight", torch::ones({n}), false);
    m.register_parameter("bias", torch::zeros({n}), false);
    m.register_attribute("eps", c10::FloatType::get(), eps);
    m.define(R"(
def forward(self, x):
    return torch.layer_norm(x, [)" + std::to_string(n) + R"(], self.weight, self.bias, self.eps, False)
)");
    return m;
  }
  /// An nn.Linear(in, out) at `path` with seeded random weights.
  Module& linear(const std::string& path, int64_t in, int64_t out, double scale = 1.0) {
    Module& m = add(path, "__torch__.torch.nn.modules.linear.Linear");
    m.register_parameter("weight", torch::randn({out, in}) * (scale / std::sqrt(static_cast<double>(in))), false);
    m.register_parameter("bias", torch::zeros({out}), false);
    m.define(R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)");
    return m;
  }

  /// The model with `forward` compiled from TorchScript source on the root.
  nd::LoadedModel scripted(const std::string& forward_src) {
    root_.define(forward_src);
    return finish();
  }

  /// The model with forward parsed from IR text. `%self` is the root; the
  /// types of prim::GetAttr outputs are set from the module types (the IR
  /// parser knows no class types).
  nd::LoadedModel from_ir(const std::string& ir) {
    auto g = std::make_shared<torch::jit::Graph>();
    torch::jit::parseIR(ir, g.get());
    g->inputs().at(0)->setType(root_.type());
    static const c10::Symbol kScope = c10::Symbol::attr(nd::kModuleScopeAttr);
    for (torch::jit::Node* n : g->nodes()) {
      // The parser keeps a list attribute as an IValue; the resolver reads strings.
      if (n->hasAttribute(kScope) && n->kindOf(kScope) == torch::jit::AttributeKind::ival) {
        std::vector<std::string> chain;
        for (const auto& e : n->ival(kScope).toListRef()) chain.push_back(e.toStringRef());
        n->ss_(kScope, chain);
      }
      if (n->kind() == c10::prim::GetAttr) {
        auto cls = n->input()->type()->cast<c10::ClassType>();
        if (cls) n->output()->setType(cls->getAttribute(n->s(c10::attr::name)));
      }
    }
    auto fn = root_.type()->compilation_unit()->create_function(
        c10::QualifiedName(*root_.type()->name(), "forward"), g, /*shouldMangle=*/false);
    root_.type()->addMethod(fn);
    return finish();
  }

 private:
  Module make(const std::string& qualified) {
    Module m(c10::QualifiedName(qualified), cu_, /*shouldMangle=*/true);
    m.register_attribute("training", c10::BoolType::get(), false);
    return m;
  }
  nd::LoadedModel finish() {
    nd::LoadedModel lm;
    lm.path = "<memory>";
    lm.module = root_;
    lm.saved_training = root_.is_training();
    nd::infer_model_kind(lm);
    nd::describe_forward_and_modules(lm);
    return lm;
  }

  std::shared_ptr<torch::jit::CompilationUnit> cu_ = std::make_shared<torch::jit::CompilationUnit>();
  Module root_;
  std::map<std::string, Module> mods_;
};

/// The primary module-output tap of `module`; -1 when it has none.
int64_t output_tap(const nd::InstrumentedModel& im, const std::string& module) {
  for (const auto& t : im.taps())
    if (t.kind == nd::TapKind::kModuleOutput && t.module == module && t.primary) return t.id;
  return -1;
}

std::vector<std::string> module_paths(const nd::LoadedModel& lm) {
  std::vector<std::string> out;
  for (const auto& m : lm.modules) out.push_back(m.path);
  return out;
}

double rms(const at::Tensor& x) { return x.to(at::kDouble).pow(2).mean().sqrt().item<double>(); }

// ---------------------------------------------------------------------------
// Scripted: call stacks, control flow, configuration branches, containers.

/// A fairseq-style encoder: three blocks in a ModuleList (never called as a
/// module: TorchScript unrolls the loop into getattr(self.layers, "i")),
/// each `if self.normalize_before:` pre-norm, else post-norm, with a dropout
/// that follows `self.training`.
nd::LoadedModel encoder(Tree& t, bool normalize_before) {
  t.add("layers", "__torch__.torch.nn.modules.container.ModuleList");
  for (int i = 0; i < 3; ++i) {
    const std::string p = "layers." + std::to_string(i);
    Module& layer = t.add(p, "__torch__.fairseq.modules.transformer_layer.TransformerEncoderLayer");
    layer.register_attribute("normalize_before", c10::BoolType::get(), normalize_before);
    t.linear(p + ".fc1", 16, 32);
    t.linear(p + ".fc2", 32, 16);
    t.layer_norm(p + ".final_layer_norm", 16);
    layer.define(R"(
def forward(self, x):
    residual = x
    if self.normalize_before:
        x = self.final_layer_norm.forward(x)
    x = torch.relu(self.fc1.forward(x))
    x = torch.dropout(self.fc2.forward(x), 0.1, self.training)
    x = residual + x
    if not self.normalize_before:
        x = self.final_layer_norm.forward(x)
    return x
)");
  }
  t.layer_norm("layer_norm", 16);
  return t.scripted(R"(
def forward(self, x):
    x = getattr(self.layers, "0").forward(x)
    x = getattr(self.layers, "1").forward(x)
    x = getattr(self.layers, "2").forward(x)
    if self.training:
        x = x * 1.0
    return self.layer_norm.forward(x)
)");
}

TEST(GraphIr, ScriptedEncoderIsScriptedAndItsContainerIsNeverAScope) {
  Tree t;
  const nd::LoadedModel lm = encoder(t, /*normalize_before=*/true);
  EXPECT_EQ(lm.kind, "scripted") << lm.kind_reason;
  EXPECT_EQ(lm.kind_reason, "forward reads module training flags");
  ASSERT_EQ(lm.args.size(), 1u);
  EXPECT_EQ(lm.args[0].name, "x");

  nd::InstrumentedModel im(lm);
  // ModuleList has no forward: no tap measures it, its children are measured.
  EXPECT_EQ(im.taps_by_module().count("layers"), 0u);
  for (const char* p : {"layers.0", "layers.1", "layers.2", "layers.1.fc1", "layers.2.final_layer_norm", "layer_norm"})
    EXPECT_GE(output_tap(im, p), 0) << p;

  // Every dropout follows the module's mode; nothing is baked.
  EXPECT_EQ(im.baked_dropout(), 0);
  EXPECT_EQ(im.dropout_nodes(), 3);
  for (const auto& mo : im.mode_ops()) {
    EXPECT_EQ(mo.op, "dropout");
    EXPECT_TRUE(mo.follows_mode) << mo.module;
    EXPECT_FALSE(mo.baked) << mo.module;
  }
  ASSERT_EQ(im.mode_ops().size(), 3u);
  EXPECT_EQ(im.mode_ops()[1].module, "layers.1");
}

TEST(GraphIr, ConfigurationBranchesAreFoldedToThePlacementTheyTake) {
  for (bool pre : {true, false}) {
    Tree t;
    const nd::LoadedModel lm = encoder(t, pre);
    nd::InstrumentedModel im(lm);
    ASSERT_EQ(im.residuals().size(), 3u) << (pre ? "pre" : "post");
    for (size_t i = 0; i < 3; ++i) {
      const auto& r = im.residuals()[i];
      EXPECT_EQ(r.block, "layers." + std::to_string(i));
      EXPECT_EQ(r.stack, "layers");
      EXPECT_EQ(r.placement, pre ? "pre-norm" : "post-norm") << r.block;
      EXPECT_EQ(r.norm_module, "layers." + std::to_string(i) + ".final_layer_norm");
    }
    // The root's LayerNorm after the last block is a final norm either way.
    EXPECT_EQ(im.final_norm().status, "present");
    EXPECT_EQ(im.final_norm().norm_module, "layer_norm");
    // Each block's LayerNorm is one norm site over the last axis, eps 1e-5.
    int ln = 0;
    for (const auto& n : im.norm_ops())
      if (n.op == "layer_norm") {
        ++ln;
        EXPECT_EQ(n.args.at("normalized_shape"), nlohmann::json::array({16})) << n.module;
        EXPECT_EQ(n.args.at("eps"), 1e-5) << n.module << " " << n.args.dump();
      }
    EXPECT_EQ(ln, 4);
  }
}

TEST(GraphIr, APassThroughTheRewrittenGraphMeasuresEachModulesOutput) {
  torch::manual_seed(0);
  Tree t;
  nd::LoadedModel lm = encoder(t, /*normalize_before=*/true);
  nd::InstrumentedModel im(lm);
  const at::Tensor x = torch::randn({2, 5, 16});
  // The plain model, module by module, as Python would compute it.
  lm.module.eval();
  at::Tensor h = x;
  std::map<std::string, at::Tensor> expect;
  for (int i = 0; i < 3; ++i) {
    const std::string p = "layers." + std::to_string(i);
    Module layer = t.at(p);
    expect[p + ".final_layer_norm"] = t.at(p + ".final_layer_norm").forward({h}).toTensor();
    h = layer.forward({h}).toTensor();
    expect[p] = h;
  }
  expect["layer_norm"] = t.at("layer_norm").forward({h}).toTensor();
  const at::Tensor y_plain = lm.module.forward({x}).toTensor();

  nd::Collector c(im.taps().size());
  nd::PassConfig cfg;
  const at::Tensor y = im.run({x}, cfg, c).toTensor();
  EXPECT_TRUE(at::allclose(y, y_plain));
  for (const auto& [path, v] : expect) {
    const int64_t id = output_tap(im, path);
    ASSERT_GE(id, 0) << path;
    const auto& r = c.records().at(static_cast<size_t>(id));
    EXPECT_EQ(r.calls, 1) << path;
    EXPECT_NEAR(r.fwd.rms(), rms(v), 1e-6 * rms(v)) << path;
    EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 5, 16})) << path;
  }
}

TEST(GraphIr, BatchNormReadingTheTrainingFlagIsLiveAndItsArgumentsAreRead) {
  Tree t;
  Module& bn = t.add("bn", "__torch__.torch.nn.modules.batchnorm.BatchNorm1d");
  bn.register_parameter("weight", torch::ones({4}), false);
  bn.register_parameter("bias", torch::zeros({4}), false);
  bn.register_buffer("running_mean", torch::zeros({4}));
  bn.register_buffer("running_var", torch::ones({4}));
  bn.define(R"(
def forward(self, x):
    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training, 0.01, 0.001, False)
)");
  const nd::LoadedModel lm = t.scripted(R"(
def forward(self, x):
    return self.bn.forward(x)
)");
  EXPECT_EQ(lm.kind, "scripted");
  nd::InstrumentedModel im(lm);
  ASSERT_EQ(im.norm_ops().size(), 1u);
  const auto& n = im.norm_ops()[0];
  EXPECT_EQ(n.op, "batch_norm");
  EXPECT_EQ(n.module, "bn");
  EXPECT_DOUBLE_EQ(n.args.at("eps").get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(n.args.at("momentum").get<double>(), 0.01);
  EXPECT_EQ(n.args.at("training"), "dynamic");
  EXPECT_GE(n.input_tap, 0);
  ASSERT_EQ(im.mode_ops().size(), 1u);
  EXPECT_TRUE(im.mode_ops()[0].follows_mode);
  EXPECT_EQ(im.baked_batch_norm(), 0);
}

TEST(GraphIr, ModelKindFromModuleTypesWhenForwardShowsNoSign) {
  // No control flow, no training flag read: forward alone looks traced.
  {
    Tree t;
    t.linear("fc", 4, 4);
    const nd::LoadedModel lm = t.scripted("def forward(self, x):\n    return self.fc.forward(x)\n");
    EXPECT_EQ(lm.kind, "traced") << lm.kind_reason;
  }
  // A compiled constant (nn.Linear's in_features under torch.jit.script) is
  // a scripted sign a trace never leaves.
  {
    Tree t;
    Module& fc = t.linear("fc", 4, 4);
    fc.type()->addConstant("in_features", 4);
    const nd::LoadedModel lm = t.scripted("def forward(self, x):\n    return self.fc.forward(x)\n");
    EXPECT_EQ(lm.kind, "scripted");
    EXPECT_EQ(lm.kind_reason, "module 'fc' has compiled constants (in_features) (a trace records only forward, without constants)");
  }
  // A helper method besides forward (Conv2d._conv_forward) is one too.
  {
    Tree t;
    Module& fc = t.linear("fc", 4, 4);
    fc.define("def _helper(self, x):\n    return x\n");
    const nd::LoadedModel lm = t.scripted("def forward(self, x):\n    return self.fc.forward(x)\n");
    EXPECT_EQ(lm.kind, "scripted");
    EXPECT_NE(lm.kind_reason.find("compiled method besides forward (_helper)"), std::string::npos) << lm.kind_reason;
  }
  // A submodule forward taking `argument_1` was named by the tracer.
  {
    Tree t;
    Module& fc = t.add("fc", "__torch__.torch.nn.modules.linear.Linear");
    fc.register_parameter("weight", torch::eye(4), false);
    fc.define("def forward(self, argument_1):\n    return torch.linear(argument_1, self.weight)\n");
    const nd::LoadedModel lm = t.scripted("def forward(self, x):\n    return self.fc.forward(x)\n");
    EXPECT_EQ(lm.kind, "traced");
    EXPECT_EQ(lm.kind_reason, "module 'fc''s forward takes 'argument_1' (an argument named by the tracer)");
  }
}

TEST(GraphIr, OptionalArgumentsWithDefaultsAreDescribed) {
  Tree t;
  const nd::LoadedModel lm = t.scripted(R"(
def forward(self, tokens, mask: Optional[Tensor] = None, scale: float = 1.0):
    if mask is not None:
        tokens = tokens * mask
    return tokens * scale
)");
  ASSERT_EQ(lm.args.size(), 3u);
  EXPECT_FALSE(lm.args[0].has_default);
  EXPECT_TRUE(lm.args[1].has_default);
  EXPECT_EQ(lm.args[1].type, "Optional[Tensor]");
  EXPECT_TRUE(lm.args[2].has_default);
  EXPECT_EQ(lm.kind, "scripted");
}

TEST(GraphIr, AModuleReturningATupleHasOnePrimaryOutput) {
  // A Hugging Face-style layer returns (hidden_states, attention_weights);
  // the parent reads both. The layer's primary output is the first.
  torch::manual_seed(1);
  Tree t;
  Module& layer = t.add("layer", "__torch__.transformers.models.bert.modeling_bert.BertLayer");
  t.linear("layer.dense", 8, 8);
  layer.define(R"(
def forward(self, x):
    h = self.dense.forward(x)
    w = torch.softmax(h * 30.0, -1)
    return (h, w)
)");
  t.linear("head", 8, 3);
  nd::LoadedModel lm = t.scripted(R"(
def forward(self, x):
    h, w = self.layer.forward(x)
    return self.head.forward(h) + w.sum(-1, keepdim=True)
)");
  nd::InstrumentedModel im(lm);
  std::vector<const nd::TapSite*> outs;
  for (const auto& s : im.taps())
    if (s.kind == nd::TapKind::kModuleOutput && s.module == "layer") outs.push_back(&s);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs[0]->primary);
  EXPECT_EQ(outs[0]->output_index, 0);
  EXPECT_FALSE(outs[1]->primary);
  EXPECT_EQ(outs[1]->output_index, 1);

  // Each output's statistics are its own tensor's, not a mix of the two.
  const at::Tensor x = torch::randn({2, 4, 8});
  nd::Collector c(im.taps().size());
  im.run({x}, nd::PassConfig{}, c);
  const at::Tensor h = t.at("layer.dense").forward({x}).toTensor();
  const at::Tensor w = torch::softmax(h * 30.0, -1);
  EXPECT_NEAR(c.records()[static_cast<size_t>(outs[0]->id)].fwd.rms(), rms(h), 1e-6 * rms(h));
  EXPECT_NEAR(c.records()[static_cast<size_t>(outs[1]->id)].fwd.rms(), rms(w), 1e-6);
}

TEST(GraphIr, ALoopCallingOneSharedLayerMeasuresEveryCall) {
  // ALBERT shares one layer across depth: `for _ in range(n): x = layer(x)`
  // stays a prim::Loop in the scripted graph (no unrolling), inside a
  // Sequential-style encoder that is itself a module with a forward.
  torch::manual_seed(5);
  Tree t;
  Module& enc = t.add("encoder", "__torch__.transformers.models.albert.modeling_albert.AlbertTransformer");
  enc.register_attribute("num_hidden_layers", c10::IntType::get(), int64_t{4});
  t.linear("encoder.shared", 8, 8, 0.5);
  enc.define(R"(
def forward(self, x):
    for _ in range(self.num_hidden_layers):
        x = x + self.shared.forward(x)
    return x
)");
  nd::LoadedModel lm = t.scripted("def forward(self, x):\n    return self.encoder.forward(x)\n");
  EXPECT_EQ(lm.kind, "scripted");
  EXPECT_EQ(lm.kind_reason, "forward has control flow or calls compiled Python functions");
  nd::InstrumentedModel im(lm);
  const int64_t shared = output_tap(im, "encoder.shared");
  const int64_t encoder = output_tap(im, "encoder");
  ASSERT_GE(shared, 0);
  ASSERT_GE(encoder, 0);
  const at::Tensor x = torch::randn({3, 8});
  nd::Collector c(im.taps().size());
  const at::Tensor y = im.run({x}, nd::PassConfig{}, c).toTensor();
  EXPECT_EQ(c.records()[static_cast<size_t>(shared)].calls, 4);
  EXPECT_EQ(c.records()[static_cast<size_t>(encoder)].calls, 1);
  // The shared layer's statistics merge its four calls: recompute them.
  at::Tensor h = x;
  double sumsq = 0;
  int64_t n = 0;
  for (int i = 0; i < 4; ++i) {
    const at::Tensor f = t.at("encoder.shared").forward({h}).toTensor();
    sumsq += f.to(at::kDouble).pow(2).sum().item<double>();
    n += f.numel();
    h = h + f;
  }
  EXPECT_TRUE(at::allclose(y, h));
  EXPECT_NEAR(c.records()[static_cast<size_t>(shared)].fwd.rms(), std::sqrt(sumsq / n), 1e-6);
  EXPECT_NEAR(c.records()[static_cast<size_t>(encoder)].fwd.rms(), rms(h), 1e-6 * rms(h));
}

// ---------------------------------------------------------------------------
// IR text: traced graphs.

/// A traced ResNet-like stem (conv -> batch_norm -> relu -> residual add),
/// flags baked by the tracer: batch_norm training=false, dropout train=false.
const char* kTracedStem = R"IR(
graph(%self : Tensor, %x : Float(2, 4, 6, 6)):
  %conv : Tensor = prim::GetAttr[name="conv"](%self)
  %w : Tensor = prim::GetAttr[name="weight"](%conv)
  %bn : Tensor = prim::GetAttr[name="bn"](%self)
  %g : Tensor = prim::GetAttr[name="weight"](%bn)
  %b : Tensor = prim::GetAttr[name="bias"](%bn)
  %rm : Tensor = prim::GetAttr[name="running_mean"](%bn)
  %rv : Tensor = prim::GetAttr[name="running_var"](%bn)
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %ones : int[] = prim::ListConstruct(%one, %one)
  %zeros : int[] = prim::ListConstruct(%zero, %zero)
  %c : Tensor = aten::conv2d[normdoctor_scope=["conv"]](%x, %w, %none, %ones, %ones, %ones, %one)
  %false : bool = prim::Constant[value=0]()
  %mom : float = prim::Constant[value=0.1]()
  %eps : float = prim::Constant[value=1e-05]()
  %n : Tensor = aten::batch_norm[normdoctor_scope=["bn"]](%c, %g, %b, %rm, %rv, %false, %mom, %eps, %false)
  %r : Tensor = aten::relu[normdoctor_scope=["act"]](%n)
  %p : float = prim::Constant[value=0.2]()
  %d : Tensor = aten::dropout[normdoctor_scope=["drop"]](%r, %p, %false)
  %out : Tensor = aten::add(%x, %d, %one)
  return (%out)
)IR";

nd::LoadedModel traced_stem(Tree& t) {
  Module& conv = t.add("conv", "__torch__.torch.nn.modules.conv.Conv2d");
  conv.register_parameter("weight", torch::randn({4, 4, 3, 3}) * 0.2, false);
  Module& bn = t.add("bn", "__torch__.torch.nn.modules.batchnorm.BatchNorm2d");
  bn.register_parameter("weight", torch::ones({4}), false);
  bn.register_parameter("bias", torch::zeros({4}), false);
  bn.register_buffer("running_mean", torch::zeros({4}));
  bn.register_buffer("running_var", torch::ones({4}));
  t.add("act", "__torch__.torch.nn.modules.activation.ReLU");
  t.add("drop", "__torch__.torch.nn.modules.dropout.Dropout");
  return t.from_ir(kTracedStem);
}

TEST(GraphIr, TracedGraphBakesItsModeAndIsTraced) {
  Tree t;
  const nd::LoadedModel lm = traced_stem(t);
  EXPECT_EQ(lm.kind, "traced") << lm.kind_reason;
  EXPECT_EQ(module_paths(lm), (std::vector<std::string>{"", "conv", "bn", "act", "drop"}));
  nd::InstrumentedModel im(lm);
  EXPECT_EQ(im.baked_batch_norm(), 1);
  EXPECT_EQ(im.baked_dropout(), 1);
  EXPECT_EQ(im.baked_values(), (std::vector<bool>{false, false}));
  ASSERT_EQ(im.mode_ops().size(), 2u);
  EXPECT_EQ(im.mode_ops()[0].module, "bn");
  EXPECT_EQ(im.mode_ops()[0].op, "batch_norm");
  EXPECT_TRUE(im.mode_ops()[0].baked);
  EXPECT_EQ(im.mode_ops()[1].module, "drop");
  EXPECT_EQ(im.mode_ops()[1].op, "dropout");
  ASSERT_EQ(im.norm_ops().size(), 1u);
  EXPECT_EQ(im.norm_ops()[0].module, "bn");
  EXPECT_DOUBLE_EQ(im.norm_ops()[0].args.at("eps").get<double>(), 1e-5);
}

TEST(GraphIr, TracedGraphsBakedFlagsFollowThePassMode) {
  torch::manual_seed(2);
  Tree t;
  const nd::LoadedModel lm = traced_stem(t);
  nd::InstrumentedModel im(lm);
  const at::Tensor x = torch::randn({2, 4, 6, 6}) * 3 + 1;
  const int64_t bn = output_tap(im, "bn");
  ASSERT_GE(bn, 0);
  // Eval: running statistics 0/1, so the output is the conv output itself.
  const at::Tensor w = t.at("conv").attr("weight").toTensor();
  const at::Tensor conv = at::conv2d(x, w, {}, 1, 1);
  {
    nd::Collector c(im.taps().size());
    nd::PassConfig cfg;
    cfg.training = false;
    im.run({x}, cfg, c);
    EXPECT_NEAR(c.records()[static_cast<size_t>(bn)].fwd.rms(), rms(conv / std::sqrt(1 + 1e-5)), 1e-5);
  }
  // Train: the baked constant follows cfg.training, batch statistics are used.
  {
    nd::Collector c(im.taps().size());
    nd::PassConfig cfg;
    cfg.training = true;
    cfg.dropout = false;
    im.run({x}, cfg, c);
    const at::Tensor mean = conv.mean({0, 2, 3}, true), var = conv.var({0, 2, 3}, false, true);
    const at::Tensor expect = (conv - mean) / (var + 1e-5).sqrt();
    EXPECT_NEAR(c.records()[static_cast<size_t>(bn)].fwd.rms(), rms(expect), 1e-5);
  }
}

TEST(GraphIr, AResidualAdditionAtTheRootIsFoundWithItsStream) {
  Tree t;
  const nd::LoadedModel lm = traced_stem(t);
  nd::InstrumentedModel im(lm);
  ASSERT_EQ(im.residuals().size(), 1u);
  const auto& r = im.residuals()[0];
  EXPECT_EQ(r.module, "");
  EXPECT_GE(r.in_tap, 0);
  EXPECT_GE(r.out_tap, 0);
  // The stream entering the addition is the input x.
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({2, 4, 6, 6});
  nd::Collector c(im.taps().size());
  im.run({x}, nd::PassConfig{}, c);
  EXPECT_NEAR(c.records()[static_cast<size_t>(r.in_tap)].fwd.rms(), rms(x), 1e-6);
}

/// RMSNorm as Llama, T5 and Gemma write it, in the spellings users write.
/// `%h` is hidden states [2, 3, 8]; the weight is model.norm.weight.
std::string rms_ir(const std::string& square, bool upcast) {
  std::string s = R"IR(
graph(%self : Tensor, %h : Float(2, 3, 8)):
  %norm : Tensor = prim::GetAttr[name="norm"](%self)
  %w : Tensor = prim::GetAttr[name="weight"](%norm)
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %dims : int[] = prim::ListConstruct(%m1)
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %eps : float = prim::Constant[value=1e-06]()
  %one : int = prim::Constant[value=1]()
  %f32 : int = prim::Constant[value=6]()
  %false : bool = prim::Constant[value=0]()
)IR";
  s += upcast ? "  %x : Tensor = aten::to[normdoctor_scope=[\"norm\"]](%h, %f32, %false, %false, %none)\n"
              : "  %x : Tensor = aten::clone[normdoctor_scope=[\"norm\"]](%h, %none)\n";
  if (square == "pow") s += "  %sq : Tensor = aten::pow[normdoctor_scope=[\"norm\"]](%x, %two)\n";
  if (square == "mul") s += "  %sq : Tensor = aten::mul[normdoctor_scope=[\"norm\"]](%x, %x)\n";
  if (square == "square") s += "  %sq : Tensor = aten::square[normdoctor_scope=[\"norm\"]](%x)\n";
  s += R"IR(
  %var : Tensor = aten::mean[normdoctor_scope=["norm"]](%sq, %dims, %true, %none)
  %ve : Tensor = aten::add[normdoctor_scope=["norm"]](%var, %eps, %one)
  %r : Tensor = aten::rsqrt[normdoctor_scope=["norm"]](%ve)
  %y : Tensor = aten::mul[normdoctor_scope=["norm"]](%x, %r)
  %out : Tensor = aten::mul[normdoctor_scope=["norm"]](%w, %y)
  return (%out)
)IR";
  return s;
}

TEST(GraphIr, RmsNormWrittenOutIsRecognizedInEverySpelling) {
  torch::manual_seed(4);
  for (const std::string square : {"pow", "mul", "square"})
    for (bool upcast : {false, true}) {
      SCOPED_TRACE(square + (upcast ? " after an upcast" : ""));
      Tree t;
      Module& norm = t.add("norm", "__torch__.transformers.models.llama.modeling_llama.LlamaRMSNorm");
      norm.register_parameter("weight", torch::full({8}, 2.0), false);
      const nd::LoadedModel lm = t.from_ir(rms_ir(square, upcast));
      nd::InstrumentedModel im(lm);
      ASSERT_EQ(im.norm_ops().size(), 1u);
      const auto& n = im.norm_ops()[0];
      EXPECT_EQ(n.op, "rms_norm_pattern");
      EXPECT_EQ(n.module, "norm");
      EXPECT_DOUBLE_EQ(n.args.at("eps").get<double>(), 1e-6);
      EXPECT_EQ(n.args.at("dims"), nlohmann::json::array({-1}));
      ASSERT_GE(n.input_tap, 0);
      // The tap on the normalized tensor and the module output, measured.
      const at::Tensor h = torch::randn({2, 3, 8}) * 5;
      nd::Collector c(im.taps().size());
      const at::Tensor y = im.run({h}, nd::PassConfig{}, c).toTensor();
      const at::Tensor expect = 2.0 * h * (h.pow(2).mean(-1, true) + 1e-6).rsqrt();
      EXPECT_TRUE(at::allclose(y, expect, 1e-5, 1e-6));
      // The norm-input tap records what the axis checks read: that it fired, and the shape.
      EXPECT_EQ(c.records()[static_cast<size_t>(n.input_tap)].calls, 1);
      EXPECT_EQ(c.records()[static_cast<size_t>(n.input_tap)].shape, (std::vector<int64_t>{2, 3, 8}));
      const int64_t out = output_tap(im, "norm");
      ASSERT_GE(out, 0);
      EXPECT_NEAR(c.records()[static_cast<size_t>(out)].fwd.rms(), rms(expect), 1e-5);
    }
}

/// A LayerNorm written out over the time axis (axis 1 of [B, T, H]), as in
/// reproductions of speech models: (x - mean(1)) / (std(1) + eps).
const char* kTimeNormIr = R"IR(
graph(%self : Tensor, %x : Float(2, 5, 4)):
  %one : int = prim::Constant[value=1]()
  %dims : int[] = prim::ListConstruct(%one)
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %eps : float = prim::Constant[value=1e-05]()
  %mu : Tensor = aten::mean[normdoctor_scope=["norm"]](%x, %dims, %true, %none)
  %c : Tensor = aten::sub[normdoctor_scope=["norm"]](%x, %mu, %one)
  %sd : Tensor = aten::std[normdoctor_scope=["norm"]](%x, %dims, %true, %true)
  %se : Tensor = aten::add[normdoctor_scope=["norm"]](%sd, %eps, %one)
  %y : Tensor = aten::div[normdoctor_scope=["norm"]](%c, %se)
  return (%y)
)IR";

TEST(GraphIr, HandWrittenLayerNormOverTimeIsRecognizedWithItsAxis) {
  Tree t;
  t.add("norm", "__torch__.model.TimeNorm");
  const nd::LoadedModel lm = t.from_ir(kTimeNormIr);
  nd::InstrumentedModel im(lm);
  ASSERT_EQ(im.norm_ops().size(), 1u);
  const auto& n = im.norm_ops()[0];
  EXPECT_EQ(n.op, "layer_norm_pattern");
  EXPECT_EQ(n.module, "norm");
  EXPECT_EQ(n.args.at("dims"), nlohmann::json::array({1}));
  EXPECT_EQ(n.args.at("statistic"), "std");
  EXPECT_DOUBLE_EQ(n.args.at("eps").get<double>(), 1e-5);
  EXPECT_TRUE(n.args.at("centered").get<bool>());
}

}  // namespace
}  // namespace nd_test_graph_ir_test
