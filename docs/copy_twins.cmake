# copy_twins.cmake: the heat maps' interactive twins (<name>.html, which the chapters write
# beside <name>.png in the plots folder) copied into the site, where polish_html.pl embeds each
# under its figure. A twin is told from other .html files by the figure data it carries.
#   cmake -DSRC=<plots folder> -DDST=<site's html folder> -P copy_twins.cmake
file(GLOB pages ${SRC}/*.html)
set(copied 0)
foreach(page IN LISTS pages)
  file(STRINGS ${page} marker REGEX "id=\"figure-data\"" LIMIT_COUNT 1)
  if(marker)
    file(COPY ${page} DESTINATION ${DST})
    math(EXPR copied "${copied} + 1")
  endif()
endforeach()
message(STATUS "copy_twins: ${copied} interactive figures copied into the site")
