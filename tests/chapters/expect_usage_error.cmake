# cmake -DEXE=<program> -DARGS="<a;b>" -P expect_usage_error.cmake
# Passes when the program exits with code 2 and prints its usage on stderr.
execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 2)
  message(FATAL_ERROR "expected exit code 2 from '${EXE} ${ARGS}', got ${code}\nstderr:\n${err}")
endif()
if(NOT err MATCHES "Usage:")
  message(FATAL_ERROR "expected the usage on stderr, got:\n${err}")
endif()
