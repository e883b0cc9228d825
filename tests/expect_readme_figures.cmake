# cmake -DBIN=<build>/bin -DDIR=<scratch> -DFIGURES=<repo>/docs/figures -P expect_readme_figures.cmake
# Passes when every figure committed in docs/figures (the README's) is what its chapter draws
# now, byte for byte. If it fails, the chapter changed: run scripts/update_readme_figures.sh.
file(GLOB committed RELATIVE ${FIGURES} ${FIGURES}/*.png)
if(NOT committed)
  message(FATAL_ERROR "no figures in ${FIGURES}")
endif()
file(REMOVE_RECURSE ${DIR})
foreach(name IN LISTS committed)
  string(SUBSTRING ${name} 0 2 number)
  file(GLOB exe ${BIN}/${number}_*)
  execute_process(COMMAND ${exe} --out ${DIR} OUTPUT_QUIET RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${exe} failed (${code})")
  endif()
  file(SHA256 ${DIR}/${name} drawn)
  file(SHA256 ${FIGURES}/${name} kept)
  if(NOT drawn STREQUAL kept)
    message(FATAL_ERROR "docs/figures/${name} is not what the chapter draws now: "
                        "run scripts/update_readme_figures.sh after scripts/course.sh")
  endif()
endforeach()
