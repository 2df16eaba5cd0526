# The double-precision oracle (tests/support/oracle*.c): independent of the library, it shares
# only the public header. The tests check against it; the benchmark harness's distance-from-base
# column uses it for the variants its own reference (bench/reference.cc) does not cover.
add_library(mh_oracle STATIC
  ${CMAKE_CURRENT_LIST_DIR}/oracle.c
  ${CMAKE_CURRENT_LIST_DIR}/oracle_overlap.c
  ${CMAKE_CURRENT_LIST_DIR}/oracle_moh.c
  ${CMAKE_CURRENT_LIST_DIR}/oracle_collab.c
  ${CMAKE_CURRENT_LIST_DIR}/oracle_dcmha.c)
target_include_directories(mh_oracle PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/include)
target_compile_options(mh_oracle PRIVATE ${MH_WARNINGS})
target_link_libraries(mh_oracle PUBLIC m)
