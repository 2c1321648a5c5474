/*
 * What the CUDA test programs share: whether a device is usable, a skip
 * for the tests that need one, and a main that tells meson "skipped"
 * (exit status 77) when the machine has no device.
 *
 * Criterion's own skips leave the process exiting 0, so a run with no GPU
 * read as a pass.  tt_cuda_test_main() runs every test first (the ones
 * that need no device still check the error paths), and only then asks
 * for a device: the CUDA runtime does not survive a fork, and Criterion
 * forks one process per test, so the parent must not touch CUDA before.
 */
#ifndef TACL_TESTS_COMMON_CUDA_DEVICE_H
#define TACL_TESTS_COMMON_CUDA_DEVICE_H

#include <stddef.h>

/** The exit status that meson reports as a skipped test. */
#define TT_EXIT_SKIP 77

/**
 * Whether a CUDA device is usable.  When not, writes why into why (len
 * bytes): the runtime's error string, or that it counted no device.
 */
int tt_cuda_usable(char *why, size_t len);

/** Skip the running Criterion test, saying why, when no device is usable. */
void tt_skip_without_device(void);

/**
 * Run the program's Criterion tests.  Returns 1 when one failed, 0 when
 * all passed with a device, and TT_EXIT_SKIP (after a message naming what
 * was missing) when they passed without one.
 */
int tt_cuda_test_main(int argc, char *argv[]);

/*
 * The main of a CUDA test program: tt_cuda_test_main, exported.  Criterion
 * finds main by its symbol in the test workers it spawns; a main hidden by
 * -fvisibility=hidden would leave them libcriterion's own, which refuses
 * to run inside a worker.
 */
#define TT_CUDA_TEST_MAIN()                                                  \
    __attribute__((visibility("default"))) int main(int argc, char *argv[]) \
    {                                                                        \
        return tt_cuda_test_main(argc, argv);                                \
    }

#endif /* TACL_TESTS_COMMON_CUDA_DEVICE_H */
