# The README's C examples are compiled from README.md itself: the ```c block after the line
# <!-- readme-test: NAME --> becomes ${CMAKE_CURRENT_BINARY_DIR}/NAME.c, built and run as the
# test test_NAME (re-extracted whenever README.md changes). A missing block fails the configure.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md)
file(READ ${PROJECT_SOURCE_DIR}/README.md mh_readme)
foreach(name readme_example readme_kv_cache)
  # C code has no backquote, so [^`]* stops at the block's closing fence
  if(NOT mh_readme MATCHES "<!-- readme-test: ${name} -->\n```c\n([^`]*)```")
    message(FATAL_ERROR "README.md has no ```c block after <!-- readme-test: ${name} -->")
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${name}.c CONTENT "${CMAKE_MATCH_1}" @ONLY)
  mh_add_test(test_${name} ${CMAKE_CURRENT_BINARY_DIR}/${name}.c)
endforeach()
