# cmake -DCHAPTERS_DIR=<chapters/> -DCHAPTERS="01_rnn;..." -DOUT=<build>/docs/gallery.md -P make_gallery.cmake
# Writes the site's figure gallery from the chapter pages themselves: every figure line
# ![caption](../../plots/NN_name.png) of chapters/NN_topic/README.md, under its chapter's title,
# so the gallery lists exactly the figures the pages show and can never fall out of date.
cmake_policy(VERSION 3.25)
set(page "# Figure gallery\n\nEvery figure of the course, chapter by chapter, as the chapters draw it into `plots/`.\n")
string(APPEND page "Each one is three files there: the `.png`, its numbers (`.dat`) and the gnuplot script that\n")
string(APPEND page "draws it (`.gp`); restyle the script and run `gnuplot NAME.gp` in `plots/` to draw it again.\n")
string(APPEND page "The symbols are explained in the [glossary](glossary.md).\n")
foreach(chapter IN LISTS CHAPTERS)
  set(file ${CHAPTERS_DIR}/${chapter}/README.md)
  file(STRINGS ${file} title LIMIT_COUNT 1 ENCODING UTF-8)  # "# 02 · Attention by hand"
  string(REGEX REPLACE "^# *" "" title "${title}")
  # Only the figure lines (a caption with a ';' would split CMake's list: none has one).
  file(STRINGS ${file} lines ENCODING UTF-8
       REGEX "^!\\[[^]]*\\]\\([^)]*plots/[A-Za-z0-9_.-]+\\.png\\)[ ]*$")
  set(figures "")
  foreach(line IN LISTS lines)
    string(APPEND figures "${line}\n\n")
  endforeach()
  if(figures)
    # The link is rewritten by md_filter.pl to the chapter's page.
    string(APPEND page "\n## ${title}\n\n[Read the chapter](../chapters/${chapter}/README.md)\n\n${figures}")
  endif()
endforeach()
file(WRITE ${OUT} "${page}")
