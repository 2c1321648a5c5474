/*
 * Compressed gradient reduction (see gcomp.h).
 *
 * Cupcake (thesis chapter 5) fuses consecutive gradients into one call so
 * that a group pays the codec's and the collective's fixed costs once.
 * tacl's compressed reduce-scatter hands rank r block r of its input, so
 * a fused group of layers is packed block-major: rank r's block is the
 * concatenation of every layer's shard r, and what comes back is this
 * rank's shard of each layer, one after the other.  The residual of
 * error feedback stays in the packed layout, which is fixed as long as
 * the plan is.
 */
#include "gcomp.h"

#include <stdio.h>
#include <string.h>

int gcomp_codec_init(gcomp_codec_t *c, const char *name, double density,
                     int bits, char *why, size_t whylen)
{
    memset(c, 0, sizeof(*c));
    if (tacl_codec_find(name, &c->codec) != TACL_OK) {
        snprintf(why, whylen, "--compress: %s", tacl_last_error());
        return -1;
    }
    c->params.density = density > 0.0 ? density : 0.01;
    if (bits > 0)
        c->params.bits = bits;
    else
        c->params.bits = strcmp(name, "int4") == 0 ? 4 : 8;
    if (density < 0.0 || density > 1.0) {
        snprintf(why, whylen, "--density %g is outside (0, 1]", density);
        return -1;
    }
    if (tacl_codec_check(c->codec, &c->params) != TACL_OK) {
        snprintf(why, whylen, "--compress %s with --density/--bits: %s", name,
                 tacl_last_error());
        return -1;
    }
    c->scheme = (c->codec->flags & TACL_CODEC_SUMMABLE) ? TACL_COMP_SUM
                                                        : TACL_COMP_SHUFFLE;
    c->error_feedback = 1;
    c->hops = GCOMP_HOPS_AUTO;
    return 0;
}

uint64_t gcomp_digest(const gcomp_codec_t *c)
{
    uint64_t h = 1469598103934665603ull, v[5];
    const char *name = c->codec->name;

    while (*name)
        h = (h ^ (uint8_t)*name++) * 1099511628211ull;
    memcpy(&v[0], &c->params.density, sizeof(v[0]));
    v[1] = (uint64_t)c->params.bits << 32 | (uint64_t)c->params.block;
    v[2] = (uint64_t)c->scheme;
    v[3] = (uint64_t)c->error_feedback;
    v[4] = (uint64_t)c->hops;
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 8; b++)
            h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
    return h;
}

static const char *const hops_names[] = {"auto", "inter", "all"};

int gcomp_hops_parse(const char *name, gcomp_hops_t *hops_p)
{
    for (int k = 0; k < 3; k++)
        if (strcmp(name, hops_names[k]) == 0) {
            *hops_p = (gcomp_hops_t)k;
            return 0;
        }
    return -1;
}

const char *gcomp_hops_name(gcomp_hops_t hops)
{
    return (unsigned)hops < 3 ? hops_names[hops] : "invalid";
}

int gcomp_route(gcomp_hops_t hops, tacl_comm_t comm, tacl_comm_t world,
                gcomp_route_t *route_p, char *why, size_t whylen)
{
    int nodes = 1, world_nodes = 1, size = 1, local = 1, span[2];
    tacl_status_t st;

    *route_p = GCOMP_ROUTE_FLAT;
    if (hops == GCOMP_HOPS_ALL)
        return 0;
    st = tacl_comm_n_nodes(comm, &nodes);
    if (st == TACL_OK)
        st = tacl_comm_n_nodes(world, &world_nodes);
    if (st == TACL_OK)
        st = tacl_comm_size(comm, &size);
    if (st == TACL_OK)
        st = tacl_comm_local_size(comm, &local);
    /* The fewest and (negated) the most ranks a node of comm has. */
    span[0] = local;
    span[1] = -local;
    if (st == TACL_OK && nodes > 1)
        st = tacl_allreduce(span, span, 2, TACL_INT32, TACL_MIN, comm, NULL);
    if (st != TACL_OK) {
        snprintf(why, whylen, "--compress-hops: %s", tacl_last_error());
        return -1;
    }
    if (nodes == 1) {
        /* Nothing between nodes: dense, but a one-node job compresses
         * where it asked to. */
        if (hops == GCOMP_HOPS_INTER || world_nodes > 1)
            *route_p = GCOMP_ROUTE_DENSE;
        return 0;
    }
    if (span[0] != -span[1]) {
        if (hops == GCOMP_HOPS_AUTO)
            return 0;
        snprintf(why, whylen, "--compress-hops inter needs the same number "
                 "of ranks on every node (%d ranks on %d nodes, %d to %d a "
                 "node)", size, nodes, span[0], -span[1]);
        return -1;
    }
    /* One rank a node: every hop is between nodes, the flat call. */
    if (span[0] > 1)
        *route_p = GCOMP_ROUTE_INTER;
    return 0;
}

void gcomp_pack(int size, int nl, float *const *grads, const size_t *counts,
                float *pack)
{
    size_t at = 0;

    for (int r = 0; r < size; r++)
        for (int i = 0; i < nl; i++) {
            size_t chunk = counts[i] / (size_t)size;

            memcpy(pack + at, grads[i] + (size_t)r * chunk,
                   chunk * sizeof(float));
            at += chunk;
        }
}

void gcomp_unpack_add(int size, int nl, const size_t *counts,
                      const float *shard, float *const *dst)
{
    size_t at = 0;

    for (int i = 0; i < nl; i++) {
        size_t chunk = counts[i] / (size_t)size;

        for (size_t k = 0; k < chunk; k++)
            dst[i][k] += shard[at + k];
        at += chunk;
    }
}

static tacl_comp_hops_t comp_hops(gcomp_route_t route)
{
    return route == GCOMP_ROUTE_INTER ? TACL_COMP_HOPS_INTER
                                      : TACL_COMP_HOPS_ALL;
}

tacl_status_t gcomp_reduce_scatter(const gcomp_codec_t *c, int compress,
                                   gcomp_route_t route, tacl_comm_t comm, int size, int nl,
                                   float *const *grads, const size_t *counts,
                                   float *const *dst, float *err, float *pack,
                                   float *shard, tacl_request_t *req_p)
{
    size_t block = 0;
    tacl_status_t st;

    for (int i = 0; i < nl; i++)
        block += counts[i] / (size_t)size;
    compress = compress && route != GCOMP_ROUTE_DENSE;
    gcomp_pack(size, nl, grads, counts, pack);
    if (compress && req_p != NULL)
        return tacl_comp_reduce_scatter_hops_nb(
            pack, shard, block, c->codec, &c->params,
            c->error_feedback ? err : NULL, c->scheme, comp_hops(route),
            comm, req_p);
    if (req_p != NULL)
        return tacl_reduce_scatter_nb(pack, shard, block, TACL_FLOAT32,
                                      TACL_SUM, comm, NULL, req_p);
    if (compress)
        st = tacl_comp_reduce_scatter_hops(pack, shard, block, c->codec,
                                           &c->params,
                                           c->error_feedback ? err : NULL,
                                           c->scheme, comp_hops(route), comm);
    else
        st = tacl_reduce_scatter(pack, shard, block, TACL_FLOAT32, TACL_SUM,
                                 comm, NULL);
    if (st != TACL_OK)
        return st;
    gcomp_unpack_add(size, nl, counts, shard, dst);
    return TACL_OK;
}

tacl_status_t gcomp_allreduce(const gcomp_codec_t *c, int compress,
                              gcomp_route_t route, tacl_comm_t comm, int nl, float *const *bufs,
                              const size_t *counts, float *err, float *pack)
{
    size_t at = 0, total;
    tacl_status_t st;

    for (int i = 0; i < nl; i++) {
        memcpy(pack + at, bufs[i], counts[i] * sizeof(float));
        at += counts[i];
    }
    total = at;
    if (compress && route != GCOMP_ROUTE_DENSE)
        st = tacl_comp_allreduce_hops(pack, pack, total, c->codec,
                                      &c->params,
                                      c->error_feedback ? err : NULL,
                                      c->scheme, comp_hops(route), comm);
    else
        st = tacl_allreduce(pack, pack, total, TACL_FLOAT32, TACL_SUM, comm,
                            NULL);
    if (st != TACL_OK)
        return st;
    at = 0;
    for (int i = 0; i < nl; i++) {
        memcpy(bufs[i], pack + at, counts[i] * sizeof(float));
        at += counts[i];
    }
    return TACL_OK;
}
