# cmake -DCHAPTERS_DIR=<chapters/> -DCHAPTERS="01_rnn;..." -DOUT=<build>/docs/gallery.md -P make_gallery.cmake
# Writes the site's figure gallery from the chapter pages themselves: under each chapter's title,
# every diagram line ![caption](../../docs/diagrams/NN_name.svg) of chapters/NN_topic/README.md,
# then every figure line ![caption](../../docs/figures/NN_name.png), so the gallery lists exactly
# what the pages show and can never fall out of date.
cmake_policy(VERSION 3.25)
set(page "# Figure gallery\n\nEvery figure of the course, chapter by chapter.\n\n")
string(APPEND page "The **diagrams** come first: architecture and data flow, drawn from the Graphviz sources\n")
string(APPEND page "`docs/diagrams/NN_name.dot`, which `dot` renders when the site is built (the `.svg` beside\n")
string(APPEND page "each source is the copy GitHub shows; `scripts/update_diagrams.sh` refreshes it).\n\n")
string(APPEND page "The **figures** are the numbers, as the chapters draw them into `plots/`. Each one is three\n")
string(APPEND page "files there: the `.png`, its numbers (`.dat`) and the gnuplot script that draws it (`.gp`);\n")
string(APPEND page "restyle the script and run `gnuplot NAME.gp` in `plots/` to draw it again.\n\n")
string(APPEND page "The symbols are explained in the [glossary](glossary.md).\n")
# The lines of one page that show an image of `folder` with extension `ext`, each followed by a
# blank line. (file(STRINGS) escapes a ';' in a line, so a caption may hold one.)
function(image_lines file folder ext out)
  file(STRINGS ${file} lines ENCODING UTF-8
       REGEX "^!\\[[^]]*\\]\\([^)]*${folder}/[A-Za-z0-9_.-]+\\.${ext}\\)[ ]*$")
  set(text "")
  foreach(line IN LISTS lines)
    string(APPEND text "${line}\n\n")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
foreach(chapter IN LISTS CHAPTERS)
  set(file ${CHAPTERS_DIR}/${chapter}/README.md)
  file(STRINGS ${file} title LIMIT_COUNT 1 ENCODING UTF-8)  # "# 02 · Attention by hand"
  string(REGEX REPLACE "^# *" "" title "${title}")
  image_lines(${file} "docs/diagrams" "svg" diagrams)
  image_lines(${file} "docs/figures" "png" figures)
  if(diagrams OR figures)
    # The link is rewritten by md_filter.pl to the chapter's page.
    string(APPEND page "\n## ${title}\n\n[Read the chapter](../chapters/${chapter}/README.md)\n\n")
    if(diagrams)
      string(APPEND page "**Diagram.**\n\n${diagrams}")
    endif()
    if(figures)
      string(APPEND page "**Figures.**\n\n${figures}")
    endif()
  endif()
endforeach()
file(WRITE ${OUT} "${page}")
