/*
 * tacl_mem_alloc and tacl_mem_free, and how another process maps what
 * they hand out (memseg.h): errors with messages, zeroed and aligned
 * memory, which ranges are found in a segment, a child mapping its
 * parent's segment by pid and descriptor and seeing the same bytes, and
 * the freed mark that tells a mapper to let go.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memseg.h"
#include "tacl.h"

static void expect_error(tacl_status_t got, tacl_status_t want,
                         const char *words)
{
    cr_assert_eq(got, want, "status %s, expected %s",
                 tacl_status_string(got), tacl_status_string(want));
    cr_assert_not_null(strstr(tacl_last_error(), words), "message: %s",
                       tacl_last_error());
}

Test(memseg, alloc_rejects_bad_arguments)
{
    void *p = (void *)1;

    expect_error(tacl_mem_alloc(NULL, 64, TACL_MEM_HOST),
                 TACL_ERR_INVALID_ARG, "NULL ptr_p");
    expect_error(tacl_mem_alloc(&p, 0, TACL_MEM_HOST), TACL_ERR_INVALID_ARG,
                 "size 0");
    cr_assert_null(p);
    expect_error(tacl_mem_alloc(&p, SIZE_MAX, TACL_MEM_HOST),
                 TACL_ERR_INVALID_ARG, "too large");
    expect_error(tacl_mem_alloc(&p, 64, TACL_MEM_CUDA), TACL_ERR_UNSUPPORTED,
                 "CUDA");
    expect_error(tacl_mem_alloc(&p, 64, (tacl_memtype_t)99),
                 TACL_ERR_INVALID_ARG, "memory type");
}

/* More than the machine has is refused up front, not granted page by page
 * until the kernel's out-of-memory killer ends a process. */
Test(memseg, alloc_beyond_the_machine_is_no_memory, .timeout = 30)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    size_t machine = (size_t)pages * (size_t)psize;
    void *p = (void *)1;

    cr_assert_gt(pages, 0);
    expect_error(tacl_mem_alloc(&p, 2 * machine, TACL_MEM_HOST),
                 TACL_ERR_NO_MEMORY, "available");
    cr_assert_null(p);
    /* A modest request still succeeds. */
    cr_assert_eq(tacl_mem_alloc(&p, 1 << 20, TACL_MEM_HOST), TACL_OK);
    cr_assert_eq(tacl_mem_free(p), TACL_OK);
}

Test(memseg, free_rejects_foreign_pointers)
{
    void *p, *m = malloc(64);

    cr_assert_eq(tacl_mem_free(NULL), TACL_OK);
    expect_error(tacl_mem_free(m), TACL_ERR_INVALID_ARG, "tacl_mem_alloc");
    free(m);
    cr_assert_eq(tacl_mem_alloc(&p, 8192, TACL_MEM_AUTO), TACL_OK);
    expect_error(tacl_mem_free((char *)p + 1), TACL_ERR_INVALID_ARG,
                 "tacl_mem_alloc");
    cr_assert_eq(tacl_mem_free(p), TACL_OK);
    expect_error(tacl_mem_free(p), TACL_ERR_INVALID_ARG, "already freed");
}

Test(memseg, memory_is_zeroed_aligned_and_found)
{
    const size_t sizes[] = {1, 4095, 4096, 4097, (2u << 20) + 1, 3u << 20};
    void *p[6];
    tacl__memseg_ref_t ref, ref2;

    for (int i = 0; i < 6; i++) {
        size_t n = sizes[i];
        unsigned char *b;

        cr_assert_eq(tacl_mem_alloc(&p[i], n, TACL_MEM_HOST), TACL_OK);
        b = p[i];
        cr_assert_eq((uintptr_t)b % 4096, 0);
        if (n >= (2u << 20))
            cr_assert_eq((uintptr_t)b % (2u << 20), 0, "%zu bytes at %p",
                         n, p[i]);
        for (size_t j = 0; j < n; j += 511)
            cr_assert_eq(b[j], 0);
        cr_assert_eq(b[n - 1], 0);
        memset(b, 0x5a, n);
        /* The whole buffer, and a piece of it at its offset. */
        cr_assert(tacl__memseg_find(b, n, &ref));
        cr_assert_eq(ref.offset, 0);
        cr_assert_geq(ref.size, n + 4096);
        cr_assert(ref.id != 0 && ref.fd >= 0);
        cr_assert(tacl__memseg_find(b + n / 2, n - n / 2, &ref2));
        cr_assert_eq(ref2.id, ref.id);
        cr_assert_eq(ref2.offset, n / 2);
    }
    /* Different segments, and ranges not inside one are not found.  Each
     * segment's data is a whole number of pages, so one byte past a
     * page-multiple size is outside it. */
    cr_assert(tacl__memseg_find(p[2], 1, &ref));
    cr_assert(tacl__memseg_find(p[3], 1, &ref2));
    cr_assert_neq(ref.id, ref2.id);
    cr_assert_not(tacl__memseg_find(p[2], 4097, &ref));
    cr_assert_eq(ref.id, 0);
    cr_assert_not(tacl__memseg_find((char *)p[0] - 1, 2, &ref));
    cr_assert_not(tacl__memseg_find(&ref, sizeof(ref), &ref));
    for (int i = 0; i < 6; i++)
        cr_assert_eq(tacl_mem_free(p[i]), TACL_OK);
    cr_assert_not(tacl__memseg_find(p[5], 1, &ref));
}

/* A child maps the parent's segment the way a peer rank does. */
Test(memseg, another_process_maps_the_segment, .timeout = 30)
{
    const size_t n = (1u << 20) + 123;
    int to_child[2], to_parent[2], status;
    tacl__memseg_ref_t ref;
    unsigned char *b;
    pid_t parent = getpid(), child;
    tacl_status_t freed;
    unsigned char seen;
    char c = 0;

    cr_assert_eq(tacl_mem_alloc((void **)&b, n, TACL_MEM_HOST), TACL_OK);
    for (size_t j = 0; j < n; j++)
        b[j] = (unsigned char)(j * 7 + 1);
    cr_assert(tacl__memseg_find(b, n, &ref));
    cr_assert_eq(pipe(to_child), 0);
    cr_assert_eq(pipe(to_parent), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        tacl__memseg_ref_t wrong = ref;
        unsigned char *m;
        int ok = 1;

        /* A parent that fails first closes its ends: reads see EOF. */
        close(to_child[1]);
        close(to_parent[0]);
        /* Not the segment: another id, another size. */
        wrong.id = ref.id + 1000;
        ok &= tacl__memseg_attach(parent, &wrong) == NULL;
        wrong = ref;
        wrong.size += 4096;
        ok &= tacl__memseg_attach(parent, &wrong) == NULL;
        m = tacl__memseg_attach(parent, &ref);
        ok &= m != NULL && m != b;
        for (size_t j = 0; ok && j < n; j++)
            ok &= m[j] == (unsigned char)(j * 7 + 1);
        if (ok) {
            m[n - 1] = 0xab;    /* the parent sees it */
            ok &= !tacl__memseg_freed(m, ref.size);
        }
        ok &= write(to_parent[1], "x", 1) == 1;
        ok &= read(to_child[0], &c, 1) == 1;   /* the parent freed it */
        /* Still mapped here, and marked freed. */
        ok &= m != NULL && tacl__memseg_freed(m, ref.size) &&
              m[0] == 1;
        if (m != NULL)
            tacl__memseg_detach(m, ref.size);
        /* The descriptor is gone with the segment. */
        ok &= tacl__memseg_attach(parent, &ref) == NULL;
        _exit(ok ? 0 : 1);
    }
    close(to_child[0]);
    close(to_parent[1]);
    /* Release the child before any assertion can end this process. */
    cr_assert_eq(read(to_parent[0], &c, 1), 1);
    seen = b[n - 1];
    freed = tacl_mem_free(b);
    cr_assert_eq(write(to_child[1], "y", 1), 1);
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert_eq(seen, 0xab);
    cr_assert_eq(freed, TACL_OK);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child's checks failed");
}

/* Every free is noted in the release log, in order, range and all; a
 * reader that fell more than the ring behind is told to forget. */
Test(memseg, frees_are_noted_in_the_release_log)
{
    uint64_t cursor = tacl__mem_released_count(), late = cursor;
    tacl__mem_range_t r[4];
    void *a = NULL, *b = NULL;
    uintptr_t base;
    uint64_t bytes;

    cr_assert_eq(tacl__mem_released(&cursor, r, 4), 0);
    cr_assert_eq(tacl_mem_alloc(&a, 5000, TACL_MEM_HOST), TACL_OK);
    cr_assert_eq(tacl_mem_alloc(&b, 1 << 20, TACL_MEM_HOST), TACL_OK);
    cr_assert(tacl__memseg_range((char *)a + 100, 4000, &base, &bytes));
    cr_assert_eq(base, (uintptr_t)a);
    cr_assert_eq(bytes, 8192, "%llu bytes", (unsigned long long)bytes);
    cr_assert(!tacl__memseg_range((char *)a + 100, 9000, &base, &bytes));
    cr_assert_eq(tacl_mem_free(b), TACL_OK);
    cr_assert_eq(tacl_mem_free(a), TACL_OK);
    cr_assert(!tacl__memseg_range(a, 1, &base, &bytes));
    cr_assert_eq(tacl__mem_released(&cursor, r, 1), 1);
    cr_assert_eq(r[0].base, (uintptr_t)b);
    cr_assert_eq(r[0].len, 1u << 20);
    cr_assert_eq(tacl__mem_released(&cursor, r, 4), 1);
    cr_assert_eq(r[0].base, (uintptr_t)a);
    cr_assert_eq(tacl__mem_released(&cursor, r, 4), 0);

    for (int i = 0; i < TACL__MEM_RELEASED_RING; ++i) {
        cr_assert_eq(tacl_mem_alloc(&a, 4096, TACL_MEM_HOST), TACL_OK);
        cr_assert_eq(tacl_mem_free(a), TACL_OK);
    }
    /* late saw none of the ring's last frees plus the two above. */
    cr_assert_eq(tacl__mem_released(&late, r, 4), -1);
    cr_assert_eq(late, tacl__mem_released_count());
    cr_assert_eq(tacl__mem_released(&cursor, r, 4), 4);
}
