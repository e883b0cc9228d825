# cmake -DEXE=<chapter> -DDIR=<scratch folder> [-DARGS=<options>] -P expect_deterministic.cmake
# Passes when two runs of the chapter with the same options (its defaults, plus ARGS: chapter 12
# runs its --quick set) print identical bytes and write identical files: every figure (.png,
# .gp, .dat) and every --dump array. The first
# run has one OpenMP thread and the second two, so the bytes must not depend on the threads
# either (tiled attention's query tiles and heads, training's sequences: each result is summed
# in an order the data fixes, whichever thread computes it).
file(REMOVE_RECURSE ${DIR})
foreach(run 1 2)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=${run} ${EXE} ${ARGS} --out ${DIR}/run${run}/plots --dump ${DIR}/run${run}/dump
    OUTPUT_VARIABLE out${run} RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${EXE} failed with exit code ${code}")
  endif()
  # The output names the run's folders; make the two runs' names equal before comparing.
  string(REPLACE "${DIR}/run${run}" "RUN" out${run} "${out${run}}")
endforeach()
if(NOT out1 STREQUAL out2)
  file(WRITE ${DIR}/stdout1.txt "${out1}")
  file(WRITE ${DIR}/stdout2.txt "${out2}")
  message(FATAL_ERROR "two runs printed different output: diff ${DIR}/stdout1.txt ${DIR}/stdout2.txt")
endif()
file(GLOB_RECURSE files1 RELATIVE ${DIR}/run1 ${DIR}/run1/*)
file(GLOB_RECURSE files2 RELATIVE ${DIR}/run2 ${DIR}/run2/*)
list(SORT files1)
list(SORT files2)
if(NOT files1 STREQUAL files2)
  message(FATAL_ERROR "the two runs wrote different files:\n${files1}\n---\n${files2}")
endif()
list(LENGTH files1 count)
if(count EQUAL 0)
  message(FATAL_ERROR "${EXE} wrote no files: nothing was compared")
endif()
foreach(f IN LISTS files1)
  file(SHA256 ${DIR}/run1/${f} h1)
  file(SHA256 ${DIR}/run2/${f} h2)
  if(NOT h1 STREQUAL h2)
    message(FATAL_ERROR "${f} differs between two runs: cmp ${DIR}/run1/${f} ${DIR}/run2/${f}")
  endif()
endforeach()
message(STATUS "identical: stdout and ${count} files")
