# cmake -DSOURCE=<repo> -DSMOKE=<build>/tests/smoke -DBIN=<build>/bin -DCLOSE=<figure_data_close>
#       -P expect_figures_current.cmake
# Passes when docs/figures holds exactly the figures the pages show, and each one's numbers are
# what its chapter draws now. The pages are README.md and chapters/*/README.md; a figure is a
# line ![caption](../../docs/figures/NAME.png) (from README.md: docs/figures/NAME.png), the copy
# committed so that GitHub shows it (the site takes the fresh one from plots/).
#
# The chapters' drawings are the smoke tests' own: smoke.<chapter> runs the chapter with
# --out <SMOKE>/<chapter>/plots, and this test requires their fixture, so in one ctest run they
# have drawn before it reads, and no chapter runs a second time for it. A drawn file older than
# its chapter's executable was left by an earlier run (a chapter that no longer draws it), and
# fails the test too.
#
# What is compared is each figure's data (NAME.dat: the numbers, written exactly and
# locale-free), not the PNG, whose bytes depend on the gnuplot and cairo versions and on the
# fonts installed. And the numbers are compared as a figure shows them (figure_data_close.cpp:
# the text exactly, each number to a thousandth of its value or of its column's span), not
# byte for byte: the committed copies were drawn on the course's machine, and a learner's CPU
# or compiler rounds the last digits differently (SSE2, AVX2, AVX-512 and NEON exp and GEMM
# kernels), while a stale figure differs by far more.
#
# It lists every problem, then fails. The fix is scripts/update_figures.sh after the chapters
# drew plots/ (scripts/course.sh); it copies each figure a page shows and removes the others.
cmake_policy(VERSION 3.25)
set(figures ${SOURCE}/docs/figures)
set(fix "run scripts/update_figures.sh after the chapters drew plots/ (scripts/course.sh)")
set(problems "")
# problem(<pieces>...): one problem, its pieces joined.
macro(problem)
  string(CONCAT problem_text ${ARGN})
  list(APPEND problems "${problem_text}")
endmacro()

# What the pages show, each link checked where the page is.
file(GLOB pages ${SOURCE}/chapters/*/README.md)
list(PREPEND pages ${SOURCE}/README.md)
set(shown "")
foreach(page IN LISTS pages)
  file(RELATIVE_PATH page_name ${SOURCE} ${page})
  get_filename_component(page_dir ${page} DIRECTORY)
  file(STRINGS ${page} lines ENCODING UTF-8 REGEX "^[ ]*!\\[[^]]*\\]\\([^)]*\\.png\\)[ ]*$")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ ]*!\\[[^]]*\\]\\(([^)]*)\\)[ ]*$" "\\1" link "${line}")
    get_filename_component(name ${link} NAME_WLE)
    get_filename_component(target ${link} ABSOLUTE BASE_DIR ${page_dir})
    file(RELATIVE_PATH want ${page_dir} ${figures}/${name}.png)
    if(NOT target STREQUAL "${figures}/${name}.png")
      problem("${page_name} shows ${link}: a page shows a figure's copy in docs/figures (plots/ is "
              "not committed, so GitHub would show a broken image): link ${want}, then ${fix}")
    elseif(NOT EXISTS ${target})
      problem("${page_name} shows docs/figures/${name}.png, which is missing: ${fix}")
    endif()
    list(APPEND shown ${name})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES shown)
if(NOT shown)
  problem("no page shows a figure of docs/figures: is the figure line's form still ![caption](docs/figures/NAME.png)?")
endif()

# What docs/figures holds: only what a page shows.
file(GLOB kept RELATIVE ${figures} ${figures}/*)
foreach(file IN LISTS kept)
  get_filename_component(name ${file} NAME_WLE)
  get_filename_component(ext ${file} LAST_EXT)
  if(NOT ext MATCHES "^\\.(png|dat)$" OR NOT name IN_LIST shown)
    problem("docs/figures/${file} is shown by no page: delete it (scripts/update_figures.sh does)")
  endif()
endforeach()

# The figures whose numbers another CPU moves visibly, being made of its rounding: chapter
# 09's trainings (hundreds of steps carry a last-digit difference into another trajectory)
# and its gradient check (rounding errors themselves). figure_data_close --amplified compares
# their text and their steps and positions exactly, their other numbers by range only.
set(amplified 09_gradient_check 09_reversal_curves 09_reversal_timelapse 09_induction_curves
              09_induction_heads 09_induction_timelapse)

# Chapter 12's figures come from its full run (minutes of training, scripts/course.sh); the test
# command runs it with --quick, whose model and steps are others. Their data is checked to be
# there, and the smoke run to draw a figure of that name, but not compared number by number.
set(full_run_only 12_loss 12_heads_training 12_head_scores 12_head_induction)

# Each figure's numbers against what its chapter (the one whose number it starts with) drew.
foreach(name IN LISTS shown)
  if(NOT EXISTS ${figures}/${name}.dat)
    problem("docs/figures/${name}.dat, the numbers of ${name}.png, is missing: ${fix}")
    continue()
  endif()
  string(SUBSTRING ${name} 0 2 number)
  file(GLOB drawn ${SMOKE}/${number}_*/plots/${name}.dat)
  if(NOT drawn)
    problem("no smoke run drew ${name}.dat (in ${SMOKE}/${number}_*/plots): does "
            "chapter ${number} still draw it? (ctest runs smoke.${number}_* first)")
    continue()
  endif()
  get_filename_component(chapter_dir ${drawn} DIRECTORY)   # <SMOKE>/<chapter>/plots
  get_filename_component(chapter_dir ${chapter_dir} DIRECTORY)
  get_filename_component(chapter ${chapter_dir} NAME)
  file(TIMESTAMP ${drawn} drawn_at "%s" UTC)
  file(TIMESTAMP ${BIN}/${chapter} built_at "%s" UTC)
  if(drawn_at LESS built_at)
    problem("${drawn} is older than ${BIN}/${chapter}: the chapter's smoke run did "
            "not draw it, so does the chapter still draw ${name}?")
    continue()
  endif()
  if(name IN_LIST full_run_only)
    continue()
  endif()
  set(how "")
  if(name IN_LIST amplified)
    set(how --amplified)
  endif()
  execute_process(COMMAND ${CLOSE} ${how} ${figures}/${name}.dat ${drawn}
    RESULT_VARIABLE close_code OUTPUT_VARIABLE close_out ERROR_VARIABLE close_out)
  if(NOT close_code EQUAL 0)
    problem("docs/figures/${name}.dat does not show what ${chapter} draws now "
            "(${drawn}):\n${close_out}  ${fix}")
  endif()
endforeach()

if(problems)
  list(LENGTH problems count)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "${count} problems with the figures the pages show:\n  ${text}")
endif()
list(LENGTH shown count)
message(STATUS "docs/figures: the ${count} figures the pages show, each with the numbers its chapter draws now")
