// threads.hpp: how many threads a parallel loop of the library uses. The rules by hand; the
// default from OMP_NUM_THREADS in a run that sets it (tests/CMakeLists.txt, threads_from_env).
#include "attn/core/threads.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace test_threads {

using attn::kThreadedFlops;
using attn::team_for;

TEST(Threads, TheCallersChoiceWinsWhateverTheWork) {
  EXPECT_EQ(team_for(3, 10, 0.0), 3);
  EXPECT_EQ(team_for(3, 10, 1e12), 3);
  EXPECT_EQ(team_for(1, 10, 1e12), 1);
}

TEST(Threads, LittleWorkRunsOnOneThread) {
  // Below kThreadedFlops a parallel region costs more than it saves: one thread, unless chosen.
  EXPECT_EQ(team_for(0, 10, kThreadedFlops / 2), 1);
  EXPECT_EQ(team_for(0, 10, 0.0), 1);
}

TEST(Threads, EnoughWorkRunsOnTheDefaultCappedByTheTasks) {
  const int d = attn::default_threads();
  ASSERT_GE(d, 1);
  EXPECT_EQ(team_for(0, 1000, kThreadedFlops), d);
  EXPECT_EQ(team_for(0, 1, 1e12), 1);  // one task: one thread
}

TEST(Threads, NeverMoreThanTheTasksAndAlwaysAtLeastOne) {
  EXPECT_EQ(team_for(16, 4, 1e12), 4);
  EXPECT_EQ(team_for(16, 0, 1e12), 1);
  EXPECT_EQ(team_for(0, 0, 1e12), 1);
  EXPECT_EQ(team_for(-2, 5, 0.0), 1);  // a negative choice is no choice: the work decides
}

TEST(Threads, TheDefaultIsOmpNumThreadsWhenSet) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr) GTEST_SKIP() << "OMP_NUM_THREADS is not set (threads_from_env sets it)";
  EXPECT_EQ(attn::default_threads(), std::stoi(env));
}

}  // namespace test_threads
