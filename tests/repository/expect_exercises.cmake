# Every chapter has at least three checked exercises, and says how to do them: in its
# exercise/ folder at least three headers each declaring a function exercise_<name>, with the
# difficulty, the importance and the minutes in its comment ("Difficulty 2 of 3, importance 3 of
# 3, about 20 minutes."); the tests tests/chapters/exercise_NN.cpp, the worked answers
# tests/chapters/exercise_NN_solution.cpp, one `// [answer_NN_k]` region per exercise; and the
# chapter's page, which gives the one command that checks them and shows every worked answer
# (a snippet of the region, which snippets_are_current keeps equal to it).
#
#   cmake -DSOURCE=<repository> -DCHAPTERS="01_rnn;02_attention_by_hand;..." -P expect_exercises.cmake
#
# Fails naming every chapter that falls short, and what it lacks.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE OR NOT CHAPTERS)
  message(FATAL_ERROR "usage: cmake -DSOURCE=<repository> -DCHAPTERS=<list> -P expect_exercises.cmake")
endif()

set(problems "")
set(total 0)
foreach(chapter IN LISTS CHAPTERS)
  string(SUBSTRING ${chapter} 0 2 number)
  set(folder ${SOURCE}/chapters/${chapter}/exercise)
  file(GLOB headers ${folder}/*.hpp)
  set(exercises "")
  foreach(header IN LISTS headers)
    file(READ ${header} text)
    string(REGEX MATCHALL "[\n ]exercise_[a-z0-9_]+\\(" declared "${text}")
    if(NOT declared)
      continue()  # a header of shared types (a ring buffer), not an exercise of its own
    endif()
    get_filename_component(name ${header} NAME)
    if(NOT text MATCHES "Difficulty [123] of 3, importance [123] of 3, about [0-9]+ minutes")
      string(APPEND problems "\n  ${chapter}/exercise/${name}: no \"Difficulty d of 3, "
                             "importance i of 3, about m minutes.\" in its comment")
    endif()
    list(APPEND exercises ${name})
  endforeach()
  list(LENGTH exercises count)
  math(EXPR total "${total} + ${count}")
  if(count LESS 3)
    string(APPEND problems "\n  ${chapter}: ${count} checked exercise(s) in exercise/, at least 3 wanted")
    continue()
  endif()
  set(solution ${SOURCE}/tests/chapters/exercise_${number}_solution.cpp)
  if(NOT EXISTS ${SOURCE}/tests/chapters/exercise_${number}.cpp OR NOT EXISTS ${solution})
    string(APPEND problems "\n  ${chapter}: tests/chapters/exercise_${number}.cpp or its _solution.cpp is missing")
    continue()
  endif()
  file(READ ${SOURCE}/chapters/${chapter}/README.md page)
  if(NOT page MATCHES "--target exercise_${number}")
    string(APPEND problems "\n  ${chapter}/README.md: no command `cmake --build build/release "
                           "--target exercise_${number} ...` to check the exercises")
  endif()
  foreach(k RANGE 1 ${count})
    set(region "answer_${number}_${k}")
    file(STRINGS ${solution} markers REGEX "^// \\[${region}\\]$")
    list(LENGTH markers marker_count)
    if(NOT marker_count EQUAL 2)
      string(APPEND problems "\n  ${solution}: ${marker_count} lines `// [${region}]`, 2 wanted "
                             "(around exercise ${number}.${k}'s worked answer)")
    endif()
    if(NOT page MATCHES "<!-- snippet: \\.\\./\\.\\./tests/chapters/exercise_${number}_solution\\.cpp ${region} -->")
      string(APPEND problems "\n  ${chapter}/README.md: no worked answer for exercise ${number}.${k} "
                             "(<!-- snippet: ../../tests/chapters/exercise_${number}_solution.cpp ${region} -->)")
    endif()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "Chapters without their checked exercises:${problems}")
endif()
list(LENGTH CHAPTERS chapters)
message(STATUS "${total} checked exercises in ${chapters} chapters, each with its tests, its "
               "worked answer and the command on its page")
