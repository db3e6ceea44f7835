// The test program's entry point: GoogleTest's usual main, after publishing the
// built-in kernel table that tests read through current_table() (the dispatch
// layer publishes nothing by itself; Note [Who publishes the first table] in
// src/dispatch/published_table.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string_view>

#include "switchyard/backends.h"

namespace {

// A "threadsafe" death test runs its statement in a fresh run of this program,
// started with this flag. Such a child publishes nothing here, so that the
// statement can set the environment the first publication reads (the kernel mask)
// or check what an unpublished process does.
bool is_death_test_child(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--gtest_internal_run_death_test")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const bool death_test_child = is_death_test_child(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  if (!death_test_child && !switchyard::install_builtin_table().is_ok()) {
    std::fputs("switchyard_tests: the built-in kernel table does not finalize\n", stderr);
    return 1;
  }
  return RUN_ALL_TESTS();
}
