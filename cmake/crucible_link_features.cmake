# Link feature CRUCIBLE_NO_AS_NEEDED: keep a shared library in DT_NEEDED even when the program
# references none of its symbols (its static initialisers register ops). Used by the build and
# by find_package(crucible).
set(CMAKE_LINK_LIBRARY_USING_CRUCIBLE_NO_AS_NEEDED
  "LINKER:--push-state,--no-as-needed" "<LINK_ITEM>" "LINKER:--pop-state")
set(CMAKE_LINK_LIBRARY_USING_CRUCIBLE_NO_AS_NEEDED_SUPPORTED TRUE)
