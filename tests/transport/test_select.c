/*
 * Tests of tacl__tl_select(): the transport chosen for a message by where
 * its peer is and by the memory types the transports' capabilities list.
 * It reads only the ops tables, so the instances here are bare headers
 * pointing at the real tables; a made-up table shows that the order of
 * preference and the memory types decide between transports that reach
 * the same peers.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tacl_build_config.h"
#include "transport.h"

static const tacl__tl_where_t wheres[] = {
    TACL__TL_PEER_SELF, TACL__TL_PEER_NODE, TACL__TL_PEER_NET};

/* A node transport for host and CUDA memory, as cuda_ipc could be. */
static const tacl__transport_ops_t both_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "both",
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_CUDA,
    .reach = TACL__TL_PEER_NODE,
};

static tacl__tl_t self_tl = {&tacl__tl_self_ops};
static tacl__tl_t shm_tl = {&tacl__tl_shm_ops};
static tacl__tl_t both_tl = {&both_ops};
#ifdef TACL_HAVE_UCX
static tacl__tl_t ucx_tl = {&tacl__tl_ucx_ops};
#endif

/* The transports of a context, in the order lib/comm.c creates them. */
static int builtin(tacl__tl_t **tls)
{
    int n = 0;

    tls[n++] = &self_tl;
    tls[n++] = &shm_tl;
#ifdef TACL_HAVE_UCX
    tls[n++] = &ucx_tl;
#endif
    return n;
}

Test(transport_select, host_memory_by_where)
{
    tacl__tl_t *tls[4];
    int n = builtin(tls);
    tacl__tl_why_t why = {"untouched"};

    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_SELF, TACL_MEM_HOST,
                                 &why), 0);
    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_NODE, TACL_MEM_HOST,
                                 &why), 1);
#ifdef TACL_HAVE_UCX
    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_NET, TACL_MEM_HOST,
                                 &why), 2);
#else
    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_NET, TACL_MEM_HOST,
                                 &why), -1);
    cr_assert(strstr(why.text, "reaches ranks of other nodes"), "%s",
              why.text);
    strcpy(why.text, "untouched");
#endif
    /* A choice leaves the reason alone. */
    cr_assert_str_eq(why.text, "untouched");
}

Test(transport_select, cuda_memory_finds_no_transport)
{
    tacl__tl_t *tls[4];
    int n = builtin(tls);

    for (size_t i = 0; i < sizeof(wheres) / sizeof(wheres[0]); ++i) {
        tacl__tl_why_t why = {""};

#if TACL_HAVE_CUDA
        /* Built with CUDA, self copies device memory to itself. */
        if (wheres[i] == TACL__TL_PEER_SELF) {
            cr_assert_eq(tacl__tl_select(tls, n, wheres[i], TACL_MEM_CUDA,
                                         &why), 0);
            continue;
        }
#endif
        cr_assert_eq(tacl__tl_select(tls, n, wheres[i], TACL_MEM_CUDA,
                                     &why), -1);
        cr_assert(strstr(why.text, "no transport here"), "%s", why.text);
        if (wheres[i] == TACL__TL_PEER_NET && n < 3) {
            cr_assert(strstr(why.text, "reaches ranks of other nodes"),
                      "%s", why.text);
            continue;
        }
        cr_assert(strstr(why.text, "moves CUDA memory to"), "%s", why.text);
        cr_assert(strstr(why.text, "host memory only"), "%s", why.text);
    }
}

/* The reason names the transports that reach the peer, or the type. */
Test(transport_select, reasons)
{
    tacl__tl_t *tls[4];
    int n = builtin(tls);
    tacl__tl_why_t why;

    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_NODE, TACL_MEM_CUDA,
                                 &why), -1);
    cr_assert_str_eq(why.text, "no transport here moves CUDA memory to "
                     "other ranks of this node: shm moves host memory only");
    cr_assert_eq(tacl__tl_select(tls, n, TACL__TL_PEER_SELF, TACL_MEM_AUTO,
                                 &why), -1);
    cr_assert(strstr(why.text, "unresolved (AUTO) memory"), "%s", why.text);
}

Test(transport_select, no_network_transport)
{
    tacl__tl_t *tls[] = {&self_tl, &shm_tl};
    tacl__tl_why_t why;

    cr_assert_eq(tacl__tl_select(tls, 2, TACL__TL_PEER_NET, TACL_MEM_HOST,
                                 &why), -1);
    cr_assert(strstr(why.text, "no transport here reaches ranks of other "
                     "nodes"), "%s", why.text);
    cr_assert_eq(tacl__tl_select(tls, 0, TACL__TL_PEER_SELF, TACL_MEM_HOST,
                                 &why), -1);
}

Test(transport_select, preference_then_memory_type)
{
    tacl__tl_t *tls[] = {&self_tl, &shm_tl, &both_tl};
    tacl__tl_t *first[] = {&both_tl, &shm_tl};
    tacl__tl_why_t why;

    /* Host memory: the first that fits, shm; CUDA memory: only both. */
    cr_assert_eq(tacl__tl_select(tls, 3, TACL__TL_PEER_NODE, TACL_MEM_HOST,
                                 &why), 1);
    cr_assert_eq(tacl__tl_select(tls, 3, TACL__TL_PEER_NODE, TACL_MEM_CUDA,
                                 &why), 2);
    cr_assert_eq(tacl__tl_select(first, 2, TACL__TL_PEER_NODE,
                                 TACL_MEM_HOST, &why), 0);
    /* Reaching the node does not reach the rank itself. */
    cr_assert_eq(tacl__tl_select(first, 2, TACL__TL_PEER_SELF,
                                 TACL_MEM_HOST, &why), -1);
}

Test(transport_select, where_of_a_peer)
{
    cr_assert_eq(tacl__tl_where(3, 3, 1), TACL__TL_PEER_SELF);
    cr_assert_eq(tacl__tl_where(2, 3, 1), TACL__TL_PEER_NODE);
    cr_assert_eq(tacl__tl_where(2, 3, 0), TACL__TL_PEER_NET);
}

/* Each built-in table lists the peers its instances reach. */
Test(transport_select, builtin_reach)
{
    cr_assert_eq(tacl__tl_self_ops.reach, TACL__TL_PEER_SELF);
    cr_assert_eq(tacl__tl_shm_ops.reach, TACL__TL_PEER_NODE);
#ifdef TACL_HAVE_UCX
    cr_assert_eq(tacl__tl_ucx_ops.reach, TACL__TL_PEER_NET);
#endif
}

/*
 * Only shm's peers can map one another's memory (the fast path's area);
 * the bit changes no choice of a transport.
 */
Test(transport_select, only_shm_can_map)
{
    static const tacl__transport_ops_t map_ops = {
        .size = sizeof(tacl__transport_ops_t),
        .name = "map",
        .caps = TACL__TL_CAP_MAP,
        .reach = TACL__TL_PEER_NODE,
    };
    tacl__tl_t map_tl = {&map_ops};
    tacl__tl_t *tls[] = {&map_tl, &shm_tl};
    tacl__tl_why_t why;

    cr_assert(tacl__tl_can_map(&shm_tl));
    cr_assert(!tacl__tl_can_map(&self_tl));
    cr_assert(!tacl__tl_can_map(&both_tl));
#ifdef TACL_HAVE_UCX
    cr_assert(!tacl__tl_can_map(&ucx_tl));
#endif
#if TACL_HAVE_CUDA
    cr_assert_eq(tacl__tl_cuda_ipc_ops.caps & TACL__TL_CAP_MAP, 0);
#endif
    cr_assert_eq(tacl__tl_select(tls, 2, TACL__TL_PEER_NODE, TACL_MEM_HOST,
                                 &why), 1);
}

#if TACL_HAVE_CUDA
/*
 * With CUDA built, the context lists cuda_ipc before shm (its table in
 * executor/context.c): a device message within a node takes cuda_ipc,
 * a host message still takes shm, and cuda_ipc never serves the rank
 * itself or another node.
 */
Test(transport_select, cuda_ipc_for_device_memory_in_a_node)
{
    static tacl__tl_t cipc_tl = {&tacl__tl_cuda_ipc_ops};
    tacl__tl_t *tls[] = {&self_tl, &cipc_tl, &shm_tl};
    tacl__tl_why_t why = {""};

    cr_assert_str_eq(tacl__tl_name(&cipc_tl), "cuda_ipc");
    cr_assert_eq(tacl__tl_cuda_ipc_ops.caps &
                     (TACL__TL_CAP_HOST | TACL__TL_CAP_CUDA),
                 TACL__TL_CAP_CUDA);
    cr_assert_eq(tacl__tl_cuda_ipc_ops.reach, TACL__TL_PEER_NODE);
    cr_assert_eq(tacl__tl_select(tls, 3, TACL__TL_PEER_NODE, TACL_MEM_CUDA,
                                 &why), 1);
    cr_assert_eq(tacl__tl_select(tls, 3, TACL__TL_PEER_NODE, TACL_MEM_HOST,
                                 &why), 2);
    cr_assert_eq(tacl__tl_select(tls, 3, TACL__TL_PEER_NET, TACL_MEM_CUDA,
                                 &why), -1);
    cr_assert(strstr(why.text, "reaches ranks of other nodes"), "%s",
              why.text);
}
#endif
