// checkpoint.cpp: --save writes a model's state_dict through a Dumper; --load reads it back,
// checking everything before it writes anything.
#include "course/checkpoint.hpp"

#include "course/dump.hpp"
#include "course/files.hpp"
#include "course/npy.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <set>
#include <system_error>
#include <utility>

namespace course {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const std::string& what) { throw CheckpointError(what); }

// "[64 x 32]" for a matrix, as the course prints shapes; "[64]" or "[2, 6, 32]" otherwise.
std::string shape_text(const std::vector<std::size_t>& shape) {
  if (shape.size() == 2) {
    return "[" + std::to_string(shape[0]) + " x " + std::to_string(shape[1]) + "]";
  }
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

// The index of element `flat` (C order) of an array of `shape`: "[3, 5]".
std::string index_text(const std::vector<std::size_t>& shape, std::size_t flat) {
  std::vector<std::size_t> index(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    index[k] = shape[k] ? flat % shape[k] : 0;
    flat = shape[k] ? flat / shape[k] : 0;
  }
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) s += (k ? ", " : "") + std::to_string(index[k]);
  return s + "]";
}

// "a, b, c" or "a, b, c and 4 more".
std::string listed(const std::vector<std::string>& keys) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(keys.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > shown) s += " and " + std::to_string(keys.size() - shown) + " more";
  return s;
}

// A .npy file directly in the folder: a doctored manifest cannot make the load read elsewhere.
bool is_plain_npy_name(const std::string& name) {
  return name.size() > 4 && name.ends_with(".npy") && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != ".." && name != ".";
}

struct SavedTensor {
  std::string file, dtype;
  std::vector<std::size_t> shape;
};

struct Manifest {
  std::map<std::string, std::string> options;
  std::map<std::string, SavedTensor> tensors;  ///< the arrays with a state_dict key, by key
  std::vector<std::string> keys;               ///< those keys, in the manifest's order
};

// The manifest of a finished checkpoint of `chapter` in `dir`, or CheckpointError.
Manifest read_manifest(const fs::path& dir, const std::string& chapter) {
  std::error_code ec;
  const fs::file_status folder = fs::status(dir, ec);
  if (!fs::exists(folder)) refuse(dir.string() + ": no such folder: no checkpoint was saved there");
  if (!fs::is_directory(folder)) refuse(dir.string() + ": not a folder: a checkpoint is a folder");
  if (fs::exists(fs::symlink_status(dir / kDumpJournal, ec))) {
    refuse((dir / kDumpJournal).string() +
           ": the run that saved this checkpoint did not finish (it was stopped while writing): "
           "save it again");
  }
  const fs::path path = dir / kDumpManifest;
  const fs::file_status file = fs::status(path, ec);
  if (!fs::exists(file)) {
    refuse(path.string() + ": missing: " + dir.string() + " is not a checkpoint of the course");
  }
  if (!fs::is_regular_file(file)) refuse(path.string() + ": not a file");

  std::ifstream in(path, std::ios::binary);
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto malformed = [&](const std::string& why) {
    refuse(path.string() + ": not a checkpoint manifest of the course (" + why + ")");
  };
  if (m.is_discarded()) malformed("not valid JSON");
  if (!m.is_object()) malformed("not a JSON object");
  if (!m.contains("chapter") || !m["chapter"].is_string()) malformed("no \"chapter\"");
  const std::string written_by = m["chapter"].get<std::string>();
  if (written_by != chapter) {
    refuse(path.string() + ": a checkpoint of " + (written_by.empty() ? "no chapter" : written_by) +
           ", not of " + chapter);
  }

  Manifest out;
  if (!m.contains("options") || !m["options"].is_object()) malformed("no \"options\" object");
  for (const auto& [name, value] : m["options"].items()) {
    if (!value.is_string()) malformed("option " + name + " is not a string");
    out.options[name] = value.get<std::string>();
  }
  if (!m.contains("arrays") || !m["arrays"].is_array()) malformed("no \"arrays\" list");
  for (const auto& a : m["arrays"]) {
    if (!a.is_object() || !a.contains("file") || !a["file"].is_string() || !a.contains("shape") ||
        !a["shape"].is_array() || !a.contains("dtype") || !a["dtype"].is_string()) {
      malformed("an array without its file, shape or dtype");
    }
    if (!a.contains("state_dict_key")) continue;  // an extra array (eval_src, ...): not a weight
    if (!a["state_dict_key"].is_string()) malformed("a state_dict_key that is not a string");
    const std::string key = a["state_dict_key"].get<std::string>();
    SavedTensor t{
        .file = a["file"].get<std::string>(), .dtype = a["dtype"].get<std::string>(), .shape = {}};
    for (const auto& d : a["shape"]) {
      if (!d.is_number_unsigned()) malformed("the shape of " + key + " is not a list of sizes");
      t.shape.push_back(d.get<std::size_t>());
    }
    if (!out.tensors.emplace(key, std::move(t)).second) malformed(key + " is listed twice");
    out.keys.push_back(key);
  }
  return out;
}

// The elements of one saved tensor, checked: float32, the shape the manifest says, every value
// finite. Its file name was checked with the manifest.
std::vector<float> read_tensor(const fs::path& dir, const std::string& key, const SavedTensor& t) {
  const fs::path path = dir / t.file;
  const std::string what = path.string() + " (" + key + ")";
  if (t.dtype != "float32") {
    refuse(what + ": the manifest says " + t.dtype + "; a checkpoint's tensors are float32");
  }
  NpyArray a;
  try {
    a = read_npy(path);
  } catch (const NpyError& e) {
    refuse(std::string(e.what()) + " (" + key + ")");  // the message starts with the file
  }
  if (a.dtype != NpyDtype::float32) {
    refuse(what + ": the file holds " +
           (a.dtype == NpyDtype::float64 ? "float64"
            : a.dtype == NpyDtype::int32 ? "int32"
                                         : "int64") +
           " numbers, but the manifest says float32");
  }
  if (a.shape != t.shape) {
    refuse(what + ": the file holds " + shape_text(a.shape) + " but the manifest says " +
           shape_text(t.shape));
  }
  std::vector<float> values(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double v = a.data[i];
    if (!std::isfinite(v)) {
      refuse(what + ": the entry at " + index_text(a.shape, i) + " is " +
             (std::isnan(v) ? "nan"
              : v > 0       ? "inf"
                            : "-inf") +
             ": the run that saved it had diverged");
    }
    values[i] = static_cast<float>(v);  // exact: a float32 widened to double and back
  }
  return values;
}

}  // namespace

void save_checkpoint(const fs::path& dir, const DumpSource& source,
                     const std::vector<attn::Parameter<const float>>& params,
                     const CheckpointExtras& extras) {
  require(!dir.empty(), "save_checkpoint", "the folder is empty: a checkpoint needs a folder");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw WriteError("cannot write " + dir.string() + ": not a folder");
  }
  if (const std::string problem = check_dump_folder(dir); !problem.empty()) {
    throw WriteError("cannot save a checkpoint: " + problem);
  }
  fs::create_directories(dir, ec);
  if (ec) throw WriteError("cannot write " + dir.string() + ": " + ec.message());
  Dumper dump(dir, source);
  try {
    dump_parameters(dump, params);
    if (extras) extras(dump);
    dump.finish();
  } catch (...) {
    dump.abandon();  // no array of a failed save stays, and no manifest says it finished
    throw;
  }
}

void load_checkpoint(const fs::path& dir, const std::string& chapter,
                     const std::vector<attn::Parameter<float>>& params) {
  const Manifest m = read_manifest(dir, chapter);
  const std::vector<StateDictTensor> layout = state_dict_layout(params);

  // 1. The same keys on both sides.
  std::vector<std::string> missing, extra;
  std::set<std::string> needed;
  for (const StateDictTensor& t : layout) {
    needed.insert(t.key);
    if (!m.tensors.contains(t.key)) missing.push_back(t.key);
  }
  for (const std::string& key : m.keys) {
    if (!needed.contains(key)) extra.push_back(key);
  }
  if (!missing.empty() || !extra.empty()) {
    std::string what = dir.string() + ": ";
    if (!missing.empty())
      what += "the checkpoint has no " + listed(missing) + ", which this model needs";
    if (!missing.empty() && !extra.empty()) what += "; ";
    if (!extra.empty()) {
      what += "the checkpoint has " + listed(extra) + ", which this model does not have";
    }
    refuse(what + " (was it saved with other options?)");
  }

  // 2. The same shapes, and files in the folder, from the manifest, before any file is opened.
  for (const StateDictTensor& t : layout) {
    const SavedTensor& saved = m.tensors.at(t.key);
    if (!is_plain_npy_name(saved.file)) {
      refuse((dir / kDumpManifest).string() + ": the file of " + t.key + ", \"" + saved.file +
             "\", is not a .npy file in the checkpoint's folder");
    }
    if (saved.shape != t.shape) {
      refuse(dir.string() + ": " + t.key + " is " + shape_text(saved.shape) +
             " in the checkpoint but " + shape_text(t.shape) + " in this model");
    }
  }

  // 3. Every tensor read and checked, held aside.
  std::vector<std::vector<float>> values;
  values.reserve(layout.size());
  for (const StateDictTensor& t : layout)
    values.push_back(read_tensor(dir, t.key, m.tensors.at(t.key)));

  // 4. Only now into the model: the blocks of a key are consecutive runs of its C-order elements.
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const float* from = values[i].data();
    for (const std::size_t b : layout[i].blocks) {
      auto block = params[b].value;  // a copy of the Map: writable through a const list
      std::copy_n(from, block.size(), block.data());
      from += block.size();
    }
  }
}

std::map<std::string, std::string> checkpoint_options(const fs::path& dir,
                                                      const std::string& chapter) {
  return read_manifest(dir, chapter).options;
}

}  // namespace course
