/*
 * The tacl half of the perf harness: make a communicator from the
 * environment, then for each size time the collective out of place and in
 * place, check one more run exactly, and print a row in nccl-tests' layout
 * followed by a comment line with the bytes per operation rank 0 sent
 * through each transport (tacl_comm_get_counters()).
 *
 * Timing follows nccl-tests: warmup iterations, a barrier, then iters
 * iterations of agg operations each (one group when agg > 1); the time per
 * operation is the loop time over iters * agg, then the mean (or min, max,
 * rank 0's) over ranks.  With -z 0 each iteration posts the "_nb" form and
 * waits for its request, so operations never overlap each other and the
 * figures compare with blocking MPI calls.
 *
 * With --mem cuda the buffers are device memory (cudaMalloc, or with -R 1
 * tacl_mem_alloc's, which peers map once) and every call is posted on a
 * stream of the harness's own, as nccl-tests does; the loops end with
 * cudaStreamSynchronize before the clock is read.
 * Data are made and checked in host copies of the buffers, moved with
 * cudaMemcpy outside the timed loops.  Without --mem cuda nothing of this
 * runs: host buffers, NULL stream, as before.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

#if TACL_PERF_MPI
#include <mpi.h>
#endif
#if TACL_PERF_CUDA
#include <cuda_runtime_api.h>
#endif

#define PERF_ALIGN 4096
#define PERF_COUNTERS_TEXT 512

typedef struct {
    const tacl__perf_coll_t *coll;
    const tacl__perf_opts_t *opts;
    tacl_comm_t comm;
    int rank;
    int nranks;
    char *sendbuf;
    char *recvbuf;
    char *send_host;        /* where data are made and checked: the */
    char *recv_host;        /* buffers themselves, or host copies */
    size_t send_bytes;
    size_t recv_bytes;
    void *stream;           /* cudaStream_t with --mem cuda, else NULL */
} perf_run_t;

/* Bytes per operation per transport of one placement, as text. */
typedef struct {
    char text[PERF_COUNTERS_TEXT];
    char json[PERF_COUNTERS_TEXT];
    char links[PERF_COUNTERS_TEXT];  /* bytes per link class, as text */
    char algo[32];                   /* what the operation ran with */
} perf_counters_t;

static void die(perf_run_t *run, const char *what, tacl_status_t st)
{
    fprintf(stderr, "rank %d: %s failed: %s: %s\n", run->rank, what,
            tacl_status_string(st), tacl_comm_last_error(run->comm));
    if (run->comm != NULL) {
        tacl_comm_abort(run->comm);
    }
    exit(1);
}

static tacl_status_t wait_free(tacl_request_t req)
{
    tacl_status_t st, st_free;

    if (req == NULL) {
        return TACL_OK;
    }
    st = tacl_request_wait(req);
    st_free = tacl_request_free(req);
    return st != TACL_OK ? st : st_free;
}

/* One iteration: agg operations, in one group when agg > 1. */
static tacl_status_t run_iter(const perf_run_t *run,
                              const tacl__perf_call_t *call)
{
    const tacl__perf_opts_t *o = run->opts;
    tacl_request_t req = NULL;
    tacl_status_t st = TACL_OK, st_end;
    int a;

    if (o->agg == 1) {
        if (o->blocking) {
            return run->coll->post(call, NULL);
        }
        st = run->coll->post(call, &req);
        return st != TACL_OK ? st : wait_free(req);
    }
    st = tacl_group_start();
    if (st != TACL_OK) {
        return st;
    }
    for (a = 0; a < o->agg && st == TACL_OK; a++) {
        st = run->coll->post(call, NULL);
    }
    /* The group is closed even after an error, to keep nesting right. */
    if (o->blocking) {
        st_end = tacl_group_end();
    } else {
        st_end = tacl_group_end_nb(&req);
        if (st_end == TACL_OK) {
            st_end = wait_free(req);
        }
    }
    return st != TACL_OK ? st : st_end;
}

static void read_counters(perf_run_t *run, double ops, perf_counters_t *c)
{
    tacl_counters_t cnt;
    tacl_status_t st;
    size_t tl = 0, jl = 0;
    int i;

    st = tacl_comm_get_counters(run->comm, &cnt);
    if (st != TACL_OK) {
        die(run, "tacl_comm_get_counters", st);
    }
    c->text[0] = '\0';
    jl += (size_t)snprintf(c->json, sizeof(c->json), "{");
    for (i = 0; i < cnt.n_transports && i < TACL_MAX_TRANSPORTS; i++) {
        const tacl_transport_counter_t *t = &cnt.transports[i];
        double per_op = (double)t->bytes / ops;

        if (tl < sizeof(c->text)) {
            tl += (size_t)snprintf(c->text + tl, sizeof(c->text) - tl,
                                   "%s%.*s=%.0f", i ? " " : "",
                                   (int)sizeof(t->name), t->name, per_op);
        }
        if (jl < sizeof(c->json)) {
            jl += (size_t)snprintf(c->json + jl, sizeof(c->json) - jl,
                                   "%s\"%.*s\": %.0f", i ? ", " : "",
                                   (int)sizeof(t->name), t->name, per_op);
        }
    }
    if (jl < sizeof(c->json)) {
        snprintf(c->json + jl, sizeof(c->json) - jl, "}");
    }
    if (c->text[0] == '\0') {
        snprintf(c->text, sizeof(c->text), "none");
    }
    tl = 0;
    c->links[0] = '\0';
    for (i = 0; i < TACL_NUM_LINK_CLASSES && tl < sizeof(c->links); i++) {
        tl += (size_t)snprintf(c->links + tl, sizeof(c->links) - tl,
                               "%s%.*s=%.0f", i ? " " : "",
                               (int)sizeof(cnt.links[i].name),
                               cnt.links[i].name,
                               (double)cnt.links[i].bytes / ops);
    }
    snprintf(c->algo, sizeof(c->algo), "%s",
             tacl_comm_last_algorithm(run->comm));
}

/*
 * Device buffers (--mem cuda).  The helpers do nothing for host buffers,
 * so the host path is unchanged.
 */
#if TACL_PERF_CUDA
static void cuda_check(perf_run_t *run, const char *what, cudaError_t err)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "rank %d: %s failed: %s\n", run->rank, what,
                cudaGetErrorString(err));
        if (run->comm != NULL) {
            tacl_comm_abort(run->comm);
        }
        exit(1);
    }
}
#endif

/* Wait for what was posted on the run's stream. */
static void sync_stream(perf_run_t *run)
{
#if TACL_PERF_CUDA
    if (run->stream != NULL) {
        cuda_check(run, "cudaStreamSynchronize",
                   cudaStreamSynchronize((cudaStream_t)run->stream));
    }
#else
    (void)run;
#endif
}

#if TACL_PERF_CUDA
/*
 * Bytes of the send and receive buffers one size of one placement uses
 * (in place: the one buffer, as far as either count reaches).
 */
static void used_bytes(const perf_run_t *run, const tacl__perf_sizes_t *s,
                       int in_place, size_t *send_p, size_t *recv_p)
{
    size_t ts = tacl__perf_dtype_size(run->opts->dtype);
    size_t big = (s->send_count > s->recv_count ? s->send_count
                                                : s->recv_count) * ts;

    *send_p = in_place ? 0 : s->send_count * ts;
    *recv_p = in_place ? big : s->recv_count * ts;
    if (*recv_p > run->recv_bytes) {
        *recv_p = run->recv_bytes;
    }
}
#endif

/* Host copies to the device (to_dev) or back; nothing for host buffers. */
static void move_data(perf_run_t *run, const tacl__perf_sizes_t *s,
                      int in_place, int to_dev)
{
#if TACL_PERF_CUDA
    size_t sb, rb;

    if (run->stream == NULL) {
        return;
    }
    used_bytes(run, s, in_place, &sb, &rb);
    if (to_dev) {
        cuda_check(run, "cudaMemcpy to the device",
                   cudaMemcpy(run->sendbuf, run->send_host, sb,
                              cudaMemcpyHostToDevice));
        cuda_check(run, "cudaMemcpy to the device",
                   cudaMemcpy(run->recvbuf, run->recv_host, rb,
                              cudaMemcpyHostToDevice));
    } else {
        cuda_check(run, "cudaMemcpy from the device",
                   cudaMemcpy(run->recv_host, run->recvbuf, rb,
                              cudaMemcpyDeviceToHost));
    }
#else
    (void)run;
    (void)s;
    (void)in_place;
    (void)to_dev;
#endif
}

/* Times one size in one placement, then checks it; fills res and c. */
static void run_one(perf_run_t *run, const tacl__perf_sizes_t *s,
                    int in_place, tacl__perf_result_t *res,
                    perf_counters_t *c)
{
    const tacl__perf_opts_t *o = run->opts;
    size_t ts = tacl__perf_dtype_size(o->dtype), send_off, recv_off;
    tacl__perf_call_t call;
    tacl_quant_t quant = {o->qbits, o->qblock};
    double t0, t, agg_t = 0;
    long long wrong = 0, all_wrong = 0;
    tacl_status_t st;
    int i;

    tacl__perf_inplace_offsets(run->coll->kind, s, run->rank, &send_off,
                               &recv_off);
    memset(&call, 0, sizeof(call));
    call.sendbuf = in_place ? run->recvbuf + send_off * ts : run->sendbuf;
    call.recvbuf = in_place ? run->recvbuf + recv_off * ts : run->recvbuf;
    call.count = s->count;
    call.dtype = o->dtype;
    call.op = o->op;
    call.root = o->root;
    call.rank = run->rank;
    call.nranks = run->nranks;
    call.comm = run->comm;
    call.quant = o->qbits != 0 ? &quant : NULL;
    call.stream = run->stream;

    /* Time real data, the values a check uses, as torch and the other
     * libraries' harnesses do: on a virtual machine, zero-filled pages
     * can copy much faster than others (docs/bench/torch.md). */
    tacl__perf_fill(run->coll->kind, o, s, run->rank, run->nranks,
                    run->send_host, run->recv_host, in_place);
    move_data(run, s, in_place, 1);
    for (i = 0; i < o->warmup; i++) {
        if ((st = run_iter(run, &call)) != TACL_OK) {
            die(run, "warmup", st);
        }
    }
    sync_stream(run);
    if ((st = tacl_barrier(run->comm, NULL)) != TACL_OK ||
        (st = tacl_comm_reset_counters(run->comm)) != TACL_OK) {
        die(run, "tacl_barrier", st);
    }
    t0 = tacl__perf_now();
    for (i = 0; i < o->iters; i++) {
        if ((st = run_iter(run, &call)) != TACL_OK) {
            die(run, "timed iteration", st);
        }
    }
    sync_stream(run);
    t = (tacl__perf_now() - t0) * 1e6 / ((double)o->iters * o->agg);
    read_counters(run, (double)o->iters * o->agg, c);

    st = tacl_allreduce(&t, &agg_t, 1, TACL_FLOAT64,
                        o->average == 2 ? TACL_MIN :
                        o->average == 3 ? TACL_MAX : TACL_SUM,
                        run->comm, NULL);
    if (st != TACL_OK) {
        die(run, "tacl_allreduce of the times", st);
    }
    res->time_us = o->average == 0 ? t :
                   o->average == 1 ? agg_t / run->nranks : agg_t;
    tacl__perf_bandwidth(run->coll->kind, s, run->nranks, res->time_us,
                         &res->algbw, &res->busbw);
    res->wrong = -1;
    res->max_error = 0;
    if (!o->check) {
        return;
    }
    tacl__perf_fill(run->coll->kind, o, s, run->rank, run->nranks,
                    run->send_host, run->recv_host, in_place);
    move_data(run, s, in_place, 1);
    if ((st = run_iter(run, &call)) != TACL_OK) {
        die(run, "checked run", st);
    }
    sync_stream(run);
    move_data(run, s, in_place, 0);
    if (o->inject_error && run->rank == 0) {
        tacl__perf_corrupt(run->coll->kind, o, s, run->rank, run->recv_host,
                           in_place);
    }
    wrong = tacl__perf_check(run->coll->kind, o, s, run->rank, run->nranks,
                             run->recv_host, in_place);
    st = tacl_allreduce(&wrong, &all_wrong, 1, TACL_INT64, TACL_SUM,
                        run->comm, NULL);
    if (st != TACL_OK) {
        die(run, "tacl_allreduce of the error counts", st);
    }
    res->wrong = all_wrong;
    if (o->qbits != 0) {
        double err = tacl__perf_last_max_error(), all_err = 0;

        st = tacl_allreduce(&err, &all_err, 1, TACL_FLOAT64, TACL_MAX,
                            run->comm, NULL);
        if (st != TACL_OK) {
            die(run, "tacl_allreduce of the errors", st);
        }
        res->max_error = all_err;
    }
}

/* A free loopback port for a single-rank run without a launcher. */
static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        port = ntohs(sa.sin_port);
    }
    close(fd);
    return port;
}

/*
 * Prepare the environment tacl_comm_init_env() reads, and TACL_ALGO from
 * -A (a bare name applies to this collective: "-A ring" on all_gather_perf
 * is "allgather=ring").  Under mpirun the
 * ranks come from Open MPI's variables, but the rendezvous address must be
 * given unless the harness was built with MPI, which then hands out the
 * unique id.  Without any launcher, run one rank.
 * Returns 0, or -1 after printing why.
 */
static int prepare_env(const char *prog, tacl__perf_opts_t *o,
                       tacl_coll_t kind)
{
    const char *ompi_rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *ompi_size = getenv("OMPI_COMM_WORLD_SIZE");
    const char *ompi_local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int have_root = getenv("TACL_ROOT_ADDR") != NULL ||
                    (getenv("MASTER_ADDR") && getenv("MASTER_PORT"));
    int have_rank = getenv("TACL_RANK") != NULL || getenv("RANK") != NULL;
    char buf[64];

    if (o->algo != NULL) {
        char *spec = NULL;

        if (strchr(o->algo, '=') == NULL) {
            if (asprintf(&spec, "%s=%s", tacl_coll_name(kind),
                         o->algo) < 0) {
                return -1;
            }
        }
        setenv("TACL_ALGO", spec ? spec : o->algo, 1);
        free(spec);
    }
    /* -T: nccl-tests' timeout is tacl's, unless the user set that. */
    if (o->timeout_s > 0 && getenv("TACL_TIMEOUT") == NULL) {
        snprintf(buf, sizeof(buf), "%g", o->timeout_s);
        setenv("TACL_TIMEOUT", buf, 1);
    }
    /* The header shows the spec in force, whoever set it. */
    o->algo = getenv("TACL_ALGO");
    if (o->algo != NULL && o->algo[0] == '\0') {
        o->algo = NULL;
    }
    if (ompi_rank != NULL && ompi_size != NULL && !have_rank) {
#if TACL_PERF_MPI
        /* MPI hands out the unique id (see init_comm). */
        (void)ompi_local;
        return 0;
#endif
        if (getenv("TACL_ROOT_ADDR") == NULL) {
            fprintf(stderr, "%s: under mpirun, tacl needs the address rank "
                    "0 listens on: run mpirun -x TACL_ROOT_ADDR=HOST:PORT "
                    "... (a free port on rank 0's host), or use tacl-run "
                    "-n N\n", prog);
            return -1;
        }
        setenv("TACL_RANK", ompi_rank, 1);
        setenv("TACL_NRANKS", ompi_size, 1);
        if (ompi_local != NULL) {
            setenv("TACL_LOCAL_RANK", ompi_local, 1);
        }
        return 0;
    }
    if (!have_rank && !have_root) {
        int port = free_port();

        if (port < 0) {
            fprintf(stderr, "%s: no free port for a single-rank run\n",
                    prog);
            return -1;
        }
        snprintf(buf, sizeof(buf), "127.0.0.1:%d", port);
        setenv("TACL_ROOT_ADDR", buf, 1);
        setenv("TACL_RANK", "0", 1);
        setenv("TACL_NRANKS", "1", 1);
    }
    return 0;
}

/*
 * Make the communicator.  Under mpirun, when built with MPI, MPI is used
 * for one thing only, as in nccl-tests: rank 0 creates the unique id and
 * MPI_Bcast hands it to the others.  Otherwise the environment that
 * tacl-run, tacl-cluster or torchrun set up is used.
 */
static tacl_status_t init_comm(tacl_comm_t *comm_p)
{
#if TACL_PERF_MPI
    if (getenv("OMPI_COMM_WORLD_SIZE") != NULL &&
        getenv("TACL_RANK") == NULL && getenv("RANK") == NULL) {
        tacl_unique_id_t id;
        tacl_status_t st = TACL_OK;
        int rank, size;

        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rank == 0)
            st = tacl_get_unique_id(&id);
        MPI_Bcast(&st, sizeof(st), MPI_BYTE, 0, MPI_COMM_WORLD);
        if (st != TACL_OK)
            return st;
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        atexit((void (*)(void))MPI_Finalize);
        return tacl_comm_init_rank(size, &id, rank, comm_p);
    }
#endif
    return tacl_comm_init_env(comm_p);
}

/* A buffer from posix_memalign, or from tacl_mem_alloc when reg (-R 1). */
static void *alloc_buffer(size_t bytes, int reg)
{
    void *p = NULL;

    if (reg) {
        tacl_status_t st = tacl_mem_alloc(&p, bytes ? bytes : 1,
                                          TACL_MEM_HOST);

        if (st != TACL_OK) {
            fprintf(stderr, "tacl_mem_alloc: %s\n", tacl_last_error());
            return NULL;
        }
    } else if (posix_memalign(&p, PERF_ALIGN, bytes ? bytes : 1) != 0) {
        return NULL;
    }
    /* Touch every page so page faults stay out of the first timing. */
    memset(p, 0, bytes);
    return p;
}

/*
 * --mem cuda: choose the device (LOCAL_RANK modulo the devices, before
 * the communicator exists, whose device is the current one), and make
 * the device buffers, their host copies and the stream.  Returns 0, 77
 * (skipped: no usable device, or a build without CUDA) or 1.
 */
static int device_setup(const char *prog)
{
#if TACL_PERF_CUDA
    const char *lr = getenv("LOCAL_RANK");
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);

    if (err != cudaSuccess || n < 1) {
        printf("%s: skipped: --mem cuda needs a CUDA device: %s\n", prog,
               err != cudaSuccess ? cudaGetErrorString(err)
                                  : "none found");
        return 77;
    }
    err = cudaSetDevice((lr != NULL ? atoi(lr) : 0) % n);
    if (err != cudaSuccess) {
        fprintf(stderr, "%s: cudaSetDevice: %s\n", prog,
                cudaGetErrorString(err));
        return 1;
    }
    return 0;
#else
    printf("%s: skipped: --mem cuda needs tacl built with CUDA\n", prog);
    return 77;
#endif
}

static void device_buffers(perf_run_t *run)
{
#if TACL_PERF_CUDA
    cudaStream_t stream;
    void *p;

    run->send_host = alloc_buffer(run->send_bytes, 0);
    run->recv_host = alloc_buffer(run->recv_bytes, 0);
    if (run->send_host == NULL || run->recv_host == NULL) {
        fprintf(stderr, "rank %d: cannot allocate host copies\n",
                run->rank);
        tacl_comm_abort(run->comm);
        exit(1);
    }
    /* -R 1: tacl_mem_alloc memory, which peers map once (cudaMalloc
     * memory is mapped for each message: transport/cuda_ipc). */
    for (int i = 0; i < 2; i++) {
        size_t bytes = (i == 0 ? run->send_bytes : run->recv_bytes) + 1;

        if (run->opts->reg) {
            tacl_status_t st = tacl_mem_alloc(&p, bytes, TACL_MEM_CUDA);

            if (st != TACL_OK) {
                fprintf(stderr, "rank %d: tacl_mem_alloc of device memory: "
                        "%s\n", run->rank, tacl_last_error());
                tacl_comm_abort(run->comm);
                exit(1);
            }
        } else {
            cuda_check(run, "cudaMalloc", cudaMalloc(&p, bytes));
        }
        if (i == 0)
            run->sendbuf = p;
        else
            run->recvbuf = p;
    }
    cuda_check(run, "cudaMemset", cudaMemset(run->sendbuf, 0,
                                             run->send_bytes + 1));
    cuda_check(run, "cudaMemset", cudaMemset(run->recvbuf, 0,
                                             run->recv_bytes + 1));
    cuda_check(run, "cudaStreamCreate",
               cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    run->stream = stream;
    if (run->rank == 0) {
        int dev = 0;
        struct cudaDeviceProp prop;

        cudaGetDevice(&dev);
        if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
            printf("# --mem cuda: buffers by %s on device %d (%s), "
                   "calls on a stream\n",
                   run->opts->reg ? "tacl_mem_alloc" : "cudaMalloc", dev,
                   prop.name);
        }
    }
#else
    (void)run;
#endif
}

#if TACL_PERF_CUDA
static void cuda_free(void *p)
{
    cudaFree(p);
}
#endif

static void free_buffers(perf_run_t *run)
{
    void (*release)(void *) = free; /* what -R 0 buffers came from */

#if TACL_PERF_CUDA
    if (run->stream != NULL) {
        cudaStreamDestroy((cudaStream_t)run->stream);
        free(run->send_host);
        free(run->recv_host);
        release = cuda_free;
    }
#endif
    if (run->opts->reg) {
        tacl_mem_free(run->sendbuf);
        tacl_mem_free(run->recvbuf);
    } else {
        release(run->sendbuf);
        release(run->recvbuf);
    }
}

/*
 * One sweep of sizes with o's dtype and op.  Rank 0 prints the header
 * (and opens the JSON file) after the first size, so that the header
 * names the algorithm that size ran.  Returns the wrong elements seen.
 */
static long long run_sweep(perf_run_t *run, tacl__perf_opts_t *o,
                           const char *prog, FILE **json_p)
{
    static int header_done;
    const tacl__perf_coll_t *coll = run->coll;
    tacl__perf_sizes_t s;
    tacl__perf_result_t res[2];
    perf_counters_t cnt[2];
    char json_extra[2 * PERF_COUNTERS_TEXT + 128];
    long long wrong = 0;
    size_t bytes;
    int p;

    for (bytes = o->min_bytes; bytes <= o->max_bytes;
         bytes = tacl__perf_next_size(o, bytes)) {
        tacl__perf_get_sizes(coll->kind, bytes, run->nranks, o->dtype, &s);
        for (p = 0; p < 2; p++) {
            run_one(run, &s, p, &res[p], &cnt[p]);
            wrong += res[p].wrong > 0 ? res[p].wrong : 0;
        }
        if (run->rank == 0 && !header_done) {
            header_done = 1;
            o->algo_run = cnt[0].algo[0] ? cnt[0].algo : "none";
            tacl__perf_print_header(stdout, prog, "tacl", coll->kind, o,
                                    run->nranks);
            if (o->json_path != NULL) {
                *json_p = tacl__perf_json_open(o->json_path, "tacl",
                                               coll->kind, o, run->nranks);
            }
        }
        if (run->rank == 0) {
            tacl__perf_print_row(stdout, coll->kind, o, &s, res);
            printf("#   bytes/op sent by rank 0: out-of-place %s | "
                   "in-place %s\n", cnt[0].text, cnt[1].text);
            printf("#   by link class: out-of-place %s | in-place %s; "
                   "algorithm %s\n", cnt[0].links, cnt[1].links,
                   cnt[0].algo[0] ? cnt[0].algo : "none");
            if (o->qbits != 0 && o->check) {
                printf("#   int%d block %u: max abs error out-of-place %.4g "
                       "in-place %.4g (allowed %.4g + |x|/256)\n",
                       o->qbits, o->qblock, res[0].max_error,
                       res[1].max_error,
                       tacl__perf_quant_bound(coll->kind, o, run->nranks,
                                              0.0));
            }
            fflush(stdout);
            if (*json_p != NULL) {
                snprintf(json_extra, sizeof(json_extra),
                         "{\"out_of_place\": %s, \"in_place\": %s, "
                         "\"max_error\": [%.17g, %.17g]}",
                         cnt[0].json, cnt[1].json, res[0].max_error,
                         res[1].max_error);
                tacl__perf_json_row(*json_p, &s, res, json_extra);
            }
        }
        if (bytes == SIZE_MAX) {
            break;
        }
    }
    return wrong;
}

int tacl__perf_main(int argc, char **argv, const tacl__perf_coll_t *coll)
{
    tacl__perf_opts_t o;
    perf_run_t run;
    size_t send_bytes, recv_bytes;
    tacl_dtype_t dtypes[TACL_NUM_DTYPES];
    tacl_op_t ops[TACL_NUM_OPS];
    long long wrong = 0;
    FILE *json = NULL;
    tacl_status_t st;
    int code, cycle, d, nd, op, nops;

    if (tacl__perf_parse(argc, argv, coll->kind, &o, &code) != 0) {
        return code;
    }
    if (prepare_env(argv[0], &o, coll->kind) != 0) {
        return 2;
    }
    if (o.mem_cuda && (code = device_setup(argv[0])) != 0) {
        return code;
    }
    memset(&run, 0, sizeof(run));
    run.coll = coll;
    run.opts = &o;
    st = init_comm(&run.comm);
    if (st != TACL_OK) {
        fprintf(stderr, "%s: communicator init failed: %s: %s\n", argv[0],
                tacl_status_string(st), tacl_last_error());
        return 1;
    }
    if ((st = tacl_comm_rank(run.comm, &run.rank)) != TACL_OK ||
        (st = tacl_comm_size(run.comm, &run.nranks)) != TACL_OK) {
        die(&run, "tacl_comm_rank", st);
    }
    if (tacl__perf_has_root(coll->kind) && o.root >= run.nranks) {
        fprintf(stderr, "%s: root %d is not a rank of %d\n", argv[0],
                o.root, run.nranks);
        tacl_comm_destroy(run.comm);
        return 2;
    }
    tacl__perf_max_buffers(coll->kind, &o, run.nranks, &send_bytes,
                           &recv_bytes);
    run.send_bytes = send_bytes;
    run.recv_bytes = recv_bytes;
    if (o.mem_cuda) {
        device_buffers(&run);
    } else {
        run.sendbuf = alloc_buffer(send_bytes, o.reg);
        run.recvbuf = alloc_buffer(recv_bytes, o.reg);
        run.send_host = run.sendbuf;
        run.recv_host = run.recvbuf;
    }
    if (run.sendbuf == NULL || run.recvbuf == NULL) {
        fprintf(stderr, "rank %d: cannot allocate %zu + %zu bytes\n",
                run.rank, send_bytes, recv_bytes);
        tacl_comm_abort(run.comm);
        return 1;
    }
    nd = tacl__perf_dtypes(&o, dtypes);
    for (cycle = 0; o.cycles == 0 || cycle < o.cycles; cycle++) {
        for (d = 0; d < nd; d++) {
            o.dtype = dtypes[d];
            nops = tacl__perf_ops(coll->kind, &o, o.dtype, ops);
            for (op = 0; op < nops; op++) {
                o.op = ops[op];
                wrong += run_sweep(&run, &o, argv[0], &json);
            }
        }
    }
    if (run.rank == 0) {
        tacl__perf_print_footer(stdout);
        if (json != NULL) {
            tacl__perf_json_close(json);
        }
    }
    /* A rank that saw wrong values exits 1, and launchers stop the other
     * ranks when one fails: let no rank go before rank 0 has written the
     * summary. */
    st = tacl_barrier(run.comm, NULL);
    if (st == TACL_OK)
        st = tacl_comm_destroy(run.comm);
    else
        tacl_comm_abort(run.comm);
    free_buffers(&run);
    if (st != TACL_OK) {
        fprintf(stderr, "rank %d: the closing barrier or destroy failed: "
                "%s\n", run.rank, tacl_status_string(st));
        return 1;
    }
    return wrong != 0 ? 1 : 0;
}
