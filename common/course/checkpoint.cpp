// checkpoint.cpp: --save writes a model's state_dict through a Dumper; --load reads it back,
// checking everything before it writes anything.
#include "course/checkpoint.hpp"

#include "course/dump.hpp"
#include "course/files.hpp"
#include "course/folder_lock.hpp"
#include "course/npy.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
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
  FolderLock lock;  ///< the folder, locked for reading while the manifest is in use
  std::map<std::string, std::string> options;
  std::map<std::string, SavedTensor> tensors;  ///< the arrays with a state_dict key, by key
  std::vector<std::string> keys;               ///< those keys, in the manifest's order
  std::set<std::string> other_files;           ///< the files of the arrays without a key
  nlohmann::json training;                     ///< "training", or null when it was not saved
};

constexpr std::size_t kMaxManifest = 64u << 20;  // far above any manifest the course writes

// The manifest of a finished checkpoint of `chapter` in `dir`, or CheckpointError.
Manifest read_manifest(const fs::path& dir, const std::string& chapter) {
  std::error_code ec;
  const fs::file_status folder = fs::status(dir, ec);
  if (!fs::exists(folder)) refuse(dir.string() + ": no such folder: no checkpoint was saved there");
  if (!fs::is_directory(folder)) refuse(dir.string() + ": not a folder: a checkpoint is a folder");
  Manifest out;
  try {
    out.lock = FolderLock(dir, FolderLock::Mode::read);
  } catch (const std::exception& e) {
    refuse(e.what());  // another run is writing it: wait, or it would be read half old, half new
  }
  if (fs::exists(fs::symlink_status(dir / kDumpJournal, ec))) {
    refuse((dir / kDumpJournal).string() +
           ": the run that saved this checkpoint did not finish (it was stopped while writing): "
           "save it again");
  }
  const fs::path path = dir / kDumpManifest;
  if (!fs::exists(fs::symlink_status(path, ec))) {
    refuse(path.string() + ": missing: " + dir.string() + " is not a checkpoint of the course");
  }
  std::string text;
  try {
    text = read_regular_file(path, kMaxManifest);
  } catch (const std::runtime_error& e) {
    refuse(e.what());
  }
  const nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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
    if (!a.contains("state_dict_key")) {  // an extra array (eval_src, a moment): not a weight
      out.other_files.insert(a["file"].get<std::string>());
      continue;
    }
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
  if (m.contains("training")) out.training = m["training"];
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
    a = read_npy(path, NpySource::regular_file);
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

namespace {

std::string hex_word(std::uint64_t w) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016" PRIx64, w);
  return text;
}

// A word hex_word wrote: "0x" and 16 hex digits, or nothing.
std::optional<std::uint64_t> parse_hex_word(const nlohmann::json& j) {
  if (!j.is_string()) return std::nullopt;
  const std::string t = j.get<std::string>();
  if (t.size() != 18 || !t.starts_with("0x") ||
      !std::all_of(t.begin() + 2, t.end(), [](char c) { return std::isxdigit(c) != 0; })) {
    return std::nullopt;
  }
  return std::stoull(t.substr(2), nullptr, 16);
}

std::string moment_file(const std::string& moment, std::string key) {
  std::replace(key.begin(), key.end(), '.', '_');
  return "optimizer_" + moment + "_" + key;
}

// The moments of every key, stacked as its weight is, and the "training" object naming them.
void dump_training_state(Dumper& dump, const std::vector<attn::Parameter<const float>>& params,
                         const TrainingState& t) {
  require(t.adam.size() == params.size(), "save_checkpoint", [&] {
    return "the training state has " + std::to_string(t.adam.size()) + " optimiser entries for " +
           std::to_string(params.size()) + " parameter blocks";
  });
  for (std::size_t i = 0; i < params.size(); ++i) {
    const attn::AdamStateOf<float>& a = t.adam[i];
    require(a.key == params[i].key && a.first == params[i].first &&
                a.exp_avg.rows() == params[i].value.rows() &&
                a.exp_avg.cols() == params[i].value.cols() &&
                a.exp_avg_sq.rows() == a.exp_avg.rows() && a.exp_avg_sq.cols() == a.exp_avg.cols(),
            "save_checkpoint",
            [&] { return "optimiser entry " + std::to_string(i) + " is not " + params[i].key; });
  }
  nlohmann::json files = {{"exp_avg", nlohmann::json::object()},
                          {"exp_avg_sq", nlohmann::json::object()}};
  std::vector<float> stacked;
  for (const StateDictTensor& tensor : state_dict_layout(params)) {
    for (const char* moment : {"exp_avg", "exp_avg_sq"}) {
      stacked.clear();
      for (const std::size_t b : tensor.blocks) {
        const attn::Matrix& m =
            std::string(moment) == "exp_avg" ? t.adam[b].exp_avg : t.adam[b].exp_avg_sq;
        stacked.insert(stacked.end(), m.data(), m.data() + m.size());  // row-major: C order
      }
      const std::string name = moment_file(moment, tensor.key);
      dump(name, tensor.shape, stacked);
      files[moment][tensor.key] = name + ".npy";
    }
  }
  const std::int64_t adam_step = t.adam.empty() ? 0 : t.adam.front().step;
  nlohmann::json words = nlohmann::json::array();
  for (const std::uint64_t w : t.batches.words) words.push_back(hex_word(w));
  nlohmann::json spare = nullptr;
  if (t.batches.has_spare) spare = hex_word(std::bit_cast<std::uint64_t>(t.batches.spare));
  dump.record("training", nlohmann::json{{"step", t.step},
                                         {"steps", t.steps},
                                         {"adam_step", adam_step},
                                         {"batches_rng", {{"words", words}, {"spare", spare}}},
                                         {"exp_avg", files["exp_avg"]},
                                         {"exp_avg_sq", files["exp_avg_sq"]}}
                              .dump());
}

void save(const fs::path& dir, const DumpSource& source,
          const std::vector<attn::Parameter<const float>>& params, const TrainingState* training,
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
  // The earlier checkpoint in `dir` stays whole until the new one is complete (the Dumper
  // writes beside it and moves the files in at finish()): a save that fails keeps it.
  Dumper dump(dir, source);
  try {
    dump_parameters(dump, params);
    if (training) dump_training_state(dump, params, *training);
    if (extras) extras(dump);
    dump.finish();
  } catch (...) {
    dump.abandon();  // no array of a failed save stays, and no manifest says it finished
    throw;
  }
}

}  // namespace

void save_checkpoint(const fs::path& dir, const DumpSource& source,
                     const std::vector<attn::Parameter<const float>>& params,
                     const CheckpointExtras& extras) {
  save(dir, source, params, nullptr, extras);
}

void save_checkpoint(const fs::path& dir, const DumpSource& source,
                     const std::vector<attn::Parameter<const float>>& params,
                     const TrainingState& training, const CheckpointExtras& extras) {
  save(dir, source, params, &training, extras);
}

namespace {

// The training state of a checkpoint whose weights fit `layout`, every number checked.
TrainingState read_training_state(const fs::path& dir, const nlohmann::json& j,
                                  const std::set<std::string>& listed,
                                  const std::vector<StateDictTensor>& layout,
                                  const std::vector<attn::Parameter<float>>& params) {
  const std::string where = (dir / kDumpManifest).string() + ": the training state ";
  const auto bad = [&](const std::string& why) { refuse(where + why); };
  const auto count = [&](const char* name) {
    if (!j.contains(name) || !j[name].is_number_integer())
      bad("has no whole number \"" + std::string(name) + "\"");
    return j[name].get<std::int64_t>();
  };
  if (!j.is_object()) bad("is not an object");
  TrainingState t;
  t.step = count("step");
  t.steps = count("steps");
  const std::int64_t adam_step = count("adam_step");
  if (t.step < 1 || t.step > t.steps || adam_step != t.step) {
    bad("says step " + std::to_string(t.step) + " of " + std::to_string(t.steps) +
        " with Adam at step " + std::to_string(adam_step) +
        ": a saved run has taken 1 to steps steps, and Adam one per step");
  }
  const nlohmann::json rng = j.contains("batches_rng") ? j["batches_rng"] : nlohmann::json();
  if (!rng.is_object() || !rng.contains("words") || !rng["words"].is_array() ||
      rng["words"].size() != 4 || !rng.contains("spare")) {
    bad("has no \"batches_rng\" with four \"words\" and a \"spare\"");
  }
  for (std::size_t i = 0; i < 4; ++i) {
    const std::optional<std::uint64_t> w = parse_hex_word(rng["words"][i]);
    if (!w) bad("has a stream word that is not 0x and 16 hex digits");
    t.batches.words[i] = *w;
  }
  if (t.batches.words == std::array<std::uint64_t, 4>{}) bad("has a stream of four zero words");
  if (!rng["spare"].is_null()) {
    const std::optional<std::uint64_t> bits = parse_hex_word(rng["spare"]);
    if (!bits || !std::isfinite(std::bit_cast<double>(*bits)))
      bad("has a spare that is not a finite double");
    t.batches.has_spare = true;
    t.batches.spare = std::bit_cast<double>(*bits);
  }
  std::vector<std::vector<float>> moments[2];  // per layout tensor: exp_avg, exp_avg_sq
  std::set<std::string> used;                  // the moment files named so far
  const char* names[2] = {"exp_avg", "exp_avg_sq"};
  for (int k = 0; k < 2; ++k) {
    if (!j.contains(names[k]) || !j[names[k]].is_object())
      bad("has no \"" + std::string(names[k]) + "\" files");
    for (const StateDictTensor& tensor : layout) {
      const nlohmann::json& file =
          j[names[k]].contains(tensor.key) ? j[names[k]][tensor.key] : nlohmann::json();
      if (!file.is_string() || !is_plain_npy_name(file.get<std::string>())) {
        bad("names no .npy file in the folder for the " + std::string(names[k]) + " of " +
            tensor.key);
      }
      // One of the manifest's arrays that is no weight, and no other moment's file.
      if (!listed.contains(file.get<std::string>()) ||
          !used.insert(file.get<std::string>()).second) {
        bad("names " + file.get<std::string>() + " for the " + std::string(names[k]) + " of " +
            tensor.key + ", which is not an array of its own in the manifest's list");
      }
      moments[k].push_back(read_tensor(
          dir, std::string(names[k]) + " of " + tensor.key,
          {.file = file.get<std::string>(), .dtype = "float32", .shape = tensor.shape}));
      if (k == 1 && std::any_of(moments[k].back().begin(), moments[k].back().end(),
                                [](float v) { return v < 0; })) {
        refuse((dir / file.get<std::string>()).string() + " (exp_avg_sq of " + tensor.key +
               "): a second moment is negative, which no run of Adam makes");
      }
    }
  }
  t.adam.resize(params.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    std::size_t at = 0;  // where the block starts in the tensor's C-order elements
    for (const std::size_t b : layout[i].blocks) {
      const auto& p = params[b].value;
      attn::AdamStateOf<float>& a = t.adam[b];
      a.key = params[b].key;
      a.first = params[b].first;
      a.step = adam_step;
      a.exp_avg.resize(p.rows(), p.cols());
      a.exp_avg_sq.resize(p.rows(), p.cols());
      std::copy_n(moments[0][i].data() + at, p.size(), a.exp_avg.data());
      std::copy_n(moments[1][i].data() + at, p.size(), a.exp_avg_sq.data());
      at += static_cast<std::size_t>(p.size());
    }
  }
  return t;
}

}  // namespace

std::optional<TrainingState> load_checkpoint(const fs::path& dir, const std::string& chapter,
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

  // 4. The training state, if it was saved: read and checked as the weights are.
  std::optional<TrainingState> training;
  if (!m.training.is_null()) {
    training = read_training_state(dir, m.training, m.other_files, layout, params);
  }

  // 5. Only now into the model: the blocks of a key are consecutive runs of its C-order elements.
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const float* from = values[i].data();
    for (const std::size_t b : layout[i].blocks) {
      auto block = params[b].value;  // a copy of the Map: writable through a const list
      std::copy_n(from, block.size(), block.data());
      from += block.size();
    }
  }
  return training;
}

std::map<std::string, std::string> checkpoint_options(const fs::path& dir,
                                                      const std::string& chapter) {
  return read_manifest(dir, chapter).options;
}

std::string resume_problem(const std::string& what, const TrainingState& saved, std::int64_t steps,
                           std::int64_t stop_at, const std::string& advice) {
  if (stop_at > steps)
    return fmt::format("--stop-at {} is past the end of the schedule, step {}", stop_at, steps);
  const std::int64_t stop = stop_at > 0 ? stop_at : steps;
  if (stop <= saved.step) {
    return fmt::format("{} has trained {} steps already, and this run would stop at step {}: {}",
                       what, saved.step, stop, advice);
  }
  return "";
}

}  // namespace course
