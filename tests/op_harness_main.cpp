// The op tests' shared main(): `--backend cuda` (or H3_TEST_BACKEND=cuda) selects the CUDA comparison mode
// (tests/op_harness.h); linked into every test_ops* binary.
#include "op_harness.h"

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    h3::ops::harness::parse_backend(argc, argv);
    return RUN_ALL_TESTS();
}
