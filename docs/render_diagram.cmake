# cmake -DDOT=<dot> -DSOURCE=<docs/diagrams/NAME.dot> -DOUT=<NAME.svg> -P render_diagram.cmake
# Renders one diagram: dot -Tsvg, plus two corrections. The site's build (docs/CMakeLists.txt),
# scripts/update_diagrams.sh and the test diagrams_are_current all render through this file, so
# the three always agree on the bytes.
#
# The first correction: graphviz (2.43) measures a <SUB> or <SUP> of an HTML-like label at 5/6
# of its size, as pango typesets one, but writes it into the SVG at the full size, so a browser
# draws it wider than the space the layout left for it and it runs into the next word. The diagrams
# therefore write sub- and superscripts at the base size, 14 pt, which pango measures as 12 pt,
# and here they are written out at 12 pt. A sub- or superscript of another size is an error:
# nothing here would know its measured size.
# A failure of dot, or anything it prints on stderr (a warning about an attribute or a label),
# is an error too, so that a broken diagram cannot be committed or published quietly.
foreach(var DOT SOURCE OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "render_diagram.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${DOT} -Tsvg ${SOURCE}
                OUTPUT_VARIABLE svg ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 0 OR NOT err STREQUAL "")
  message(FATAL_ERROR "dot failed or warned on ${SOURCE} (exit ${code}):\n${err}")
endif()
string(REGEX MATCHALL "baseline-shift=\"(super|sub)\" font-size=\"[0-9.]+\"" shifted "${svg}")
foreach(attributes IN LISTS shifted)
  if(NOT attributes MATCHES "font-size=\"14.00\"$")
    message(FATAL_ERROR "${SOURCE}: a sub- or superscript at another size than the base 14 pt "
                        "(${attributes}): write <SUB>/<SUP> without a <FONT POINT-SIZE> inside")
  endif()
endforeach()
string(REGEX REPLACE "baseline-shift=\"(super|sub)\" font-size=\"14.00\""
                     "baseline-shift=\"\\1\" font-size=\"12.00\"" svg "${svg}")
# And the shift itself: a browser's "sub" and "super" move the 12 pt text by a third of an em
# or more, while pango's layout left it about a fifth, so a subscript ran into the line below
# (Q<SUB>1</SUB> over "[2, 5, 64] each"). 3 pt down and 5 pt up fit the layout's line spacing.
string(REPLACE "baseline-shift=\"sub\"" "baseline-shift=\"-3\"" svg "${svg}")
string(REPLACE "baseline-shift=\"super\"" "baseline-shift=\"5\"" svg "${svg}")
get_filename_component(dir ${OUT} ABSOLUTE)
get_filename_component(dir ${dir} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
file(WRITE ${OUT}.tmp "${svg}")
file(RENAME ${OUT}.tmp ${OUT})  # whole or not at all: a failed run leaves the old file
