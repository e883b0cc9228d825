# cmake -DBIN=<build>/bin -DDIR=<scratch> -DFIGURES=<repo>/docs/figures -P expect_readme_figures.cmake
# Passes when every figure committed in docs/figures (the README's) is what its chapter draws
# now. What is compared is the figure's data (<name>.dat: the numbers, written exactly and
# locale-free), not the PNG's bytes, which depend on the gnuplot and cairo versions and on the
# fonts installed, so they may differ between machines that compute the same numbers. If it
# fails, the chapter changed: run scripts/update_readme_figures.sh after scripts/course.sh.
file(GLOB committed RELATIVE ${FIGURES} ${FIGURES}/*.dat)
if(NOT committed)
  message(FATAL_ERROR "no figure data in ${FIGURES}")
endif()
file(REMOVE_RECURSE ${DIR})
foreach(name IN LISTS committed)
  string(REGEX REPLACE "\\.dat$" ".png" png ${name})
  if(NOT EXISTS ${FIGURES}/${png})
    message(FATAL_ERROR "docs/figures/${name} has no ${png} beside it for the README to show")
  endif()
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
