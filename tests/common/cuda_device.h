/*
 * What the CUDA test programs share: whether a device is usable, a skip
 * for the tests that need one, a way to run a case as on a machine
 * without one, and a main that tells meson "skipped" (exit status 77)
 * when tests could not run.
 *
 * Criterion's own skips leave the process exiting 0, so a run with no GPU
 * read as a pass.  tt_cuda_test_main() runs every test first (the ones
 * that need no device still check the error paths), then answers: 1 when
 * a test failed; 77, naming the skipped tests, when any test skipped or
 * no device is usable; 0 only when every test ran and passed.  With
 * TT_REQUIRE_GPU=1 in the environment (tools/gpu-check.sh sets it on a
 * GPU machine) every skip is a failure instead: the skip helpers fail the
 * test, saying why, and the main answers 1.
 *
 * The CUDA runtime does not survive a fork, and Criterion and the
 * multi-process harnesses fork, so a process that forks ranks must not
 * touch CUDA before: tt_cuda_usable_forked() asks a child.
 */
#ifndef TACL_TESTS_COMMON_CUDA_DEVICE_H
#define TACL_TESTS_COMMON_CUDA_DEVICE_H

#include <stddef.h>

/** The exit status that meson reports as a skipped test. */
#define TT_EXIT_SKIP 77

/**
 * Whether a CUDA device is usable, asked in this process (which then has
 * initialised CUDA).  When not, writes why into why (len bytes): the
 * runtime's error string, or that it counted no device.
 */
int tt_cuda_usable(char *why, size_t len);

/** tt_cuda_usable(), asked of a child process: this one touches no CUDA. */
int tt_cuda_usable_forked(char *why, size_t len);

/** Whether TT_REQUIRE_GPU=1: skips are failures. */
int tt_require_gpu(void);

/**
 * Skip the running Criterion test, saying why, when no device is usable
 * (asked in this process); under TT_REQUIRE_GPU=1 fail it instead.
 */
void tt_skip_without_device(void);

/** The same, asked of a child: for tests that fork their ranks. */
void tt_skip_without_device_forked(void);

/**
 * Hide every device from this process's CUDA (CUDA_VISIBLE_DEVICES=-1),
 * before its first CUDA call: a case that checks what a machine without
 * a GPU sees then runs on every machine instead of skipping on GPU ones.
 */
void tt_hide_devices(void);

/**
 * Seconds a multi-process case may run before its ranks are killed:
 * TT_CUDA_DEADLINE_S when set (tools/gpu-check.sh shortens it), else def.
 */
int tt_cuda_deadline_s(int def);

/**
 * Run the program's Criterion tests and answer as described at the top:
 * 0, 1 or TT_EXIT_SKIP, after a message naming what was skipped and why.
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
