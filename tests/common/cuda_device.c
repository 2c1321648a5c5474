/*
 * The CUDA device check of the test programs (see cuda_device.h).
 */
#define _GNU_SOURCE
#include "cuda_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>
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

int tt_cuda_usable_forked(char *why, size_t len)
{
    int fds[2], status = 0;
    ssize_t n;
    pid_t pid;

    why[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(why, len, "pipe: %m");
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        char text[256] = "";
        int ok = tt_cuda_usable(text, sizeof(text));

        close(fds[0]);
        if (write(fds[1], text, strlen(text)) < 0)
            _exit(2);
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    n = pid < 0 ? -1 : read(fds[0], why, len - 1);
    why[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        snprintf(why, len, "cannot fork the device check: %m");
        return 0;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int tt_require_gpu(void)
{
    const char *v = getenv("TT_REQUIRE_GPU");

    return v != NULL && strcmp(v, "1") == 0;
}

static void no_device(const char *why)
{
    if (tt_require_gpu())
        cr_assert_fail("TT_REQUIRE_GPU=1 but no CUDA device is usable "
                       "(%s)", why);
    else
        cr_skip_test("no CUDA device: these tests need a GPU and driver "
                     "(%s)", why);
}

void tt_skip_without_device(void)
{
    char why[256];

    if (!tt_cuda_usable(why, sizeof(why)))
        no_device(why);
}

void tt_skip_without_device_forked(void)
{
    char why[256];

    if (!tt_cuda_usable_forked(why, sizeof(why)))
        no_device(why);
}

void tt_hide_devices(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
}

int tt_cuda_deadline_s(int def)
{
    const char *v = getenv("TT_CUDA_DEADLINE_S");
    int s = v != NULL ? atoi(v) : 0;

    return s > 0 ? s : def;
}

/* The tests that skipped, as the runner saw them. */
static char skipped[1024];
static int nskipped;

ReportHook(POST_TEST)(struct criterion_test_stats *stats)
{
    size_t len = strlen(skipped);

    if (stats->test_status != CR_STATUS_SKIPPED)
        return;
    if (nskipped++ < 16 && len < sizeof(skipped) - 1)
        snprintf(skipped + len, sizeof(skipped) - len, "%s%s::%s",
                 len ? ", " : "", stats->test->category, stats->test->name);
}

int tt_cuda_test_main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int run = criterion_handle_args(argc, argv, true);
    int passed, usable;
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
    usable = tt_cuda_usable(why, sizeof(why));
    if (nskipped > 0)
        fprintf(stderr, "%s: %d test%s skipped: %s%s\n", argv[0], nskipped,
                nskipped > 1 ? "s" : "", skipped,
                nskipped > 16 ? ", ..." : "");
    if (!usable)
        fprintf(stderr, "%s: skipped: these tests need a CUDA device and "
                "none is usable (%s); only the checks that need no device "
                "ran, and they passed\n", argv[0], why);
    if (usable && nskipped == 0)
        return 0;
    if (tt_require_gpu()) {
        fprintf(stderr, "%s: FAILED: TT_REQUIRE_GPU=1 and %s\n", argv[0],
                usable ? "tests were skipped" : "no device is usable");
        return 1;
    }
    return TT_EXIT_SKIP;
}
