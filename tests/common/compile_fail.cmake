# Compiles each case of SOURCE (`#if defined(CASE_name)` / `#elif
# defined(CASE_name)`) on its own with `-fsyntax-only -DCASE_name`:
# CASE_legal must compile, every other case must fail with a compiler error.
# Fails when a case that mixes indices compiles, which it would were the
# indices plain ints (common/indices.h).
#
#   cmake -DCXX=<compiler> -DSTD=<17> -DSOURCE=<file> "-DINCLUDES=<dir|dir>"
#         -P compile_fail.cmake
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
file(STRINGS "${SOURCE}" lines REGEX "^#(el)?if defined\\(CASE_[a-z_]+\\)")
set(cases)
foreach(line IN LISTS lines)
  string(REGEX REPLACE ".*defined\\((CASE_[a-z_]+)\\).*" "\\1" name "${line}")
  list(APPEND cases ${name})
endforeach()
list(LENGTH cases count)
if(count LESS 2 OR NOT "CASE_legal" IN_LIST cases)
  message(FATAL_ERROR "${SOURCE}: expected CASE_legal and cases that must fail, found: ${cases}")
endif()
set(include_flags)
string(REPLACE "|" ";" INCLUDES "${INCLUDES}")
foreach(dir IN LISTS INCLUDES)
  if(dir)
    list(APPEND include_flags "-I${dir}")
  endif()
endforeach()
set(failures)
foreach(name IN LISTS cases)
  execute_process(
    COMMAND "${CXX}" -std=c++${STD} -fsyntax-only ${include_flags} -D${name} -x c++ "${SOURCE}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(name STREQUAL "CASE_legal")
    if(NOT rc EQUAL 0)
      list(APPEND failures "${name} must compile and does not:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    list(APPEND failures "${name} mixes indices and compiles")
  elseif(NOT err MATCHES "error:")
    list(APPEND failures "${name} failed without a compiler error:\n${err}")
  else()
    message(STATUS "${name}: refused as expected")
  endif()
endforeach()
if(failures)
  string(JOIN "\n" text ${failures})
  message(FATAL_ERROR "${text}")
endif()
message(STATUS "${count} cases: CASE_legal compiles, the rest do not")
