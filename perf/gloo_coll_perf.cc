/*
 * gloo_coll_perf: Gloo's collectives, measured like tacl's.
 *
 * The Gloo peer of mpi_coll_perf: it shares common.c and data.c with the
 * tacl perf binaries, so sizes, data, exact checks, timing (warmup,
 * barrier, timed loop, per-operation mean over ranks) and the output
 * table are the same and runs compare side by side.
 *
 * Usage: tacl-run -n N gloo_coll_perf COLL [perf options]
 * COLL is allgather, reduce_scatter or allreduce.  Ranks come from
 * TACL_RANK and TACL_NRANKS (tacl-run, tacl-cluster).  The ranks meet in
 * a gloo::rendezvous::FileStore under TACL_GLOO_STORE (a directory every
 * rank sees; default /tmp/tacl-gloo-UID-ROOTADDR, removed by rank 0 at the
 * end) and talk over gloo::transport::tcp on TACL_SOCKET_IFNAME (default
 * the loopback).  TACL_GLOO_TIMEOUT bounds every wait (seconds, 120).
 *
 * Algorithms (-A): allgather "ring" (gloo::allgather); reduce_scatter
 * "halving_doubling" (ReduceScatterHalvingDoubling, Gloo's only one);
 * allreduce "ring" (gloo::allreduce, Gloo's default and PyTorch's),
 * "bcube", "ring_chunked" and "halving_doubling" (the older algorithm
 * classes).  The algorithm classes work in place on one buffer, so out
 * of place they first copy the input there and the copy is timed, as it
 * would be for any caller.  Gloo has only blocking calls: -z is ignored.
 */
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "common.h"
}

namespace {

enum gloo_algo_t {
    ALGO_RING = 0,
    ALGO_BCUBE,
    ALGO_RING_CHUNKED,
    ALGO_HALVING_DOUBLING,
};

struct gloo_ctx_t {
    tacl_coll_t kind;
    gloo_algo_t algo;
    std::shared_ptr<gloo::Context> ctx;
    int rank, nranks;
    char *scratch;              /* the whole input, for algorithm classes */
};

const struct {
    const char *name;
    tacl_coll_t kind;
    gloo_algo_t algo;
} algo_names[] = {
    {"ring", TACL_COLL_ALLGATHER, ALGO_RING},
    {"halving_doubling", TACL_COLL_REDUCE_SCATTER, ALGO_HALVING_DOUBLING},
    {"ring", TACL_COLL_ALLREDUCE, ALGO_RING},
    {"bcube", TACL_COLL_ALLREDUCE, ALGO_BCUBE},
    {"ring_chunked", TACL_COLL_ALLREDUCE, ALGO_RING_CHUNKED},
    {"halving_doubling", TACL_COLL_ALLREDUCE, ALGO_HALVING_DOUBLING},
};

/* The default algorithm of each collective: the first listed for it. */
int find_algo(tacl_coll_t kind, const char *name, gloo_algo_t *algo_p)
{
    for (const auto &a : algo_names) {
        if (a.kind == kind && (name == NULL || strcmp(name, a.name) == 0)) {
            *algo_p = a.algo;
            return 0;
        }
    }
    return -1;
}

const char *algo_name(tacl_coll_t kind, gloo_algo_t algo)
{
    for (const auto &a : algo_names) {
        if (a.kind == kind && a.algo == algo) {
            return a.name;
        }
    }
    return "invalid";
}

/* A reduction of the new-style API, as a plain function pointer. */
typedef void (*reduce_fn_t)(void *, const void *, const void *, size_t);

/* The new-style reduction of op on T, or NULL when Gloo has none. */
template <typename T>
reduce_fn_t reduce_func(tacl_op_t op)
{
    switch (op) {
    case TACL_SUM:
        return static_cast<reduce_fn_t>(&gloo::sum<T>);
    case TACL_PROD:
        return static_cast<reduce_fn_t>(&gloo::product<T>);
    case TACL_MAX:
        return static_cast<reduce_fn_t>(&gloo::max<T>);
    case TACL_MIN:
        return static_cast<reduce_fn_t>(&gloo::min<T>);
    default:
        return nullptr;
    }
}

/* The reduction of the algorithm classes. */
const gloo::ReductionFunction<float> *reduction(tacl_op_t op)
{
    switch (op) {
    case TACL_PROD:
        return gloo::ReductionFunction<float>::product;
    case TACL_MAX:
        return gloo::ReductionFunction<float>::max;
    case TACL_MIN:
        return gloo::ReductionFunction<float>::min;
    default:
        return gloo::ReductionFunction<float>::sum;
    }
}

void barrier(const gloo_ctx_t *c)
{
    gloo::BarrierOptions opts(c->ctx);

    gloo::barrier(opts);
}

/* An all-reduce of one value over the ranks, for timings and counts. */
template <typename T>
T reduce_value(const gloo_ctx_t *c, T value, tacl_op_t op)
{
    gloo::AllreduceOptions opts(c->ctx);

    opts.setOutput(&value, 1);
    opts.setReduceFunction(reduce_func<T>(op));
    opts.setTag(1);
    gloo::allreduce(opts);
    return value;
}

/*
 * One size, one placement: posts of the same call.  The algorithm classes
 * bind their buffers when built, so an operation is built once per size
 * and run many times, like a persistent request.
 */
class Operation {
public:
    Operation(const gloo_ctx_t *c, const tacl__perf_opts_t *o,
              const tacl__perf_sizes_t *s, char *sendbuf, char *recvbuf,
              int in_place)
        : c_(c), o_(o), s_(s), sendbuf_(sendbuf), recvbuf_(recvbuf),
          in_place_(in_place)
    {
        int count = (int)s->send_count;

        if (c->kind == TACL_COLL_REDUCE_SCATTER) {
            /* In place the input is the receive buffer, as for MPI. */
            work_ = in_place ? (float *)recvbuf : (float *)c->scratch;
            std::vector<int> elems(c->nranks, (int)s->count);
            std::vector<float *> ptrs(1, work_);
            algo_.reset(new gloo::ReduceScatterHalvingDoubling<float>(
                c->ctx, ptrs, count, elems, reduction(o->op)));
        } else if (c->kind == TACL_COLL_ALLREDUCE &&
                   (c->algo == ALGO_RING_CHUNKED ||
                    c->algo == ALGO_HALVING_DOUBLING)) {
            work_ = (float *)recvbuf;
            std::vector<float *> ptrs(1, work_);
            if (c->algo == ALGO_RING_CHUNKED) {
                algo_.reset(new gloo::AllreduceRingChunked<float>(
                    c->ctx, ptrs, count, reduction(o->op)));
            } else {
                algo_.reset(new gloo::AllreduceHalvingDoubling<float>(
                    c->ctx, ptrs, count, reduction(o->op)));
            }
        }
    }

    void run()
    {
        size_t ts = sizeof(float);

        if (algo_) {
            if (!in_place_) {
                memcpy(work_, sendbuf_, s_->send_count * ts);
            }
            algo_->run();
            if (!in_place_ && c_->kind == TACL_COLL_REDUCE_SCATTER) {
                memcpy(recvbuf_, work_, s_->recv_count * ts);
            }
        } else if (c_->kind == TACL_COLL_ALLGATHER) {
            gloo::AllgatherOptions opts(c_->ctx);

            /* Without an input Gloo gathers in place. */
            if (!in_place_) {
                opts.setInput((float *)sendbuf_, s_->send_count);
            }
            opts.setOutput((float *)recvbuf_, s_->recv_count);
            opts.setTag(2);
            gloo::allgather(opts);
        } else {
            gloo::AllreduceOptions opts(c_->ctx);

            if (!in_place_) {
                opts.setInput((float *)sendbuf_, s_->send_count);
            }
            opts.setOutput((float *)recvbuf_, s_->recv_count);
            opts.setReduceFunction(reduce_func<float>(o_->op));
            opts.setAlgorithm(c_->algo == ALGO_BCUBE ?
                              gloo::AllreduceOptions::Algorithm::BCUBE :
                              gloo::AllreduceOptions::Algorithm::RING);
            opts.setTag(3);
            gloo::allreduce(opts);
        }
    }

private:
    const gloo_ctx_t *c_;
    const tacl__perf_opts_t *o_;
    const tacl__perf_sizes_t *s_;
    char *sendbuf_, *recvbuf_;
    int in_place_;
    float *work_ = nullptr;
    std::unique_ptr<gloo::Algorithm> algo_;
};

/* Runs one size, one placement; fills *res. */
void run_one(const gloo_ctx_t *c, const tacl__perf_opts_t *o,
             const tacl__perf_sizes_t *s, char *sendbuf, char *recvbuf,
             int in_place, tacl__perf_result_t *res)
{
    size_t ts = sizeof(float), send_off, recv_off;
    Operation op(c, o, s, sendbuf, recvbuf, in_place);
    double t0, t, agg_t;
    long long wrong;
    int i, j;

    tacl__perf_inplace_offsets(c->kind, s, c->rank, &send_off, &recv_off);
    /* Real data, as tacl's harness times (see there). */
    tacl__perf_fill(c->kind, o, s, c->rank, c->nranks, sendbuf, recvbuf,
                    in_place);
    for (i = 0; i < o->warmup; i++) {
        op.run();
    }
    barrier(c);
    t0 = tacl__perf_now();
    for (i = 0; i < o->iters; i++) {
        for (j = 0; j < o->agg; j++) {
            op.run();
        }
    }
    t = (tacl__perf_now() - t0) * 1e6 / ((double)o->iters * o->agg);
    agg_t = reduce_value<double>(c, t, o->average == 2 ? TACL_MIN :
                                 o->average == 3 ? TACL_MAX : TACL_SUM);
    res->time_us = o->average == 0 ? t :
                   o->average == 1 ? agg_t / c->nranks : agg_t;
    tacl__perf_bandwidth(c->kind, s, c->nranks, res->time_us, &res->algbw,
                         &res->busbw);
    res->wrong = -1;
    if (!o->check) {
        return;
    }
    tacl__perf_fill(c->kind, o, s, c->rank, c->nranks, sendbuf, recvbuf,
                    in_place);
    op.run();
    /* Gloo leaves an in-place reduce-scatter result at the buffer start. */
    if (in_place && recv_off != 0) {
        memmove(recvbuf + recv_off * ts, recvbuf, s->recv_count * ts);
    }
    if (o->inject_error && c->rank == 0) {
        tacl__perf_corrupt(c->kind, o, s, c->rank, recvbuf, in_place);
    }
    wrong = tacl__perf_check(c->kind, o, s, c->rank, c->nranks, recvbuf,
                             in_place);
    res->wrong = reduce_value<long long>(c, wrong, TACL_SUM);
}

int env_int(const char *name, int lo, int hi, int *v_p)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0') {
        return -1;
    }
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *v_p = (int)v;
    return 0;
}

/* The store directory every rank of this job agrees on. */
std::string store_path(void)
{
    const char *dir = getenv("TACL_GLOO_STORE");
    const char *root = getenv("TACL_ROOT_ADDR");
    std::string path;

    if (dir != NULL && *dir != '\0') {
        return dir;
    }
    path = "/tmp/tacl-gloo-" + std::to_string(getuid()) + "-";
    for (const char *p = root ? root : "none"; *p; p++) {
        path += isalnum((unsigned char)*p) ? *p : '_';
    }
    return path;
}

/* Rank 0 removes the store's files once every rank is past them. */
void remove_store(const std::string &path, bool own_dir)
{
    DIR *d = opendir(path.c_str());
    struct dirent *e;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            unlink((path + "/" + e->d_name).c_str());
        }
    }
    closedir(d);
    if (own_dir) {
        rmdir(path.c_str());
    }
}

int run(gloo_ctx_t *c, const tacl__perf_opts_t *o)
{
    tacl__perf_sizes_t s;
    tacl__perf_result_t res[2];
    size_t bytes, send_bytes, recv_bytes;
    std::vector<char> sendbuf, recvbuf, scratch;
    long long wrong = 0;
    FILE *json = NULL;
    const char *label = algo_name(c->kind, c->algo);
    tacl__perf_opts_t shown = *o;
    int p;

    shown.algo = label;
    tacl__perf_max_buffers(c->kind, o, c->nranks, &send_bytes, &recv_bytes);
    /* Touch the buffers so page faults stay out of the first timing. */
    sendbuf.assign(send_bytes ? send_bytes : 1, 0);
    recvbuf.assign(recv_bytes ? recv_bytes : 1, 0);
    if (c->kind == TACL_COLL_REDUCE_SCATTER) {
        scratch.assign(send_bytes ? send_bytes : 1, 0);
        c->scratch = scratch.data();
    }
    if (c->rank == 0) {
        tacl__perf_print_header(stdout, "gloo_coll_perf", "gloo", c->kind,
                                &shown, c->nranks);
        if (o->json_path != NULL) {
            json = tacl__perf_json_open(o->json_path, "gloo", c->kind,
                                        &shown, c->nranks);
        }
    }
    for (bytes = o->min_bytes; bytes <= o->max_bytes;
         bytes = tacl__perf_next_size(o, bytes)) {
        tacl__perf_get_sizes(c->kind, bytes, c->nranks, o->dtype, &s);
        for (p = 0; p < 2; p++) {
            run_one(c, o, &s, sendbuf.data(), recvbuf.data(), p, &res[p]);
        }
        if (c->rank == 0) {
            tacl__perf_print_row(stdout, c->kind, o, &s, res);
            if (json != NULL) {
                tacl__perf_json_row(json, &s, res, NULL);
            }
        }
        if (bytes == SIZE_MAX) {
            break;
        }
    }
    if (c->rank == 0) {
        wrong = tacl__perf_print_footer(stdout);
        if (json != NULL) {
            tacl__perf_json_close(json);
        }
    }
    return reduce_value<long long>(c, wrong, TACL_SUM) != 0;
}

} /* namespace */

int main(int argc, char **argv)
{
    tacl__perf_opts_t o;
    gloo_ctx_t c;
    int code = 0, timeout_s = 120, rc;
    const char *ifname = getenv("TACL_SOCKET_IFNAME");
    std::string path;
    bool own_dir;

    /* --version comes alone, without a collective. */
    if (argc == 2 && strcmp(argv[1], "--version") == 0 &&
        tacl__perf_parse(argc, argv, TACL_COLL_ALLREDUCE, &o, &code) != 0) {
        return code;
    }
    if (argc < 2 || tacl__perf_compared_kind(argv[1], &c.kind) != 0) {
        fprintf(stderr, "usage: gloo_coll_perf allgather|reduce_scatter|"
                "allreduce [perf options, -h for the list]\n");
        return 2;
    }
    argv[1] = argv[0];
    if (tacl__perf_parse(argc - 1, argv + 1, c.kind, &o, &code) != 0) {
        return code;
    }
    if (tacl__perf_refuse_all(argv[0], &o) != 0) {
        return 2;
    }
    if (find_algo(c.kind, o.algo, &c.algo) != 0) {
        fprintf(stderr, "gloo_coll_perf: gloo has no %s algorithm '%s'\n",
                tacl__perf_kind_name(c.kind), o.algo);
        return 2;
    }
    if (o.dtype != TACL_FLOAT32 ||
        (tacl__perf_has_op(c.kind) && reduce_func<float>(o.op) == nullptr)) {
        fprintf(stderr, "gloo_coll_perf: only float with sum, prod, min "
                "or max is measured; use -d float\n");
        return 2;
    }
    if (env_int("TACL_RANK", 0, 1 << 20, &c.rank) != 0 ||
        env_int("TACL_NRANKS", 1, 1 << 20, &c.nranks) != 0 ||
        c.rank >= c.nranks) {
        fprintf(stderr, "gloo_coll_perf: TACL_RANK and TACL_NRANKS are "
                "not set or wrong; start it with tacl-run or "
                "tacl-cluster\n");
        return 2;
    }
    env_int("TACL_GLOO_TIMEOUT", 1, 86400, &timeout_s);
    c.scratch = NULL;
    path = store_path();
    own_dir = getenv("TACL_GLOO_STORE") == NULL;
    if (own_dir && mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "gloo_coll_perf: cannot create %s: %s\n",
                path.c_str(), strerror(errno));
        return 1;
    }
    try {
        gloo::transport::tcp::attr attr;
        gloo::rendezvous::FileStore store(path);

        if (ifname != NULL && *ifname != '\0') {
            attr.iface = ifname;
        } else {
            attr.hostname = "127.0.0.1";
        }
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        auto ctx = std::make_shared<gloo::rendezvous::Context>(c.rank,
                                                               c.nranks);
        ctx->setTimeout(std::chrono::seconds(timeout_s));
        ctx->connectFullMesh(store, dev);
        c.ctx = ctx;
        rc = run(&c, &o);
        barrier(&c);
        if (c.rank == 0) {
            remove_store(path, own_dir);
        }
    } catch (const std::exception &e) {
        fprintf(stderr, "gloo_coll_perf: rank %d: %s\n", c.rank, e.what());
        return 1;
    }
    return rc;
}
