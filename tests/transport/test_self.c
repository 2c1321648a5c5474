/*
 * Tests of the self transport: a rank's messages to itself, every size
 * class, (tag) FIFO order, length mismatch, and the "unsupported" stubs.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "tacl_build_config.h"
#include "tl_harness.h"

static tacl__tl_t *self_init(void)
{
    const char *ids[1] = {"n0"};
    tacl__tl_params_t params = {.rank = 0, .nranks = 1, .node_id = "n0",
                                .node_ids = ids, .timeout_s = 10};
    tacl__tl_t *tl = NULL;

    cr_assert_eq(tacl__tl_self_ops.init(&params, &tl), TACL_OK);
    cr_assert_not_null(tl);
    return tl;
}

Test(transport_self, sizes)
{
    static const size_t sizes[] = {0, 1, 16384, 16385, 1u << 20, 64u << 20};
    tacl__tl_t *tl = self_init();

    cr_assert(tacl__tl_reachable(tl, 0));
    cr_assert(!tacl__tl_reachable(tl, 1));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        uint8_t *src = malloc(sizes[i] + 1), *dst = malloc(sizes[i] + 1);
        tlh_op_t s, r;
        int pending = 0;

        cr_assert(src && dst);
        tlh_fill(src, sizes[i], i);
        /* The receive first, then the send: either order must match. */
        cr_assert_eq(tacl__tl_recv(tl, tlh_op(&r, 0, 5, dst, sizes[i],
                                              &pending)), TACL_OK);
        cr_assert_eq(tacl__tl_send(tl, tlh_op(&s, 0, 5, src, sizes[i],
                                              &pending)), TACL_OK);
        cr_assert_eq(r.calls, 0, "completed inside the post call");
        cr_assert_eq(tlh_drive(tl, &pending, 10, 10), 0);
        cr_assert_eq(s.status, TACL_OK);
        cr_assert_eq(r.status, TACL_OK);
        cr_assert_eq(r.calls, 1);
        cr_assert(tlh_check(dst, sizes[i], i), "size %zu corrupted",
                  sizes[i]);
        free(src);
        free(dst);
    }
    tacl__tl_close(tl);
}

Test(transport_self, fifo_and_tags)
{
    enum { N = 20 };
    tacl__tl_t *tl = self_init();
    uint32_t src[N], dst[N];
    tlh_op_t s[N], r[N];
    int pending = 0;

    /* Sends first: tags 0 and 1 interleaved, receives in reverse tag. */
    for (int i = 0; i < N; ++i) {
        src[i] = (uint32_t)i;
        cr_assert_eq(tacl__tl_send(tl, tlh_op(&s[i], 0, (uint64_t)(i % 2),
                                              &src[i], 4, &pending)),
                     TACL_OK);
    }
    for (int i = 0; i < N; ++i) {
        int k = i < N / 2 ? 2 * i + 1 : 2 * (i - N / 2);

        dst[k] = UINT32_MAX;
        cr_assert_eq(tacl__tl_recv(tl, tlh_op(&r[k], 0, (uint64_t)(k % 2),
                                              &dst[k], 4, &pending)),
                     TACL_OK);
    }
    cr_assert_eq(tlh_drive(tl, &pending, 10, 10), 0);
    for (int i = 0; i < N; ++i) {
        cr_assert_eq(r[i].status, TACL_OK);
        cr_assert_eq(dst[i], (uint32_t)i, "receive %d got message %u", i,
                     dst[i]);
    }
    tacl__tl_close(tl);
}

Test(transport_self, length_mismatch_and_cancel)
{
    tacl__tl_t *tl = self_init();
    char a[8] = "abcdefg", b[8];
    tlh_op_t s, r, lone;
    int pending = 0;

    cr_assert_eq(tacl__tl_send(tl, tlh_op(&s, 0, 1, a, 8, &pending)),
                 TACL_OK);
    cr_assert_eq(tacl__tl_recv(tl, tlh_op(&r, 0, 1, b, 4, &pending)),
                 TACL_OK);
    cr_assert_eq(tlh_drive(tl, &pending, 10, 10), 0);
    cr_assert_eq(r.status, TACL_ERR_INVALID_USAGE);
    /* A receive nobody sends to completes only when cancelled. */
    cr_assert_eq(tacl__tl_recv(tl, tlh_op(&lone, 0, 2, b, 4, &pending)),
                 TACL_OK);
    cr_assert_eq(tacl__tl_progress(tl), 0);
    cr_assert_eq(lone.calls, 0);
    tacl__tl_cancel_all(tl, TACL_ERR_REMOTE);
    cr_assert_eq(lone.calls, 1);
    cr_assert_eq(lone.status, TACL_ERR_REMOTE);
    cr_assert_eq(pending, 0);
    /* A peer other than itself is refused at once. */
    cr_assert_eq(tacl__tl_send(tl, tlh_op(&s, 1, 1, a, 8, &pending)),
                 TACL_ERR_INVALID_ARG);
    tacl__tl_close(tl);
}

Test(transport_self, unsupported_stubs)
{
    tacl__tl_t *tl = self_init();
    tacl__tl_op_t op = {.peer = 0};

    cr_assert_eq(tacl__tl_post_unsupported(tl, &op), TACL_ERR_UNSUPPORTED);
    cr_assert_eq(tacl__tl_reachable_none(tl, 0), 0);
    cr_assert_eq(tacl__tl_wait_yield(tl, 10), TACL_OK);
    tacl__tl_close(tl);
}

/* What its caps do not list, and a missing buffer, are refused at once. */
Test(transport_self, refuses_what_caps_do_not_list)
{
    tacl__tl_t *tl = self_init();
    uint8_t buf[8];
    tlh_op_t s;
    int pending = 0;
    tacl__tl_op_t *op = tlh_op(&s, 0, 1, buf, sizeof(buf), &pending);

#if TACL_HAVE_CUDA
    /* Built with CUDA it copies device memory too (tests/cuda). */
    cr_assert_neq(tacl__tl_self_ops.caps & TACL__TL_CAP_CUDA, 0);
    op->memtype = TACL_MEM_AUTO; /* unresolved: no transport takes it */
#else
    cr_assert_eq(tacl__tl_self_ops.caps & TACL__TL_CAP_CUDA, 0);
    op->memtype = TACL_MEM_CUDA;
#endif
    cr_assert_eq(tacl__tl_send(tl, op), TACL_ERR_UNSUPPORTED);
    op->memtype = TACL_MEM_HOST;
    op->buf = NULL;
    cr_assert_eq(tacl__tl_recv(tl, op), TACL_ERR_INVALID_ARG);
    /* Neither was queued: no callback runs. */
    cr_assert_eq(tacl__tl_progress(tl), 0);
    cr_assert_eq(pending, 1);
    tacl__tl_close(tl);
}
