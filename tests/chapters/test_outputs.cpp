// Outputs a learner can trust, tried on the real chapter programs: a full disk, a full or closed
// stdout, Ctrl-C and kill during a render, two runs into one folder, stale and foreign dump
// folders, and the manifest that makes a dump self-describing.
#include "course/npy.hpp"

#include "chapter_run.hpp"
#include "chapters.hpp"  // kChapters, generated from ATTN_CHAPTERS

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace test_outputs {

using attn_test::contains;
using attn_test::read_file;

using attn_test::listing;

bool any_temporary(const fs::path& dir) {
  for (const std::string& n : listing(dir))
    if (n.ends_with(".tmp")) return true;
  return false;
}

// A whole PNG: signature first, IEND chunk last.
bool is_whole_png(const fs::path& p) {
  const std::string b = read_file(p);
  return b.size() > 20 && b.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0 &&
         b.compare(b.size() - 12, 12, std::string("\0\0\0\0IEND\xae\x42\x60\x82", 12)) == 0;
}

// The smallest whole PNG, as the printf command a stand-in gnuplot runs: signature, IEND chunk.
constexpr const char* kPrintPng = R"(printf '\211PNG\r\n\032\n\0\0\0\0IEND\256B`\202')";

// ---- Running a chapter as a process we can signal -----------------------------------------------

struct Process {
  pid_t pid = -1;
};

// Starts bin/<chapter> <args> with stdout and stderr into files in `dir`, and PATH starting with
// `path_first` when given (a stand-in gnuplot). The signals the course catches start at their
// default action, as a shell starts a foreground program.
Process start(const std::string& chapter, const std::vector<std::string>& args, const fs::path& dir,
              const fs::path& path_first = {}) {
  std::vector<std::string> argv_s = {attn_test::bin_dir() + "/" + chapter};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    if (var.rfind("PATH=", 0) == 0 && !path_first.empty())
      env_s.push_back("PATH=" + path_first.string() + ":" + var.substr(5));
    else
      env_s.push_back(var);
  }
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, (dir / "stdout.txt").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, (dir / "stderr.txt").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  Process p;
  const int r = ::posix_spawn(&p.pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (r != 0) p.pid = -1;
  return p;
}

// How the process ended: its exit code, or 128 + the signal that ended it (as a shell says).
int wait_for(const Process& p) {
  int status = 0;
  ::waitpid(p.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits up to 20 s for `file` to exist and hold something.
bool appears(const fs::path& file) {
  for (int i = 0; i < 2000; ++i) {
    if (fs::exists(file) && fs::file_size(file) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool process_gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (::kill(pid, 0) != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A folder holding a stand-in `gnuplot` that answers --version and draws the first `quick`
// figures at once (a tiny whole PNG), then, asked for the next, writes its pid to `pid_file`
// and sleeps: a render that is still running when the signal comes.
fs::path slow_gnuplot(const fs::path& dir, const fs::path& pid_file, int quick = 0) {
  const fs::path bin = dir / "fake-bin";
  fs::create_directories(bin);
  {
    std::ofstream f(bin / "gnuplot");
    f << "#!/bin/sh\n"
         "[ \"$1\" = --version ] && { echo 'gnuplot 5.4 (stand-in)'; exit 0; }\n"
         "count='"
      << (bin / "renders").string()
      << "'\n"
         "echo x >> \"$count\"\n"
         "if [ $(wc -l < \"$count\") -le "
      << quick
      << " ]; then\n"
         "  "
      << kPrintPng
      << "; exit 0\n"
         "fi\n"
         "echo $$ > '"
      << pid_file.string()
      << "'\n"
         "exec sleep 60\n";
  }
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  return bin;
}

// ---- A full disk --------------------------------------------------------------------------------

// Whether this machine lets a test mount a 16 KiB tmpfs in a private mount namespace (root, or
// unprivileged user namespaces): then a full disk is a real ENOSPC.
bool can_mount_small_disk() {
  return std::system("unshare -rm sh -c 'mount -t tmpfs -o size=16k tmpfs /tmp' "
                     ">/dev/null 2>&1") == 0;
}

// Runs `chapter args` with its output folders on a 16 KiB file system mounted at `disk` (only
// inside the child's namespace), and returns what the shell printed: the chapter's stderr,
// then "exit=<code>", then the files left on the small disk, one per line.
std::string run_on_small_disk(const std::string& chapter, const std::string& args,
                              const fs::path& disk, const fs::path& dir) {
  fs::create_directories(disk);
  const fs::path script = dir / "small_disk.sh", out = dir / "small_disk.txt";
  std::ofstream(script) << "mount -t tmpfs -o size=16k tmpfs '" << disk.string()
                        << "' || exit 99\ncd '" << disk.string() << "'\n'" << attn_test::bin_dir()
                        << "/" << chapter << "' " << args << " >/dev/null\n"
                        << "echo \"exit=$?\"\nfind . -type f | sort\n";
  std::system(("unshare -rm sh '" + script.string() + "' >'" + out.string() + "' 2>&1").c_str());
  return read_file(out);
}

TEST(FullDisk, AFigureThatDoesNotFitIsAnErrorWithTheReasonAndNoPng) {
  if (!can_mount_small_disk()) GTEST_SKIP() << "no tmpfs mount here (needs a user namespace)";
  const fs::path dir = attn_test::scratch("outputs", "full_disk_png");
  // 02's figure is ~27 KB, its .dat and .gp ~4 KB: the PNG is what does not fit.
  const std::string r = run_on_small_disk("02_attention_by_hand", "--out p", dir / "disk", dir);
  EXPECT_TRUE(contains(r, "02_attention_by_hand: error: cannot write p/02_weights.png: "
                          "No space left on device"))
      << r;
  EXPECT_TRUE(contains(r, "exit=1\n")) << r;
  EXPECT_FALSE(contains(r, "./p/02_weights.png\n")) << r;
  EXPECT_FALSE(contains(r, ".tmp")) << r;
  fs::remove_all(dir);
}

TEST(FullDisk, ADumpThatDoesNotFitIsAnErrorAndLeavesNoPartialDump) {
  if (!can_mount_small_disk()) GTEST_SKIP() << "no tmpfs mount here (needs a user namespace)";
  const fs::path dir = attn_test::scratch("outputs", "full_disk_dump");
  // 08's dump is ~300 files of 4 KiB pages at least: far more than 16 KiB.
  const std::string r =
      run_on_small_disk("08_transformer_block", "--no-plots --dump d", dir / "disk", dir);
  EXPECT_TRUE(contains(r, "No space left on device")) << r;
  EXPECT_TRUE(contains(r, "exit=1\n")) << r;
  const std::string left = r.substr(r.find("exit="));  // the files on the small disk
  EXPECT_FALSE(contains(left, ".npy")) << "a failed run removes the arrays it wrote\n" << r;
  EXPECT_FALSE(contains(left, "manifest.json")) << r;
  EXPECT_FALSE(contains(left, "INCOMPLETE.txt")) << r;
  EXPECT_FALSE(contains(left, ".tmp")) << r;
  fs::remove_all(dir);
}

TEST(FullDisk, ASaveThatDoesNotFitKeepsTheEarlierCheckpoint) {
  if (!can_mount_small_disk()) GTEST_SKIP() << "no tmpfs mount here (needs a user namespace)";
  const fs::path dir = attn_test::scratch("outputs", "full_disk_save");
  const fs::path disk = dir / "disk";
  fs::create_directories(disk);
  // On a 1 MiB disk: a small checkpoint; the disk filled to 16 KiB of room; a second save with
  // another seed (it fails half-way); the first checkpoint loaded and compared with its replay.
  const std::string run = "'" + attn_test::bin_dir() +
                          "/09_training' --no-plots --task induction --d-model 8 --layers 1";
  const fs::path script = dir / "save.sh", out = dir / "save.txt";
  std::ofstream(script) << "mount -t tmpfs -o size=1m tmpfs '" << disk.string() << "' || exit 99\n"
                        << "cd '" << disk.string() << "'\n"
                        << run << " --steps 2 --save ck >first.txt 2>&1 || echo first-failed\n"
                        << "dd if=/dev/zero of=room bs=16k count=1 2>/dev/null\n"
                        << "dd if=/dev/zero of=fill bs=4k 2>/dev/null\nrm room\n"
                        << run << " --steps 2 --seed 7 --save ck >/dev/null 2>err.txt\n"
                        << "echo \"exit=$?\"; cat err.txt\nrm fill\n"
                        << run << " --load ck >loaded.txt 2>&1; echo \"load=$?\"\n"
                        << "grep 'predicted right' first.txt loaded.txt\nls -a ck/induction\n";
  std::system(("unshare -rm sh '" + script.string() + "' >'" + out.string() + "' 2>&1").c_str());
  const std::string r = read_file(out);
  EXPECT_FALSE(contains(r, "first-failed")) << r;
  EXPECT_TRUE(contains(r, "exit=1\n")) << r;
  EXPECT_TRUE(contains(r, "No space left on device")) << r;
  EXPECT_TRUE(contains(r, "load=0\n")) << "the earlier checkpoint still loads\n" << r;
  const std::string left = r.substr(r.find("load="));  // from here on: the folder's listing
  EXPECT_FALSE(contains(left, ".writing-")) << r;
  EXPECT_FALSE(contains(left, "INCOMPLETE.txt")) << r;
  // The same held-out score from the loaded weights as from the run that saved them.
  const auto score = [&](const std::string& file) {
    const std::size_t at = r.find(file + ":");
    return at == std::string::npos
               ? std::string("?")
               : r.substr(at + file.size(), r.find('\n', at) - at - file.size());
  };
  EXPECT_EQ(score("first.txt"), score("loaded.txt")) << r;
  fs::remove_all(dir);
}

TEST(FullDisk, AFileSizeLimitIsCaughtTheSameWay) {
  // The same failure without a mount: a 16 KiB file size limit makes the PNG's write fail
  // (EFBIG, "File too large"); SIGXFSZ is ignored so that the write fails instead of killing.
  const fs::path dir = attn_test::scratch("outputs", "fsize");
  const attn_test::Output r =
      attn_test::run_chapter("02_attention_by_hand", "--out '" + (dir / "p").string() + "'",
                             dir);  // warm-up: the folder exists, figure fits
  ASSERT_EQ(r.code, 0) << r.err;
  fs::remove(dir / "p" / "02_weights.png");
  const std::string cmd = "trap '' XFSZ; ulimit -f 16; '" + attn_test::bin_dir() +
                          "/02_attention_by_hand' --out '" + (dir / "p").string() +
                          "' >/dev/null 2>'" + (dir / "err.txt").string() + "'";
  const int status = std::system(("bash -c \"" + cmd + "\"").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_TRUE(contains(read_file(dir / "err.txt"), "02_weights.png: File too large"))
      << read_file(dir / "err.txt");
  EXPECT_FALSE(fs::exists(dir / "p" / "02_weights.png"));
  EXPECT_FALSE(any_temporary(dir / "p"));
  fs::remove_all(dir);
}

// ---- Standard output ----------------------------------------------------------------------------

TEST(Stdout, AFullDeviceIsAWriteErrorNotSuccess) {
  const fs::path dir = attn_test::scratch("outputs", "dev_full");
  for (const char* chapter : attn_test::kChapters) {
    const std::string cmd = "'" + attn_test::bin_dir() + "/" + chapter +
                            "' --no-plots >/dev/full 2>'" + (dir / "err.txt").string() + "'";
    const int status = std::system(cmd.c_str());
    EXPECT_EQ(WEXITSTATUS(status), 1) << chapter;
    EXPECT_TRUE(contains(read_file(dir / "err.txt"),
                         std::string(chapter) + ": write error: No space left on device"))
        << chapter << ": " << read_file(dir / "err.txt");
    // Found at the first step's flush, not at the end: chapter 09 never starts training.
    EXPECT_FALSE(contains(read_file(dir / "err.txt"), "tokens/s")) << chapter;
  }
  fs::remove_all(dir);
}

TEST(Stdout, AClosedStdoutIsAWriteErrorAndWritesNothing) {
  const fs::path dir = attn_test::scratch("outputs", "closed");
  const std::string cmd = "'" + attn_test::bin_dir() + "/02_attention_by_hand' --out '" +
                          (dir / "p").string() + "' >&- 2>'" + (dir / "err.txt").string() + "'";
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_TRUE(contains(read_file(dir / "err.txt"), "write error")) << read_file(dir / "err.txt");
  // A closed stdout must not become the first file opened: nothing was written at all.
  EXPECT_FALSE(fs::exists(dir / "p"));
  fs::remove_all(dir);
}

TEST(Stdout, HelpToAFullDeviceIsAWriteErrorToo) {
  const fs::path dir = attn_test::scratch("outputs", "help_full");
  const std::string cmd = "'" + attn_test::bin_dir() + "/05_masking' --help >/dev/full 2>'" +
                          (dir / "err.txt").string() + "'";
  EXPECT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
  EXPECT_TRUE(contains(read_file(dir / "err.txt"), "write error")) << read_file(dir / "err.txt");
  fs::remove_all(dir);
}

// Runs bin/<chapter> <args> with stdout the write end of a pipe of one page (4 KiB) and stderr
// into dir/err.txt, SIGPIPE at its default action as a shell starts a program. The test reads
// `read_first` bytes, then closes the read end, as `chapter | head -c 100` does, and returns
// how the chapter ended (exit code, or 128 + the signal). A chapter that prints more than the
// pipe holds beyond those bytes cannot have finished before the close: it must meet it.
int run_into_a_pipe_closed_early(const std::string& chapter, const std::vector<std::string>& args,
                                 const fs::path& dir, std::size_t read_first) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  ::fcntl(fds[1], F_SETPIPE_SZ, 4096);
  std::vector<std::string> argv_s = {attn_test::bin_dir() + "/" + chapter};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, (dir / "err.txt").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  std::size_t got = 0;
  char buf[256];
  while (spawned == 0 && got < read_first) {
    const ssize_t n = ::read(fds[0], buf, std::min(sizeof buf, read_first - got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  return spawned == 0 ? wait_for(Process{pid}) : -1;
}

TEST(Stdout, AClosedPipeIsAWriteErrorNotASignal) {
  // `06_multi_head --no-plots | head -c 100` was ended by SIGPIPE: exit status 141, no word
  // on stderr. A closed pipe is lost output, like a full disk.
  const fs::path dir = attn_test::scratch("outputs", "pipe");
  for (const char* chapter : attn_test::kChapters) {
    // The read end closed before the chapter writes a byte: found at the first step.
    const int code = run_into_a_pipe_closed_early(chapter, {"--no-plots"}, dir, 0);
    EXPECT_EQ(code, 1) << chapter << ": " << read_file(dir / "err.txt");
    EXPECT_TRUE(
        contains(read_file(dir / "err.txt"), std::string(chapter) + ": write error: Broken pipe"))
        << chapter << ": " << read_file(dir / "err.txt");
    EXPECT_FALSE(contains(read_file(dir / "err.txt"), "tokens/s")) << chapter;
  }
  // As `| head -c 100` does, with figures and a dump on the way: 6.7 kB of output, which a
  // 4 KiB pipe cannot hold. What was written whole stays whole; nothing is left half-written,
  // and the dump, cut short, has no manifest.
  const fs::path plots = dir / "p", dump = dir / "d";
  const int code = run_into_a_pipe_closed_early(
      "06_multi_head", {"--out", plots.string(), "--dump", dump.string()}, dir, 100);
  EXPECT_EQ(code, 1) << read_file(dir / "err.txt");
  EXPECT_TRUE(contains(read_file(dir / "err.txt"), "06_multi_head: write error: Broken pipe"))
      << read_file(dir / "err.txt");
  EXPECT_FALSE(any_temporary(plots));
  EXPECT_FALSE(any_temporary(dump));
  EXPECT_FALSE(fs::exists(dump / "manifest.json"));
  for (const std::string& name : listing(plots)) {
    if (name.ends_with(".png")) {
      EXPECT_TRUE(is_whole_png(plots / name)) << name;
    }
  }
  fs::remove_all(dir);
}

TEST(Signals, GnuplotStartsWithSigpipeAtItsDefault) {
  // The course ignores SIGPIPE (a closed stdout is a write error), and an ignored signal stays
  // ignored across exec: gnuplot must not inherit that. A stand-in gnuplot reports its mask.
  const fs::path dir = attn_test::scratch("outputs", "gnuplot_sigpipe");
  const fs::path bin = dir / "fake-bin", mask = dir / "sigign.txt";
  fs::create_directories(bin);
  std::ofstream(bin / "gnuplot") << "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\n"
                                 << "grep SigIgn /proc/$$/status > '" << mask.string() << "'\n"
                                 << kPrintPng << "\n";
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  const std::string cmd = "PATH='" + bin.string() + "':$PATH '" + attn_test::bin_dir() +
                          "/02_attention_by_hand' --out '" + (dir / "p").string() + "' >/dev/null";
  // Started as a shell starts it, SIGPIPE at its default (this test's own may be ignored).
  struct sigaction was {
  }, by_default{};
  by_default.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &by_default, &was);
  const int status = std::system(cmd.c_str());
  ::sigaction(SIGPIPE, &was, nullptr);
  ASSERT_EQ(status, 0);
  const std::string line = read_file(mask);  // "SigIgn:\t0000000000000000\n"
  ASSERT_TRUE(contains(line, "SigIgn:")) << line;
  const unsigned long long ignored = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
  EXPECT_EQ(ignored & (1ull << (SIGPIPE - 1)), 0ull) << line;
  fs::remove_all(dir);
}

// ---- Signals ------------------------------------------------------------------------------------

TEST(Signals, CtrlCOrKillDuringARenderStopsGnuplotAndLeavesNoTemporary) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const fs::path dir = attn_test::scratch("outputs", "signal_" + std::to_string(sig));
    const fs::path pid_file = dir / "gnuplot.pid";
    const Process p = start("02_attention_by_hand", {"--out", (dir / "p").string()}, dir,
                            slow_gnuplot(dir, pid_file));
    ASSERT_GT(p.pid, 0);
    ASSERT_TRUE(appears(pid_file)) << "the stand-in gnuplot never started";
    ::kill(p.pid, sig);
    EXPECT_EQ(wait_for(p), 128 + sig) << "ends by the signal, as the shell reports it";
    const pid_t gnuplot = std::stoi(read_file(pid_file));
    EXPECT_TRUE(process_gone(gnuplot)) << "gnuplot (pid " << gnuplot << ") was left running";
    if (!process_gone(gnuplot)) ::kill(gnuplot, SIGKILL);
    EXPECT_FALSE(any_temporary(dir / "p")) << "signal " << sig;
    EXPECT_FALSE(fs::exists(dir / "p" / "02_weights.png")) << "signal " << sig;
    fs::remove_all(dir);
  }
}

TEST(Signals, AnInterruptedDumpLeavesTheFolderAsItWas) {
  const fs::path dir = attn_test::scratch("outputs", "interrupted_dump");
  const fs::path pid_file = dir / "gnuplot.pid", dump = dir / "d";
  // An earlier dump in the folder, then a run stopped half-way: 04 draws its histograms, dumps
  // a and b, then draws the softmax curves; the signal comes while the second figure renders.
  const attn_test::Output first = attn_test::run_chapter(
      "04_softmax_scaling", "--no-plots --samples 1000 --dump '" + dump.string() + "'", dir);
  ASSERT_EQ(first.code, 0) << first.err;
  const std::vector<std::string> before = listing(dump);
  const std::string manifest = read_file(dump / "manifest.json");
  const Process p =
      start("04_softmax_scaling", {"--out", (dir / "p").string(), "--dump", dump.string()}, dir,
            slow_gnuplot(dir, pid_file, 1));
  ASSERT_TRUE(appears(pid_file));
  ::kill(p.pid, SIGTERM);
  EXPECT_EQ(wait_for(p), 128 + SIGTERM);
  EXPECT_EQ(listing(dump), before) << "nothing of the stopped run, nothing of the earlier lost";
  EXPECT_EQ(read_file(dump / "manifest.json"), manifest) << "the earlier dump, whole";
  fs::remove_all(dir);
}

TEST(Signals, GnuplotKeepsASignalTheUserIgnored) {
  // Under nohup (SIGHUP ignored) a hang-up must not kill the figure half-way: the ignored
  // signal stays ignored in gnuplot. A stand-in gnuplot reports its ignored-signal mask.
  const fs::path dir = attn_test::scratch("outputs", "nohup");
  const fs::path bin = dir / "fake-bin", mask = dir / "sigign.txt";
  fs::create_directories(bin);
  std::ofstream(bin / "gnuplot") << "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\n"
                                 << "grep SigIgn /proc/$$/status > '" << mask.string() << "'\n"
                                 << kPrintPng << "\n";
  fs::permissions(bin / "gnuplot", fs::perms::owner_all);
  const std::string cmd = "trap '' HUP; PATH='" + bin.string() + "':$PATH '" +
                          attn_test::bin_dir() + "/02_attention_by_hand' --out '" +
                          (dir / "p").string() + "' >/dev/null";
  ASSERT_EQ(std::system(("bash -c \"" + cmd + "\"").c_str()), 0);
  const std::string line = read_file(mask);  // "SigIgn:\t0000000000000001\n"
  ASSERT_TRUE(contains(line, "SigIgn:")) << line;
  const unsigned long long ignored = std::stoull(line.substr(line.find(':') + 1), nullptr, 16);
  EXPECT_EQ(ignored & (1ull << (SIGHUP - 1)), 1ull << (SIGHUP - 1)) << line;
  fs::remove_all(dir);
}

// ---- Two runs at once ---------------------------------------------------------------------------

TEST(Concurrency, TwoRunsIntoOneFolderBothSucceedWithWholeFigures) {
  const fs::path dir = attn_test::scratch("outputs", "two_runs");
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  const std::vector<std::string> args = {"--out", (dir / "p").string()};
  const Process a = start("04_softmax_scaling", args, dir / "a");
  const Process b = start("04_softmax_scaling", args, dir / "b");
  EXPECT_EQ(wait_for(a), 0) << read_file(dir / "a" / "stderr.txt");
  EXPECT_EQ(wait_for(b), 0) << read_file(dir / "b" / "stderr.txt");
  EXPECT_FALSE(any_temporary(dir / "p"));
  int pngs = 0;
  for (const std::string& n : listing(dir / "p")) {
    if (!n.ends_with(".png")) continue;
    ++pngs;
    EXPECT_TRUE(is_whole_png(dir / "p" / n)) << n;
  }
  EXPECT_GE(pngs, 5);
  fs::remove_all(dir);
}

TEST(Concurrency, APlantedLinkInTheOutputFolderIsNeverFollowed) {
  // The folder check used to write a fixed ".attn_write_probe" with an ordinary open, which
  // follows a link planted under that name. Temporary files are now created with O_EXCL and
  // O_NOFOLLOW under unique names.
  const fs::path dir = attn_test::scratch("outputs", "planted");
  fs::create_directories(dir / "p");
  std::ofstream(dir / "victim.txt") << "untouched";
  fs::create_symlink(dir / "victim.txt", dir / "p" / ".attn_write_probe");
  const attn_test::Output r =
      attn_test::run_chapter("02_attention_by_hand", "--out '" + (dir / "p").string() + "'", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(dir / "victim.txt"), "untouched");
  fs::remove_all(dir);
}

// ---- Dump folders -------------------------------------------------------------------------------

nlohmann::json manifest_of(const fs::path& dump) {
  std::ifstream in(dump / "manifest.json");
  return nlohmann::json::parse(in);
}

TEST(DumpFolder, ARunWithFewerLayersLeavesNoStaleLayerBehind) {
  const fs::path dir = attn_test::scratch("outputs", "stale");
  const std::string dump = " --no-plots --dump '" + (dir / "d").string() + "'";
  ASSERT_EQ(attn_test::run_chapter("08_transformer_block", "--layers 3" + dump, dir).code, 0);
  EXPECT_TRUE(fs::exists(dir / "d" / "encoder_layers_2_linear1_weight.npy"));
  const attn_test::Output r =
      attn_test::run_chapter("08_transformer_block", "--layers 2" + dump, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& n : listing(dir / "d"))
    EXPECT_FALSE(contains(n, "layers_2_")) << n << " is from the earlier run";
  // Every file in the folder is in the manifest, and every file in the manifest is there.
  const nlohmann::json m = manifest_of(dir / "d");
  std::set<std::string> listed = {"manifest.json"};
  for (const auto& a : m["arrays"]) listed.insert(a["file"].get<std::string>());
  const std::vector<std::string> present = listing(dir / "d");
  EXPECT_EQ(std::set<std::string>(present.begin(), present.end()), listed);
  EXPECT_EQ(m["options"]["--layers"], "2");
  fs::remove_all(dir);
}

TEST(DumpFolder, ForeignArraysAreRefusedBeforeAnythingRuns) {
  const fs::path dir = attn_test::scratch("outputs", "foreign");
  fs::create_directories(dir / "d");
  std::ofstream(dir / "d" / "my_results.npy") << "a learner's own file";
  const attn_test::Output r = attn_test::run_chapter(
      "02_attention_by_hand", "--no-plots --dump '" + (dir / "d").string() + "'", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "my_results.npy")) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(listing(dir / "d"), std::vector<std::string>{"my_results.npy"});
  fs::remove_all(dir);
}

TEST(DumpFolder, TheManifestRecordsTheValuesTheRunUsed) {
  // Read from the knobs after parsing: "--scale=false" is false (not "given, so true"), and a
  // default keeps every digit (not CLI11's display text "[0.5,1,1.73205,3]").
  const fs::path dir = attn_test::scratch("outputs", "values");
  const std::string dump = " --no-plots --dump '" + (dir / "d").string() + "'";
  ASSERT_EQ(attn_test::run_chapter("02_attention_by_hand", "--scale=false" + dump, dir).code, 0);
  EXPECT_EQ(manifest_of(dir / "d")["options"]["--scale"], "false");
  ASSERT_EQ(attn_test::run_chapter("02_attention_by_hand", "--scale" + dump, dir).code, 0);
  EXPECT_EQ(manifest_of(dir / "d")["options"]["--scale"], "true");
  ASSERT_EQ(attn_test::run_chapter("01_rnn", dump, dir).code, 0);
  // sqrt(3) in the shortest form that reads back to the same double.
  EXPECT_EQ(manifest_of(dir / "d")["options"]["--scales"], "0.5,1,1.7320508075688772,3");
  fs::remove_all(dir);
}

TEST(DumpFolder, TheManifestDescribesEveryArrayAndItsStateDictKey) {
  const fs::path dir = attn_test::scratch("outputs", "manifest");
  const attn_test::Output r = attn_test::run_chapter(
      "08_transformer_block",
      "--no-plots --layers 2 --seed 5 --dump '" + (dir / "d").string() + "'", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json m = manifest_of(dir / "d");
  EXPECT_EQ(m["chapter"], "08_transformer_block");
  EXPECT_EQ(m["seed"], 5);
  EXPECT_EQ(m["options"]["--seed"], "5");
  EXPECT_FALSE(m["options"].contains("--no-plots")) << "how a run is shown is not recorded";
  EXPECT_FALSE(m["options"].contains("--dump")) << "nor where it went";
  EXPECT_EQ(m["options"]["--layers"], "2");
  int parameters = 0;
  for (const auto& a : m["arrays"]) {
    const std::string file = a["file"];
    const course::NpyArray npy = course::read_npy(dir / "d" / file);
    EXPECT_EQ(npy.shape, a["shape"].get<std::vector<std::size_t>>()) << file;
    EXPECT_EQ(a["dtype"], npy.dtype == course::NpyDtype::float32 ? "float32" : "float64") << file;
    if (!a.contains("state_dict_key")) continue;
    ++parameters;
    const std::string key = a["state_dict_key"];
    std::string as_file = key;
    std::replace(as_file.begin(), as_file.end(), '.', '_');
    EXPECT_EQ(file, as_file + ".npy");
    // PyTorch's biases and LayerNorm weights are 1-D: load_state_dict needs the same shapes.
    const bool vector = key.ends_with("bias") || contains(key, ".norm");
    EXPECT_EQ(npy.shape.size(), vector ? 1u : 2u) << key;
  }
  // Per layer: 12 encoder tensors (MHA 4, FFN 4, two norms 4), 18 decoder (two MHA, three norms).
  EXPECT_EQ(parameters, 2 * 12 + 2 * 18);
  EXPECT_TRUE(contains(read_file(dir / "d" / "manifest.json"),
                       "\"state_dict_key\": \"encoder.layers.1.self_attn.in_proj_weight\""));
  fs::remove_all(dir);
}

}  // namespace test_outputs
