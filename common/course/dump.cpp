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
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

namespace course {

namespace fs = std::filesystem;

namespace {

// A name an earlier run may have written: a plain .npy file name in the folder itself, so a
// doctored manifest cannot send the clean-up anywhere else.
bool is_dump_file_name(const std::string& name) {
  return name.size() > 4 && name.ends_with(".npy") && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;  // JSON's \u0000 would cut the name short
}

// The files an earlier run lists in `dir`: manifest.json's arrays and INCOMPLETE.txt's lines.
// Sets `problem` when a listing exists but is not the course's.
std::set<std::string> files_of_earlier_run(const fs::path& dir, std::string& problem) {
  std::set<std::string> files;
  std::error_code ec;
  if (fs::exists(dir / kDumpManifest, ec)) {
    std::ifstream in(dir / kDumpManifest);
    const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!m.is_object() || !m.contains("arrays") || !m["arrays"].is_array()) {
      problem = (dir / kDumpManifest).string() + " is not a dump manifest of the course";
      return files;
    }
    for (const auto& a : m["arrays"]) {
      if (a.is_object() && a.contains("file") && a["file"].is_string())
        files.insert(a["file"].get<std::string>());
    }
  }
  if (fs::exists(dir / kDumpJournal, ec)) {
    std::ifstream in(dir / kDumpJournal);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != '#') files.insert(line);
    }
  }
  return files;
}

// Appends one line to the journal, checking the write as every output of the course does.
void append_line(const fs::path& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    throw WriteError("cannot write " + path.string() + ": " + std::strerror(err));
  }
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int write_err = errno;
  const int closed = ::close(fd);
  const int close_err = errno;
  if (n != static_cast<ssize_t>(text.size()) || closed != 0) {
    const int err = n < 0 ? write_err : n != static_cast<ssize_t>(text.size()) ? ENOSPC : close_err;
    throw WriteError("cannot write " + path.string() + ": " + std::strerror(err));
  }
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
  std::string problem;
  const std::set<std::string> old = files_of_earlier_run(dir_, problem);
  if (!problem.empty()) throw WriteError("cannot dump into " + dir_.string() + ": " + problem);
  // The new journal comes first and already lists the earlier run's files: whenever this run
  // stops from here on, every array in the folder is listed somewhere, and the next run can
  // clear it. Only then do the earlier manifest and files go.
  std::string journal =
      "# " + source_.chapter +
      " was writing this dump and did not finish (interrupted?).\n"
      "# The files listed below (some may be gone already) are removed by the next run with\n"
      "# --dump here.\n";
  for (const std::string& f : old) journal += f + "\n";
  write_file_atomically(dir_ / kDumpJournal, journal);
  std::error_code ec;
  fs::remove(dir_ / kDumpManifest, ec);
  for (const std::string& f : old) {
    // A plain file or link inside the folder, never a folder, whatever a manifest says.
    if (!is_dump_file_name(f)) continue;
    const fs::file_type type = fs::symlink_status(dir_ / f, ec).type();
    if (type == fs::file_type::regular || type == fs::file_type::symlink) fs::remove(dir_ / f, ec);
  }
}

void Dumper::store(Entry entry, std::size_t bytes,
                   const std::function<void(const fs::path&)>& write) {
  if (!enabled()) return;
  begin();
  // Listed before it is written: a run stopped between the two leaves a name in the journal
  // for a file that does not exist (harmless), never a file that no list names.
  append_line(dir_ / kDumpJournal, file_of(entry.name));
  write(dir_ / file_of(entry.name));
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
  text += "  \"written_by\": " + js("Attention, Step by Step: course::Dumper") + ",\n";
  text += "  \"chapter\": " + js(source_.chapter) + ",\n";
  text += "  \"seed\": " + js(source_.seed) + ",\n";
  text += "  \"options\": {";
  for (std::size_t i = 0; i < source_.options.size(); ++i) {
    text += (i ? ",\n    " : "\n    ") + js(source_.options[i].first) + ": " +
            js(source_.options[i].second);
  }
  text += source_.options.empty() ? "},\n" : "\n  },\n";
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
  write_file_atomically(dir_ / kDumpManifest, text);
  std::error_code ec;
  fs::remove(dir_ / kDumpJournal, ec);
}

void Dumper::abandon() noexcept {
  if (!enabled() || !begun_) return;
  std::error_code ec;
  for (const Entry& e : written_) fs::remove(dir_ / file_of(e.name), ec);
  fs::remove(dir_ / kDumpJournal, ec);
  written_.clear();
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
