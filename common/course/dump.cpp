// dump.cpp: --dump DIR writes named intermediates as .npy, then a manifest of them.
#include "course/dump.hpp"

#include "attn/layers/parameters.hpp"
#include "attn/layers/transformer.hpp"
#include "course/files.hpp"
#include "course/npy.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace course {

namespace fs = std::filesystem;

namespace {

// A name an earlier run may have written: a plain .npy file name in the folder itself, so a
// doctored manifest cannot send the clean-up anywhere else.
bool is_dump_file_name(const std::string& name) {
  return name.size() > 4 && name.ends_with(".npy") && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;  // JSON's \u0000 would cut the name short
}

// What the course writes into its manifests and journals, and looks for before it trusts them.
constexpr const char* kWrittenBy = "Attention, Step by Step: course::Dumper";
constexpr const char* kJournalMark = " was moving a finished dump into this folder and was killed";

// The files an earlier run lists in `dir`: manifest.json's arrays and INCOMPLETE.txt's lines.
// Sets `problem` when a listing exists but is not the course's, or is not a file that can be
// read (a FIFO in its place would block the reader for good).
std::set<std::string> files_of_earlier_run(const fs::path& dir, std::string& problem) {
  constexpr std::size_t kMaxListing = 64u << 20;  // a manifest of a million arrays is smaller
  std::set<std::string> files;
  std::error_code ec;
  try {
    if (fs::exists(fs::symlink_status(dir / kDumpManifest, ec))) {
      const nlohmann::json m =
          nlohmann::json::parse(read_regular_file(dir / kDumpManifest, kMaxListing), nullptr,
                                /*allow_exceptions=*/false);
      // The course's own mark: a manifest another program wrote may list files that are
      // not the course's to remove.
      if (!m.is_object() || !m.contains("written_by") || m["written_by"] != kWrittenBy ||
          !m.contains("arrays") || !m["arrays"].is_array()) {
        problem = (dir / kDumpManifest).string() +
                  " is not a dump manifest of the course: choose another folder";
        return files;
      }
      for (const auto& a : m["arrays"]) {
        if (a.is_object() && a.contains("file") && a["file"].is_string())
          files.insert(a["file"].get<std::string>());
      }
    }
    if (fs::exists(fs::symlink_status(dir / kDumpJournal, ec))) {
      std::istringstream in(read_regular_file(dir / kDumpJournal, kMaxListing));
      std::string first;
      std::getline(in, first);
      if (!first.starts_with("# ") || !first.ends_with(kJournalMark)) {
        problem = (dir / kDumpJournal).string() +
                  " is not the journal of a dump of the course: choose another folder";
        return files;
      }
      for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] != '#') files.insert(line);
      }
    }
  } catch (const std::runtime_error& e) {
    problem = e.what();
  }
  return files;
}

// The files directly in `folder`, then the folder: a staging folder of this run, or one a run
// killed with -9 left behind (found under the lock, so no live run is using it).
void remove_staging_folder(const fs::path& folder) noexcept {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(folder, ec);
  if (fs::is_directory(status)) {
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      if (!e.is_directory(ec)) fs::remove(e.path(), ec);
    }
  }
  fs::remove(folder, ec);  // the folder once empty; a link or file of that name itself
}

std::string file_of(const std::string& name) { return name + ".npy"; }

}  // namespace

std::string check_dump_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};  // made fresh by the caller
  std::string problem;
  const std::set<std::string> listed = files_of_earlier_run(dir, problem);
  if (!problem.empty()) return problem;
  std::vector<std::string> foreign;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".npy") && !listed.contains(name)) foreign.push_back(name);
  }
  if (foreign.empty()) return {};
  std::sort(foreign.begin(), foreign.end());
  std::string shown;
  for (std::size_t i = 0; i < foreign.size() && i < 3; ++i) shown += (i ? ", " : "") + foreign[i];
  if (foreign.size() > 3) shown += ", ...";
  return dir.string() + " holds " + std::to_string(foreign.size()) +
         " .npy file(s) that no earlier dump of the course lists (" + shown +
         "); they would be mixed up with this run's arrays: choose an empty folder";
}

Dumper::Dumper(fs::path dir, DumpSource source)
    : dir_(std::move(dir)), source_(std::move(source)) {}

void Dumper::begin() {
  if (begun_) return;
  begun_ = true;
  try {
    lock_ = FolderLock(dir_, FolderLock::Mode::write);
  } catch (const std::exception& e) {  // busy, or no folder to lock
    throw WriteError("cannot dump into " + dir_.string() + ": " + e.what());
  }
  std::string problem;
  earlier_ = files_of_earlier_run(dir_, problem);
  if (!problem.empty()) throw WriteError("cannot dump into " + dir_.string() + ": " + problem);
  // Under the lock no other run writes here: a staging folder found now was left by a run that
  // was killed (-9) and is stale.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().filename().string().starts_with(kDumpStagingPrefix))
      remove_staging_folder(e.path());
  }
  staging_ = dir_ / (kDumpStagingPrefix + std::to_string(::getpid()));
  {
    const interrupt::HoldSignals hold;  // created and registered, or neither
    // A new folder or nothing: never one already there, nor a link planted under the name.
    if (!fs::create_directory(staging_, ec)) {
      throw WriteError("cannot write " + staging_.string() + ": " +
                       (ec ? ec.message() : std::string("something is in the way")));
    }
    staging_on_signal_ = std::make_unique<interrupt::RemoveFolderOnSignal>(staging_);
  }
}

void Dumper::store(Entry entry, std::size_t bytes,
                   const std::function<void(const fs::path&)>& write) {
  if (!enabled()) return;
  begin();
  write(staging_ / file_of(entry.name));
  written_.push_back(std::move(entry));
  const std::uint64_t before = bytes_;
  bytes_ += bytes;
  const std::uint64_t limit = source_.note_above_bytes;
  if (before <= limit && bytes_ > limit) {
    const std::string size = limit >= (1u << 20) ? std::to_string(limit >> 20) + " MiB"
                                                 : std::to_string(limit) + " bytes";
    std::cerr << source_.chapter << ": note: the dump in " << dir_.string() << " has passed "
              << size << " (these knobs make large arrays)\n";
  }
}

namespace {

std::vector<std::size_t> shape_of(Index rows, Index cols) {
  return {static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)};
}

}  // namespace

void Dumper::operator()(const std::string& name, const Matrix& m) {
  const std::vector<std::size_t> shape = shape_of(m.rows(), m.cols());
  (*this)(name, shape, {m.data(), static_cast<std::size_t>(m.size())});
}

void Dumper::operator()(const std::string& name, const MatrixD& m) {
  store({.name = name,
         .dtype = "float64",
         .state_dict_key = {},
         .shape = shape_of(m.rows(), m.cols())},
        static_cast<std::size_t>(m.size()) * sizeof(double),
        [&](const fs::path& path) { write_npy(path, m); });
}

void Dumper::operator()(const std::string& name, const RowVector& v) {
  const std::size_t shape[] = {static_cast<std::size_t>(v.size())};
  (*this)(name, shape, {v.data(), static_cast<std::size_t>(v.size())});
}

void Dumper::operator()(const std::string& name, const Batch& x) {
  const std::vector<std::size_t> shape = x.shape();
  (*this)(name, shape, {x.data().data(), static_cast<std::size_t>(x.data().size())});
}

void Dumper::operator()(const std::string& name, const BatchOf<bool>& allowed) {
  if (!enabled()) return;
  const Matrix ones = allowed.data().cast<float>();  // [B*n_q x n_k] of 1 and 0
  const std::vector<std::size_t> shape = allowed.shape();
  (*this)(name, shape, {ones.data(), static_cast<std::size_t>(ones.size())});
}

void Dumper::operator()(const std::string& name, std::span<const std::size_t> shape,
                        std::span<const float> data) {
  store({.name = name,
         .dtype = "float32",
         .state_dict_key = {},
         .shape = {shape.begin(), shape.end()}},
        data.size() * sizeof(float), [&](const fs::path& path) { write_npy(path, shape, data); });
}

namespace {

std::string file_name_of_key(std::string key) {
  std::replace(key.begin(), key.end(), '.', '_');
  return key;
}

}  // namespace

void Dumper::parameter(const std::string& state_dict_key, const Matrix& weight) {
  if (!enabled()) return;
  (*this)(file_name_of_key(state_dict_key), weight);
  written_.back().state_dict_key = state_dict_key;
}

void Dumper::parameter(const std::string& state_dict_key, const RowVector& vector) {
  if (!enabled()) return;
  (*this)(file_name_of_key(state_dict_key), vector);
  written_.back().state_dict_key = state_dict_key;
}

void Dumper::parameter(const std::string& state_dict_key, std::span<const std::size_t> shape,
                       std::span<const float> data) {
  if (!enabled()) return;
  (*this)(file_name_of_key(state_dict_key), shape, data);
  written_.back().state_dict_key = state_dict_key;
}

void Dumper::finish() {
  if (!enabled()) return;
  begin();  // a chapter that dumped nothing still leaves a clean folder and a manifest
  // Laid out by hand for reading (one option and one array per line); nlohmann-json writes
  // every value, so strings are escaped as JSON requires.
  const auto js = [](const auto& v) { return nlohmann::json(v).dump(); };
  std::string text = "{\n";
  text += "  \"written_by\": " + js(kWrittenBy) + ",\n";
  text += "  \"chapter\": " + js(source_.chapter) + ",\n";
  text += "  \"seed\": " + js(source_.seed) + ",\n";
  text += "  \"options\": {";
  for (std::size_t i = 0; i < source_.options.size(); ++i) {
    text += (i ? ",\n    " : "\n    ") + js(source_.options[i].first) + ": " +
            js(source_.options[i].second);
  }
  text += source_.options.empty() ? "},\n" : "\n  },\n";
  for (const auto& [field, json] : fields_) text += "  " + js(field) + ": " + json + ",\n";
  text += "  \"arrays\": [";
  for (std::size_t i = 0; i < written_.size(); ++i) {
    const Entry& e = written_[i];
    std::string shape;
    for (std::size_t k = 0; k < e.shape.size(); ++k) shape += (k ? ", " : "") + js(e.shape[k]);
    text += (i ? ",\n    " : "\n    ") + std::string("{\"name\": ") + js(e.name) +
            ", \"file\": " + js(file_of(e.name)) + ", \"shape\": [" + shape +
            "], \"dtype\": " + js(e.dtype);
    if (!e.state_dict_key.empty()) text += ", \"state_dict_key\": " + js(e.state_dict_key);
    text += "}";
  }
  text += written_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  write_file_atomically(staging_ / kDumpManifest, text);
  publish();
}

void Dumper::record(const std::string& field, const std::string& json) {
  require(field != "written_by" && field != "chapter" && field != "seed" && field != "options" &&
              field != "arrays" &&
              std::none_of(fields_.begin(), fields_.end(),
                           [&](const auto& f) { return f.first == field; }),
          "Dumper::record", [&] { return "the manifest has a field " + field + " already"; });
  require(nlohmann::json::accept(json), "Dumper::record",
          [&] { return field + ": not the text of a JSON value"; });
  fields_.emplace_back(field, nlohmann::json::parse(json).dump());  // one line, as the rest
}

void Dumper::publish() {
  // The journal first lists both runs' files: if the program is killed (-9) in the middle,
  // every array in the folder is listed somewhere, and the next run can clear it.
  std::set<std::string> mine;
  for (const Entry& e : written_) mine.insert(file_of(e.name));
  std::string journal = "# " + source_.chapter + kJournalMark +
                        "\n# (kill -9, or the disk failed). The files listed below (some may be "
                        "gone already)\n# are removed by the next run with --dump here.\n";
  for (const std::string& f : earlier_) journal += f + "\n";
  for (const std::string& f : mine) journal += f + "\n";
  write_file_atomically(staging_ / kDumpJournal, journal);
  // A folder standing where a file goes would make its move fail: refused here, while the
  // earlier dump is still whole.
  std::error_code ec;
  for (const std::string& f : mine) {
    if (fs::is_directory(fs::symlink_status(dir_ / f, ec))) {
      throw WriteError("cannot write " + (dir_ / f).string() + ": a folder has that name");
    }
  }
  const interrupt::HoldSignals hold;  // Ctrl-C waits the few milliseconds this takes
  const auto fail = [&](const std::string& what, int err) {
    throw WriteError(what + ": " + std::strerror(err));
  };
  // 1. Every name the new dump adds to the folder is made now, as a second link to its staged
  //    file (or, where the file system has no links, an empty file): a new name can need room
  //    in the folder, which a full disk refuses. The journal comes first, so that a kill -9
  //    from here on leaves every name listed. Any failure is undone, and the earlier dump is
  //    whole again.
  std::vector<std::string> added;
  const auto undo = [&] {
    for (const std::string& f : added) fs::remove(dir_ / f, ec);
  };
  const auto add = [&](const std::string& name) {
    if (fs::exists(fs::symlink_status(dir_ / name, ec))) return;  // replaced in place below
    if (::link((staging_ / name).c_str(), (dir_ / name).c_str()) != 0) {
      const int err = errno;
      const bool no_links = err == EPERM || err == EOPNOTSUPP || err == EXDEV || err == EMLINK;
      const int fd = no_links ? ::open((dir_ / name).c_str(),
                                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666)
                              : -1;
      if (fd < 0) {
        const int why = no_links ? errno : err;
        undo();
        fail("cannot write " + (dir_ / name).string(), why);
      }
      ::close(fd);
    }
    added.push_back(name);
  };
  add(kDumpJournal);
  for (const std::string& f : mine) add(f);
  add(kDumpManifest);
  // 2. Only renames onto names that exist, and removals: nothing that needs room.
  const auto move = [&](const std::string& name) {
    if (std::rename((staging_ / name).c_str(), (dir_ / name).c_str()) != 0) {
      fail("cannot move " + (staging_ / name).string() + " to " + (dir_ / name).string(), errno);
    }
  };
  move(kDumpJournal);  // from here to its removal, readers see an unfinished folder
  for (const std::string& f : earlier_) {
    // A plain file or link inside the folder, never a folder, whatever a manifest says; one
    // this run writes again is replaced by the rename below instead.
    if (!is_dump_file_name(f) || mine.contains(f)) continue;
    const fs::file_type type = fs::symlink_status(dir_ / f, ec).type();
    if (type == fs::file_type::regular || type == fs::file_type::symlink) fs::remove(dir_ / f, ec);
  }
  for (const std::string& f : mine) move(f);
  move(kDumpManifest);
  fs::remove(dir_ / kDumpJournal, ec);
  remove_staging_folder(staging_);
  staging_on_signal_.reset();
  lock_ = FolderLock();
}

void Dumper::abandon() noexcept {
  if (!enabled() || !begun_) return;
  remove_staging_folder(staging_);  // the earlier dump in the folder was never touched
  staging_on_signal_.reset();
  written_.clear();
  lock_ = FolderLock();
}

std::string Dumper::summary() const {
  if (!enabled() || written_.empty()) return {};
  std::string s = "wrote " + std::to_string(written_.size()) + " arrays to " + dir_.string() + "/:";
  for (std::size_t i = 0; i < written_.size(); ++i) s += (i == 0 ? " " : ", ") + written_[i].name;
  return s + " (listed in " + kDumpManifest + ")";
}

// ---- A model's parameters ----------------------------------------------------------------------

template <typename T>
std::vector<StateDictTensor> state_dict_layout(const std::vector<attn::Parameter<T>>& params) {
  std::vector<StateDictTensor> tensors;
  std::map<std::string, std::size_t> position;  // key -> its index in tensors
  for (std::size_t i = 0; i < params.size(); ++i) {
    const attn::Parameter<T>& p = params[i];
    const auto [at, fresh] = position.try_emplace(p.key, tensors.size());
    if (fresh) tensors.push_back({.key = p.key, .shape = {}, .blocks = {}});
    StateDictTensor& t = tensors[at->second];
    const bool vector = fresh ? p.is_vector : params[t.blocks.front()].is_vector;
    const std::size_t end = t.shape.empty() ? 0 : t.shape[0];  // rows (elements) so far
    const auto rows = static_cast<std::size_t>(p.value.rows());
    const auto cols = static_cast<std::size_t>(p.value.cols());
    require(p.first >= 0 && static_cast<std::size_t>(p.first) == end && p.is_vector == vector &&
                (vector || fresh || t.shape[1] == cols),
            "state_dict_layout", [&] {
              return p.key + ": a block " + shape_str(p.value) + (p.is_vector ? " (vector)" : "") +
                     " at " + std::to_string(p.first) + " does not continue the " +
                     (vector ? "vector" : "matrix") + " of " + std::to_string(end) +
                     (vector ? " elements" : " rows") + " before it";
            });
    t.shape =
        vector ? std::vector<std::size_t>{end + cols} : std::vector<std::size_t>{end + rows, cols};
    t.blocks.push_back(i);
  }
  return tensors;
}

template std::vector<StateDictTensor> state_dict_layout(const std::vector<attn::Parameter<float>>&);
template std::vector<StateDictTensor> state_dict_layout(
    const std::vector<attn::Parameter<const float>>&);

void dump_parameters(Dumper& dump, const std::vector<attn::Parameter<const float>>& params) {
  if (!dump.enabled()) return;
  std::vector<float> stacked;
  for (const StateDictTensor& t : state_dict_layout(params)) {
    const auto& first = params[t.blocks.front()].value;
    if (t.blocks.size() == 1) {  // one block is the whole tensor: written from the model itself
      dump.parameter(t.key, t.shape, {first.data(), static_cast<std::size_t>(first.size())});
      continue;
    }
    // Row-major blocks stacked by rows (or elements) are the tensor's elements in C order.
    stacked.clear();
    for (const std::size_t b : t.blocks) {
      const auto& block = params[b].value;
      stacked.insert(stacked.end(), block.data(), block.data() + block.size());
    }
    dump.parameter(t.key, t.shape, stacked);
  }
}

void dump_parameters(Dumper& dump, const std::string& prefix, const attn::EncoderLayer& layer) {
  dump_parameters(dump, attn::parameters(layer, prefix));
}

void dump_parameters(Dumper& dump, const std::string& prefix, const attn::DecoderLayer& layer) {
  dump_parameters(dump, attn::parameters(layer, prefix));
}

}  // namespace course
