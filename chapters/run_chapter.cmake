# cmake -DEXE=<chapter> -DOUT=<plots dir> -DLOG=<file> -P run_chapter.cmake
# Runs one chapter with its default options, its walk-through into LOG; fails loudly if it fails.
get_filename_component(log_dir ${LOG} DIRECTORY)
file(MAKE_DIRECTORY ${log_dir})
execute_process(COMMAND ${EXE} --out ${OUT}
  OUTPUT_FILE ${LOG}.tmp ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "${EXE} --out ${OUT} failed (${code}):\n${err}")
endif()
file(RENAME ${LOG}.tmp ${LOG})
