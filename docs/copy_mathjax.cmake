# cmake -DSRC=/usr/share/javascript/mathjax -DDST=<html>/mathjax -P copy_mathjax.cmake
#
# Copies only what Doxygen's MathJax 2 configuration loads (TeX input, CommonHTML output with
# the TeX web fonts, the AMS extensions): ~2.6 MB instead of Debian's 54 MB. Symlinks are
# resolved, so the copy works after the site is moved or served from another machine.
set(parts
  MathJax.js
  extensions
  jax/input/TeX
  jax/element
  jax/output/CommonHTML
  fonts/HTML-CSS/TeX/woff
  localization/en)
foreach(part IN LISTS parts)
  if(NOT EXISTS ${SRC}/${part})
    message(FATAL_ERROR "MathJax is missing ${SRC}/${part} (is libjs-mathjax installed?)")
  endif()
  get_filename_component(parent ${DST}/${part} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  execute_process(COMMAND cp -RL ${SRC}/${part} ${parent}/ RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "copying ${SRC}/${part} failed")
  endif()
endforeach()
