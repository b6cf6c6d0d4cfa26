// The restricted pickle VM (src/formats/pickle.h) on hand-made byte strings:
// what torch.save writes (protocols 2 and 4), and malformed input of every kind.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "formats/pickle.h"
#include "formats/text.h"

// Everything in this file lives in its own namespace: the unit tests build
// in unity batches (tests/CMakeLists.txt).
namespace nd_test_formats_pickle_test {

namespace {

using nd::formats::DType;
using nd::formats::parse_torch_pickle;
using nd::formats::PickleValue;
using K = PickleValue::Kind;

// Emits pickle opcodes (names as in Python's pickletools).
struct Pickle {
  std::string b;

  Pickle& raw(std::string s) { b += s; return *this; }
  Pickle& op(uint8_t c) { b.push_back(static_cast<char>(c)); return *this; }
  Pickle& u8(uint8_t v) { return op(v); }
  Pickle& le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) op(static_cast<uint8_t>(v >> (8 * k)));
    return *this;
  }
  Pickle& proto(int v) { return op(0x80).u8(static_cast<uint8_t>(v)); }
  Pickle& stop() { return op('.'); }
  Pickle& mark() { return op('('); }
  Pickle& none() { return op('N'); }
  Pickle& boolean(bool v) { return op(v ? 0x88 : 0x89); }
  Pickle& int1(uint8_t v) { return op('K').u8(v); }
  Pickle& int2(uint16_t v) { return op('M').le(v, 2); }
  Pickle& int4(int32_t v) { return op('J').le(static_cast<uint32_t>(v), 4); }
  Pickle& long1(const std::string& bytes) { return op(0x8a).u8(static_cast<uint8_t>(bytes.size())).raw(bytes); }
  Pickle& str(const std::string& s) { return op('X').le(s.size(), 4).raw(s); }
  Pickle& short_str(const std::string& s) { return op(0x8c).u8(static_cast<uint8_t>(s.size())).raw(s); }
  Pickle& global(const std::string& m, const std::string& n) { return op('c').raw(m + "\n" + n + "\n"); }
  Pickle& put(uint8_t i) { return op('q').u8(i); }
  Pickle& get(uint8_t i) { return op('h').u8(i); }
  Pickle& tuple() { return op('t'); }
  Pickle& tuple2() { return op(0x86); }
  Pickle& empty_tuple() { return op(')'); }
  Pickle& empty_list() { return op(']'); }
  Pickle& empty_dict() { return op('}'); }
  Pickle& append() { return op('a'); }
  Pickle& appends() { return op('e'); }
  Pickle& setitem() { return op('s'); }
  Pickle& setitems() { return op('u'); }
  Pickle& reduce() { return op('R'); }
  Pickle& persid() { return op('Q'); }
  Pickle& binfloat(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    op('G');
    for (int k = 7; k >= 0; --k) op(static_cast<uint8_t>(bits >> (8 * k)));
    return *this;
  }

  // The persistent id torch.save writes for a storage.
  Pickle& storage(const std::string& cls, const std::string& key, uint8_t numel) {
    return mark().str("storage").global("torch", cls).str(key).str("cpu").int1(numel).tuple().persid();
  }
  // _rebuild_tensor_v2(storage, offset, (sizes), (strides), False, OrderedDict())
  Pickle& tensor2d(const std::string& cls, const std::string& key, uint8_t numel, uint8_t offset,
                   uint8_t s0, uint8_t s1, uint8_t st0, uint8_t st1) {
    global("torch._utils", "_rebuild_tensor_v2").mark();
    storage(cls, key, numel);
    int1(offset).int1(s0).int1(s1).tuple2().int1(st0).int1(st1).tuple2().boolean(false);
    global("collections", "OrderedDict").empty_tuple().reduce();
    return tuple().reduce();
  }

  PickleValue parse() const {
    return parse_torch_pickle(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "batch.pt (data.pkl)");
  }
};

// Expects parse to throw nd::Error of kind input_load whose message contains `needle`.
void expect_error(const Pickle& p, const std::string& needle) {
  try {
    p.parse();
    FAIL() << "no error; expected one containing: " << needle;
  } catch (const nd::Error& e) {
    EXPECT_EQ(e.kind(), nd::error_kind::kInputLoad);
    EXPECT_EQ(e.exit_code(), nd::ExitCode::kLoad);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch.pt"), std::string::npos) << e.what();
  }
}

TEST(FormatsPickle, BareTensorAsTorchSaveWritesIt) {
  Pickle p;
  p.proto(2).tensor2d("FloatStorage", "0", 6, 0, 2, 3, 3, 1).stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kTensor);
  EXPECT_EQ(v.tensor.storage_key, "0");
  EXPECT_EQ(v.tensor.dtype, DType::kFloat32);
  EXPECT_EQ(v.tensor.device, "cpu");
  EXPECT_EQ(v.tensor.storage_numel, 6);
  EXPECT_EQ(v.tensor.storage_offset, 0);
  EXPECT_EQ(v.tensor.sizes, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(v.tensor.strides, (std::vector<int64_t>{3, 1}));
  EXPECT_FALSE(v.tensor.requires_grad);
}

TEST(FormatsPickle, OneElementListUsesAppend) {
  Pickle p;
  p.proto(2).empty_list().put(0).tensor2d("LongStorage", "0", 4, 0, 2, 2, 2, 1).append().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kList);
  ASSERT_EQ(v.items.size(), 1u);
  EXPECT_EQ(v.items[0].kind, K::kTensor);
  EXPECT_EQ(v.items[0].tensor.dtype, DType::kInt64);
}

TEST(FormatsPickle, ListWithAppendsAndSharedStorage) {
  Pickle p;
  p.proto(2).empty_list().put(0).mark();
  p.tensor2d("FloatStorage", "0", 12, 0, 4, 3, 1, 4);  // transposed view
  p.tensor2d("FloatStorage", "0", 12, 5, 2, 2, 4, 1);  // slice with offset
  p.appends().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kList);
  ASSERT_EQ(v.items.size(), 2u);
  EXPECT_EQ(v.items[0].tensor.strides, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(v.items[1].tensor.storage_offset, 5);
}

TEST(FormatsPickle, DictKeepsInsertionOrderAndReplacesDuplicates) {
  Pickle p;
  p.proto(2).empty_dict().put(0).str("z").int1(1).setitem();
  p.mark().str("a").int1(2).str("z").int1(3).str("m").none().setitems().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kDict);
  ASSERT_EQ(v.keys.size(), 3u);
  EXPECT_EQ(v.keys[0].str, "z");
  EXPECT_EQ(v.items[0].integer, 3);  // replaced in place, as Python does
  EXPECT_EQ(v.keys[1].str, "a");
  EXPECT_EQ(v.keys[2].str, "m");
  EXPECT_EQ(v.items[2].kind, K::kNone);
  EXPECT_FALSE(v.ordered_dict);
}

TEST(FormatsPickle, OrderedDictFromReduceAndSetitems) {
  Pickle p;
  p.proto(2).global("collections", "OrderedDict").put(0).empty_tuple().reduce().put(1);
  p.mark().str("second").int1(2).str("first").int1(1).setitems().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kDict);
  EXPECT_TRUE(v.ordered_dict);
  ASSERT_EQ(v.keys.size(), 2u);
  EXPECT_EQ(v.keys[0].str, "second");
  EXPECT_EQ(v.keys[1].str, "first");
}

TEST(FormatsPickle, Protocol4FrameMemoizeStackGlobal) {
  Pickle body;
  body.empty_list().op(0x94);
  body.short_str("torch._utils").op(0x94).short_str("_rebuild_tensor_v2").op(0x94).op(0x93).op(0x94);
  body.mark().mark().short_str("storage").op(0x94).short_str("torch").short_str("HalfStorage").op(0x93);
  body.short_str("0").short_str("cpu").int1(4).tuple().persid();
  body.int1(0).int1(4).op(0x85).int1(1).op(0x85).boolean(false);
  body.short_str("collections").short_str("OrderedDict").op(0x93).empty_tuple().reduce();
  body.tuple().reduce().op(0x94).append().stop();
  Pickle p;
  p.proto(4).op(0x95).le(body.b.size(), 8).raw(body.b);
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kList);
  ASSERT_EQ(v.items.size(), 1u);
  EXPECT_EQ(v.items[0].tensor.dtype, DType::kFloat16);
  EXPECT_EQ(v.items[0].tensor.sizes, (std::vector<int64_t>{4}));
}

TEST(FormatsPickle, RebuildTensorV3ReinterpretsUntypedStorage) {
  // PyTorch 2.x writes _rebuild_tensor_v3 with an UntypedStorage (size in
  // bytes) for dtypes without a legacy storage class.
  Pickle p;
  p.proto(2).global("torch._utils", "_rebuild_tensor_v3").mark();
  p.mark().str("storage").global("torch", "UntypedStorage").str("0").str("cpu").int1(16).tuple().persid();
  p.int1(0).int1(4).op(0x85).int1(1).op(0x85).boolean(false);
  p.global("collections", "OrderedDict").empty_tuple().reduce().global("torch", "uint32");
  p.tuple().reduce().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kTensor);
  EXPECT_EQ(v.tensor.dtype, DType::kUInt32);
  EXPECT_EQ(v.tensor.storage_numel, 4);
}

TEST(FormatsPickle, RebuildParameterKeepsRequiresGrad) {
  Pickle p;
  p.proto(2).global("torch._utils", "_rebuild_parameter");
  p.tensor2d("FloatStorage", "0", 4, 0, 2, 2, 2, 1).boolean(true);
  p.global("collections", "OrderedDict").empty_tuple().reduce().op(0x87).reduce().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kTensor);
  EXPECT_TRUE(v.tensor.requires_grad);
}

TEST(FormatsPickle, ScalarsAndTuples) {
  Pickle p;
  p.proto(2).mark().none().boolean(true).boolean(false).int4(-5).int2(65535).long1("\xff");
  p.long1(std::string("\x00\x00\x00\x00\x00\x00\x00\x80", 8)).binfloat(-2.5).str("h\xc3\xa9");
  p.global("torch", "bfloat16").global("torch", "device").str("cuda").int1(1).tuple2().reduce();
  p.tuple().stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kTuple);
  ASSERT_EQ(v.items.size(), 11u);
  EXPECT_EQ(v.items[0].kind, K::kNone);
  EXPECT_TRUE(v.items[1].boolean);
  EXPECT_FALSE(v.items[2].boolean);
  EXPECT_EQ(v.items[3].integer, -5);
  EXPECT_EQ(v.items[4].integer, 65535);
  EXPECT_EQ(v.items[5].integer, -1);
  EXPECT_EQ(v.items[6].integer, INT64_MIN);
  EXPECT_EQ(v.items[7].floating, -2.5);
  EXPECT_EQ(v.items[8].str, "h\xc3\xa9");
  EXPECT_EQ(v.items[9].kind, K::kDtype);
  EXPECT_EQ(v.items[9].dtype, DType::kBFloat16);
  EXPECT_EQ(v.items[10].kind, K::kDevice);
  EXPECT_EQ(v.items[10].str, "cuda:1");
}

TEST(FormatsPickle, MemoReferencesShareOneObject) {
  // l = []; d = {'a': l}; l.append(1)  -> the dict sees the appended element
  Pickle p;
  p.proto(2).empty_list().op('r').le(4000000000u, 4);  // LONG_BINPUT with a huge index: a map, not an array
  p.empty_dict().str("a").op('j').le(4000000000u, 4).setitem();
  p.op('j').le(4000000000u, 4).int1(1).append().op('0');  // POP the list
  p.stop();
  const PickleValue v = p.parse();
  ASSERT_EQ(v.kind, K::kDict);
  ASSERT_EQ(v.items[0].items.size(), 1u);
  EXPECT_EQ(v.items[0].items[0].integer, 1);
}

TEST(FormatsPickle, CustomClassNamesTheClass) {
  Pickle p;
  p.proto(2).global("mymodule", "Net").put(0).empty_tuple().op(0x81).stop();
  expect_error(p, "contains a pickled Python object of class 'mymodule.Net'");
  expect_error(p, "normdoctor reads tensors, tuples, lists and dicts of tensors");
}

TEST(FormatsPickle, UnsupportedTorchObjectsGetHints) {
  Pickle numpy;
  numpy.proto(2).global("numpy.core.multiarray", "_reconstruct").stop();
  expect_error(numpy, "torch.from_numpy");
  Pickle sparse;
  sparse.proto(2).global("torch._utils", "_rebuild_sparse_tensor").stop();
  expect_error(sparse, "to_dense");
  Pickle quant;
  quant.proto(2).global("torch", "QInt8Storage").stop();
  expect_error(quant, "quantized");
  Pickle module;
  module.proto(2).global("torch.nn.modules.linear", "Linear").stop();
  expect_error(module, "'torch.nn.modules.linear.Linear'");
  Pickle stack_global;
  stack_global.proto(4).short_str("os").short_str("system").op(0x93).stop();
  expect_error(stack_global, "'os.system'");
}

TEST(FormatsPickle, MessagesAreValidUtf8) {
  // A class name with bytes that are not UTF-8 is escaped in the message, which
  // ends up in JSON reports.
  Pickle p;
  p.proto(2).global("my\xffmod", "N\x01" "et\xc3\xa9").stop();
  expect_error(p, "class 'my\\xffmod.N\\x01et\xc3\xa9'");
  try {
    p.parse();
  } catch (const nd::Error& e) {
    EXPECT_TRUE(nd::formats::valid_utf8(e.what()));
  }
  EXPECT_EQ(nd::formats::printable("ok \xe2\x82\xac \xed\xa0\x80 \t"), "ok \xe2\x82\xac \\xed\\xa0\\x80 \\x09");
  EXPECT_FALSE(nd::formats::valid_utf8("\xc0\xaf"));  // overlong '/'
  EXPECT_TRUE(nd::formats::valid_utf8("\xf0\x9f\x98\x80"));
}

TEST(FormatsPickle, BareGlobalOrStorageIsRefused) {
  Pickle g;
  g.proto(2).global("collections", "OrderedDict").stop();
  expect_error(g, "'collections.OrderedDict' itself");
  Pickle s;
  s.proto(2).storage("FloatStorage", "0", 4).stop();
  expect_error(s, "bare storage");
}

TEST(FormatsPickle, TensorOutsideItsStorageIsRefused) {
  Pickle p;
  p.proto(2).tensor2d("FloatStorage", "0", 5, 0, 2, 3, 3, 1).stop();  // needs 6 elements
  expect_error(p, "reads element 5 of a storage of 5 elements");
  Pickle off;
  off.proto(2).tensor2d("FloatStorage", "0", 6, 1, 2, 3, 3, 1).stop();
  expect_error(off, "storage of 6 elements");
}

TEST(FormatsPickle, ValidateTensorRefEdges) {
  nd::formats::TensorRef t;
  t.storage_key = "0";
  t.storage_numel = 0;
  t.sizes = {0, 3};
  t.strides = {3, 1};
  EXPECT_NO_THROW(nd::formats::validate_tensor_ref(t, "f"));  // empty tensor, empty storage
  t.sizes = {};
  t.strides = {};
  EXPECT_THROW(nd::formats::validate_tensor_ref(t, "f"), nd::Error);  // a scalar needs 1 element
  t.storage_numel = 1;
  EXPECT_NO_THROW(nd::formats::validate_tensor_ref(t, "f"));
  t.sizes = {2};
  t.strides = {-1};
  EXPECT_THROW(nd::formats::validate_tensor_ref(t, "f"), nd::Error);
  t.sizes = {INT64_MAX, INT64_MAX};
  t.strides = {1, 1};
  t.storage_numel = INT64_MAX;
  EXPECT_THROW(nd::formats::validate_tensor_ref(t, "f"), nd::Error);
  t.sizes = {3};
  t.strides = {1, 1};
  EXPECT_THROW(nd::formats::validate_tensor_ref(t, "f"), nd::Error);
}

TEST(FormatsPickle, MalformedOpcodeSequences) {
  expect_error(Pickle().proto(2), "no STOP");
  expect_error(Pickle().proto(2).stop(), "empty stack");
  expect_error(Pickle().proto(2).append().stop(), "stack underflow");
  expect_error(Pickle().proto(2).int1(1).int1(2).append().stop(), "not a list");
  expect_error(Pickle().proto(2).empty_dict().int1(1).setitem().stop(), "stack underflow");
  expect_error(Pickle().proto(2).get(7).stop(), "memo key 7");
  expect_error(Pickle().proto(2).tuple().stop(), "no MARK");
  expect_error(Pickle().proto(2).empty_dict().mark().int1(1).setitems().stop(), "odd number");
  expect_error(Pickle().proto(9).stop(), "protocol 9");
  expect_error(Pickle().proto(2).op(0xff).stop(), "unsupported pickle opcode 0xff");
  expect_error(Pickle().proto(2).long1(std::string(9, '\1')).stop(), "does not fit in 64 bits");
  expect_error(Pickle().proto(2).str("\xff\xfe").stop(), "UTF-8");
  expect_error(Pickle().proto(2).op('X').le(1000, 4).raw("abc"), "truncated");
  expect_error(Pickle().proto(2).int1(1).empty_tuple().reduce().stop(), "not a callable");
  expect_error(Pickle().proto(2).global("collections", "OrderedDict").int1(3).reduce().stop(),
               "expects a tuple");
  // A mark hides what is below it.
  expect_error(Pickle().proto(2).empty_list().mark().append().stop(), "stack underflow");
}

TEST(FormatsPickle, SelfReferenceAndExpansionAreBounded) {
  // l = []; l.append(l)
  Pickle cycle;
  cycle.proto(2).empty_list().put(0).get(0).append().stop();
  expect_error(cycle, "nested deeper than");
  // a0 = [1, 1]; a1 = [a0, a0]; ... a39: 2^40 nodes once expanded
  Pickle bomb;
  bomb.proto(2).mark().int1(1).op('2').op('l');
  for (int i = 0; i < 40; ++i) bomb.op('2').op(0x86);
  bomb.stop();
  expect_error(bomb, "once expanded");
}

TEST(FormatsPickle, LimitsAreConfigurable) {
  Pickle p;
  p.proto(2).mark();
  for (int i = 0; i < 20; ++i) p.int1(static_cast<uint8_t>(i));
  p.op('l').stop();
  auto run = [&p](const nd::formats::PickleLimits& limits) {
    return parse_torch_pickle(reinterpret_cast<const uint8_t*>(p.b.data()), p.b.size(), "batch.pt", limits);
  };
  EXPECT_EQ(run({}).items.size(), 20u);
  nd::formats::PickleLimits few_objects;
  few_objects.max_objects = 10;
  EXPECT_THROW(run(few_objects), nd::Error);
  nd::formats::PickleLimits few_nodes;
  few_nodes.max_nodes = 10;
  EXPECT_THROW(run(few_nodes), nd::Error);
  nd::formats::PickleLimits shallow;
  shallow.max_depth = 0;
  EXPECT_THROW(run(shallow), nd::Error);
}

TEST(FormatsPickle, EveryTruncationIsAnError) {
  Pickle p;
  p.proto(2).empty_list().put(0).mark();
  p.tensor2d("FloatStorage", "0", 6, 0, 2, 3, 3, 1);
  p.tensor2d("LongStorage", "1", 4, 0, 2, 2, 2, 1);
  p.appends().stop();
  ASSERT_NO_THROW(p.parse());
  for (std::size_t n = 0; n < p.b.size(); ++n) {
    const std::string cut = p.b.substr(0, n);
    EXPECT_THROW(parse_torch_pickle(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), "cut"),
                 nd::Error)
        << "prefix of " << n << " bytes";
  }
}

TEST(FormatsPickle, GarbageNeverCrashes) {
  // Random bytes and random mutations of a valid pickle: a value or nd::Error.
  Pickle valid;
  valid.proto(2).empty_dict().put(0).mark().str("x");
  valid.tensor2d("FloatStorage", "0", 6, 0, 2, 3, 3, 1).setitems().stop();
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes;
    if (iter % 2 == 0) {
      bytes = valid.b;
      const int edits = 1 + static_cast<int>(next() % 4);
      for (int e = 0; e < edits; ++e) bytes[next() % bytes.size()] = static_cast<char>(next());
    } else {
      bytes.resize(next() % 64);
      for (auto& c : bytes) c = static_cast<char>(next());
      if (!bytes.empty()) bytes[0] = static_cast<char>(0x80);
    }
    try {
      parse_torch_pickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "fuzz");
    } catch (const nd::Error&) {
    }
  }
}

}  // namespace

}  // namespace nd_test_formats_pickle_test
