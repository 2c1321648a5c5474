/*
 * The CUDA device check of the test programs (see cuda_device.h).
 */
#include "cuda_device.h"

#include <stdio.h>

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

int tt_cuda_usable(char *why, size_t len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err != cudaSuccess) {
        snprintf(why, len, "cudaGetDeviceCount: %s",
                 cudaGetErrorString(err));
        /* Clear the error so that later calls start clean. */
        (void)cudaGetLastError();
        return 0;
    }
    if (n == 0) {
        snprintf(why, len, "cudaGetDeviceCount found no device");
        return 0;
    }
    return 1;
}

void tt_skip_without_device(void)
{
    char why[256];

    if (!tt_cuda_usable(why, sizeof(why)))
        cr_skip_test("no CUDA device: these tests need a GPU and driver "
                     "(%s)", why);
}

int tt_cuda_test_main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int run = criterion_handle_args(argc, argv, true);
    int passed;
    char why[256];

    /* Nothing to run (--help, --version): answer as Criterion's main. */
    if (!run) {
        criterion_finalize(tests);
        return 0;
    }
    passed = criterion_run_all_tests(tests);
    criterion_finalize(tests);
    if (!passed)
        return 1;
    if (!tt_cuda_usable(why, sizeof(why))) {
        fprintf(stderr, "%s: skipped: these tests need a CUDA device and "
                "none is usable (%s); only the checks that need no "
                "device ran, and they passed\n", argv[0], why);
        return TT_EXIT_SKIP;
    }
    return 0;
}
