// Test plugin: an ordinary shared library with no crucible symbols at all.
extern "C" int crucible_test_plain_function() { return 42; }
