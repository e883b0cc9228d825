# cmake -DEXE=<chapter> -DDIR=<scratch folder> -P expect_deterministic.cmake
# Passes when two runs of the chapter with the same (default) options print identical bytes.
foreach(run 1 2)
  execute_process(COMMAND ${EXE} --no-plots --dump ${DIR}/dump${run}
    OUTPUT_VARIABLE out${run} RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${EXE} failed with exit code ${code}")
  endif()
endforeach()
# The dump folder is named in the output; make the two runs' names equal before comparing.
string(REPLACE "${DIR}/dump1" "DUMP" out1 "${out1}")
string(REPLACE "${DIR}/dump2" "DUMP" out2 "${out2}")
if(NOT out1 STREQUAL out2)
  file(WRITE ${DIR}/run1.txt "${out1}")
  file(WRITE ${DIR}/run2.txt "${out2}")
  message(FATAL_ERROR "two runs printed different output: diff ${DIR}/run1.txt ${DIR}/run2.txt")
endif()
