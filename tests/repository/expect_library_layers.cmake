# The library's folders form layers (common/attn/attn.hpp, "The folders, in reading order"):
# a file may include only its own folder and the folders above it, so there is no cycle; a
# detail/ header is included only by the library's .cpp files and other detail/ headers; and
# nothing in attn includes the course's tooling (the arrows run chapters -> course -> attn).
#
#   cmake -DATTN=<source>/common/attn [-DORDER="core;ops;..."] -P expect_library_layers.cmake
#
# Fails naming every include that breaks a rule, with its file and line.
cmake_minimum_required(VERSION 3.25)  # IN_LIST and the other policies of today's CMake
if(NOT ATTN)
  message(FATAL_ERROR "usage: cmake -DATTN=<common/attn> -P expect_library_layers.cmake")
endif()
if(NOT ORDER)
  set(ORDER core ops kernels layers models training)
endif()

file(GLOB_RECURSE files RELATIVE ${ATTN} ${ATTN}/*.hpp ${ATTN}/*.cpp)
set(problems "")
set(folders_seen "")
foreach(file IN LISTS files)
  # The file's folder: the first part of its path ("" for attn.hpp, which includes them all).
  string(REGEX MATCH "^([a-z_]+)/" _ ${file})
  set(own "${CMAKE_MATCH_1}")
  if("${own}" STREQUAL "")
    set(own_rank 1000)
  else()
    list(FIND ORDER ${own} own_rank)
    if(own_rank EQUAL -1)
      string(APPEND problems "\n  ${file}: folder '${own}' is not in the order (${ORDER})")
      continue()
    endif()
    list(APPEND folders_seen ${own})
  endif()
  set(is_detail_or_source FALSE)
  if(file MATCHES "/detail/" OR file MATCHES "\\.cpp$")
    set(is_detail_or_source TRUE)
  endif()

  file(STRINGS ${ATTN}/${file} lines)
  set(line_number 0)
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
      continue()
    endif()
    set(included ${CMAKE_MATCH_1})
    if(included MATCHES "^course/")
      string(APPEND problems "\n  ${file}:${line_number}: includes ${included}: attn never uses course")
    elseif(included MATCHES "^attn/([a-z_]+)/")
      set(folder ${CMAKE_MATCH_1})
      list(FIND ORDER ${folder} rank)
      if(rank EQUAL -1)
        string(APPEND problems "\n  ${file}:${line_number}: includes ${included}: no folder '${folder}'")
      elseif(rank GREATER own_rank)
        string(APPEND problems
          "\n  ${file}:${line_number}: includes ${included}: ${own}/ may use only the folders above it")
      endif()
      if(included MATCHES "/detail/" AND NOT is_detail_or_source)
        string(APPEND problems
          "\n  ${file}:${line_number}: includes ${included}: a public header includes no detail/ header")
      endif()
    elseif(included MATCHES "^attn/[a-z_]+\\.hpp$" AND NOT included STREQUAL "attn/attn.hpp")
      string(APPEND problems "\n  ${file}:${line_number}: includes ${included}: name its folder")
    endif()
  endforeach()
endforeach()

# Every folder of the order holds something, so a renamed folder cannot slip past the check.
foreach(folder IN LISTS ORDER)
  if(NOT folder IN_LIST folders_seen)
    string(APPEND problems "\n  the folder ${folder}/ has no files")
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "common/attn's folders are out of order:${problems}")
endif()
list(LENGTH files count)
message(STATUS "common/attn: ${count} files in the folders ${ORDER}, each using only those above it")
