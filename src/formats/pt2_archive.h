// Reading torch.export `.pt2` archives (torch.export.save, PyTorch 2.6+)
// without LibTorch: the zip layout, the serialized ExportedProgram
// (models/<name>.json, torch/_export/serde/schema.py), the payload configs of
// data/weights and data/constants, and the torch.save'd sample inputs.
// src/model/pt2_model.cpp turns the result into a runnable module.
//
// Archive layout (torch/export/pt2_archive/constants.py, PyTorch 2.13):
//   <root>/archive_format                  "pt2"
//   <root>/archive_version                 "0"
//   <root>/byteorder                       "little"
//   <root>/models/<name>.json              the ExportedProgram (schema_version {major, minor})
//   <root>/data/weights/<name>_weights_config.json    {"config": {fqn: PayloadMeta}}
//   <root>/data/weights/weight_<i>         raw storage bytes (or torch.save bytes when use_pickle)
//   <root>/data/constants/<name>_constants_config.json, tensor_<i>, custom_obj_<i>
//   <root>/data/sample_inputs/<name>.pt    torch.save((args, kwargs))
//   <root>/data/aotinductor/...            compiled code (AOTInductor packages)
// Older archives keep the weights as one torch.save'd dict in data/weights/<name>.pt.
//
// Every malformed input is an nd::Error (kind model_load, exit 3) naming the
// file and the part that is wrong; never a crash or an unbounded allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/dtype.h"
#include "formats/pickle.h"
#include "formats/zip_index.h"

namespace nd::formats {

/// The ExportedProgram schema major version this reader understands
/// (torch/_export/serde/schema.py SCHEMA_VERSION = (8, 20) in PyTorch 2.13;
/// majors change only with breaking changes, minors are compatible).
inline constexpr int kPt2SchemaMajor = 8;

/// One weight or constant of a payload config (schema.PayloadMeta).
struct Pt2Payload {
  std::string fqn;             ///< "layer1.0.bn1.weight", or a constant's name
  std::string record;          ///< record name without the archive root: "data/weights/weight_0"
  bool is_param = false;
  bool use_pickle = false;     ///< the record is torch.save bytes of the tensor
  bool requires_grad = false;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;   ///< in elements
  int64_t storage_offset = 0;     ///< in elements
  uint64_t record_bytes = 0;      ///< bytes of the record (the storage, for raw payloads)
};

/// What a `.pt2` archive holds, checked, with the chosen model's program parsed.
struct Pt2Archive {
  std::string source;          ///< the file, for messages
  std::string root;            ///< record prefix ("model/"), possibly empty
  std::string archive_version; ///< "0" for PyTorch 2.6 to 2.13
  std::vector<std::string> models;  ///< names with models/<name>.json
  std::string model_name;      ///< the one read ("model" when several)
  nlohmann::json program;      ///< models/<name>.json (schema.ExportedProgram)
  int schema_major = 0, schema_minor = 0;
  std::string torch_version;   ///< the exporting PyTorch, "" when not recorded
  std::vector<Pt2Payload> weights;    ///< from data/weights/<name>_weights_config.json
  std::vector<Pt2Payload> constants;  ///< tensors of data/constants/<name>_constants_config.json
  std::vector<std::string> custom_objects;  ///< constants that are script objects (not supported)
  std::string legacy_weights;   ///< "data/weights/<name>.pt" in older archives, else ""
  std::string legacy_constants; ///< "data/constants/<name>.pt" in older archives, else ""
  std::string sample_inputs;    ///< "data/sample_inputs/<name>.pt" when present and non-empty
  std::map<std::string, ZipEntry> entries;  ///< by record name without the root
};

/// True when the zip entries are those of a `.pt2` archive: an
/// `archive_format` record at the top or under one root folder.
bool is_pt2_layout(const std::vector<ZipEntry>& entries);

/// Reads and checks the archive: its format record ("pt2"), byte order,
/// an AOTInductor package without a graph (says so), the model JSON
/// (schema_version major kPt2SchemaMajor, else an error naming both), the
/// graph's required fields, and the payload configs against the records.
/// `model` picks one of several programs ("" = "model", else the only one).
/// Throws nd::Error (model_load) naming `source`.
Pt2Archive read_pt2_archive(const ReadAt& read, uint64_t file_size, std::string_view source,
                            const std::string& model = "");
/// The same over a buffer in memory (tests and fuzzing).
Pt2Archive read_pt2_archive(const uint8_t* data, std::size_t size, std::string_view source,
                            const std::string& model = "");

/// The bytes of one zip entry, checked against its local header: stored
/// (what torch.export.save writes) or deflated (an archive re-packed by a zip
/// tool, which PyTorch's own reader also accepts; inflated with zlib and
/// checked against the size and CRC-32 the central directory records).
/// At most `max_bytes`. Throws nd::Error (model_load) naming `source`.
std::vector<uint8_t> read_zip_record(const ReadAt& read, uint64_t file_size, const ZipEntry& entry,
                                     std::string_view source, uint64_t max_bytes = uint64_t(1) << 34);

/// Where an entry's (stored or compressed) bytes start in the file (after its local header).
uint64_t zip_record_data_offset(const ReadAt& read, uint64_t file_size, const ZipEntry& entry,
                                std::string_view source);

/// A torch.save archive held in memory (a record of a `.pt2`): the unpickled
/// data.pkl and where each storage's bytes lie in the buffer.
struct TorchSaveBytes {
  PickleValue root;
  /// storage key ("0", "1", ...) -> (offset, size) in the buffer.
  std::map<std::string, std::pair<std::size_t, std::size_t>> storages;
};

/// Parses torch.save bytes (a zip with <root>/data.pkl and <root>/data/<key>).
/// Checks every tensor's storage against its record. Throws nd::Error
/// (model_load) naming `source`.
TorchSaveBytes parse_torch_save_bytes(const uint8_t* data, std::size_t size, std::string_view source);

/// The schema's ScalarType enum (schema.py: BYTE=1 ... BFLOAT16=13, UINT16=28,
/// FLOAT8E4M3FN=29, FLOAT8E5M2=30, UINT32=34, UINT64=35) as a DType; empty for
/// the ones normdoctor cannot name (complex half, other float8 flavours).
std::optional<DType> dtype_from_pt2_scalar_type(int64_t v);

/// nn_module_stack metadata ("key,path,type;key,path,type", commas inside
/// brackets kept, torch/_export/serde/serialize.py) as (path, type) pairs,
/// outermost first, with the path in named_modules() spelling ("layers.0";
/// older "L['self'].layers[0]" / "getattr(L['self'].layers, '0')" forms too).
/// The root entry (path "") is kept.
std::vector<std::pair<std::string, std::string>> parse_nn_module_stack(std::string_view s);

}  // namespace nd::formats
