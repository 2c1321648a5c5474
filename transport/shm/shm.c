/*
 * The shm transport: host memory between processes of one node.
 * DESIGN.md, "Transports": shm serves host memory inside a node and sleeps
 * on a futex instead of spinning, so 8 ranks share 2 cores.
 *
 * Setup is collective and takes three exchanges, which every rank of the
 * context does even when it has no neighbour, so that none waits alone:
 *   1. rank 0's random nonce and every pid;
 *   2. each rank has created "/tacl-<nonce>-<rank>" (its segment) and says
 *      where its probe word is;
 *   3. each rank has mapped its neighbours' segments and read their probe
 *      words with process_vm_readv.
 * Each record carries an "ok" flag, so a failure anywhere fails every rank
 * at the same step.  After the third exchange every rank unlinks its own
 * name: the mappings stay, and nothing is left in /dev/shm even if a rank
 * crashes later.  Large messages go by cma (single copy) when every rank
 * of the node could read all its neighbours, else by copy through the
 * slots; a successful read also proves a neighbour's pid valid here, for
 * the liveness checks.  The measured choice: on a 2-core VM cma moved 1 MB
 * to 128 MB messages at 1.3-2x the rate of copy (shm_bench).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "shm.h"

/** One rank's record in the setup exchanges. */
typedef struct {
    uint64_t nonce;            /* rank 0's is the job's */
    uint64_t probe_addr;       /* where this rank's probe word is */
    uint64_t probe_value;
    int32_t pid;
    int32_t ok;                /* this rank's step succeeded */
    int32_t probe_ok;          /* this rank read its successor by CMA */
    int32_t pad;
} shm_record_t;

typedef struct {
    const tacl__tl_params_t *params;
    shm_record_t *all;
    uint64_t nonce;
} shm_setup_t;

static void seg_name(char *name, size_t size, uint64_t nonce, int rank)
{
    snprintf(name, size, "/tacl-%016llx-%d", (unsigned long long)nonce,
             rank);
}

static uint64_t probe_value(uint64_t nonce, int rank)
{
    return nonce ^ (0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1));
}

/* Everyone passes its record; fails unless every rank reported ok. */
static tacl_status_t exchange(shm_setup_t *setup, const shm_record_t *mine,
                              const char *step)
{
    const tacl__tl_params_t *params = setup->params;
    tacl_status_t status;

    setup->all[params->rank] = *mine;
    status = params->exchange(params->exchange_ctx, setup->all,
                              sizeof(shm_record_t));
    if (status != TACL_OK)
        return status;
    for (int r = 0; r < params->nranks; ++r)
        if (!setup->all[r].ok)
            return tacl__error(TACL_ERR_REMOTE, SHM,
                               "rank %d could not %s; see its log", r, step);
    return TACL_OK;
}

/*
 * Map rank's segment, called name: our own (rank == shm->base.rank), which is
 * created and sized here and unlinked again if mapping it fails, or a
 * neighbour's, which must already have our size.
 */
static tacl_status_t map_named(tacl__shm_t *shm, const char *name, int rank,
                               void **seg_p)
{
    int own = rank == shm->base.rank;
    tacl_status_t status;
    struct stat st;
    void *seg;
    int fd;

    fd = own ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600)
             : shm_open(name, O_RDWR, 0);
    if (fd < 0 && own)
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "shm_open(%s) failed: %m; check /dev/shm", name);
    if (fd < 0)
        return tacl__error(TACL_ERR_SYSTEM, SHM,
                           "cannot open rank %d's segment %s: %m; do the "
                           "ranks share /dev/shm?", rank, name);
    if (own && ftruncate(fd, (off_t)shm->seg_size) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM,
                             "cannot size %s to %zu bytes: %m; check free "
                             "space in /dev/shm", name, shm->seg_size);
        goto err_close;
    }
    if (!own && (fstat(fd, &st) != 0 || (size_t)st.st_size != shm->seg_size)) {
        status = tacl__error(TACL_ERR_INTERNAL, SHM,
                             "rank %d's segment %s has the wrong size; do "
                             "all ranks agree on the node ids?", rank, name);
        goto err_close;
    }
    seg = mmap(NULL, shm->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               0);
    if (seg == MAP_FAILED) {
        status = tacl__error(TACL_ERR_SYSTEM, SHM, "mmap of %s failed: %m",
                             name);
        goto err_close;
    }
    close(fd);
    *seg_p = seg;
    return TACL_OK;

err_close:
    if (own)
        shm_unlink(name);
    close(fd);
    return status;
}

static tacl_status_t create_segment(tacl__shm_t *shm, uint64_t nonce)
{
    char name[64];
    tacl_status_t status;
    void *seg;

    shm->seg_size = tacl__shm_seg_size(shm->base.nlocal);
    seg_name(name, sizeof(name), nonce, shm->base.rank);
    status = map_named(shm, name, shm->base.rank, &seg);
    if (status != TACL_OK)
        return status;
    shm->seg = seg;
    shm->hdr = seg;
    shm->hdr->magic = TACL_SHM_MAGIC;
    shm->hdr->nonce = nonce;
    shm->hdr->rank = shm->base.rank;
    shm->hdr->pid = (int32_t)getpid();
    shm->hdr->nqueues = (uint32_t)shm->base.nlocal;
    shm->hdr->probe = probe_value(nonce, shm->base.rank);
    return TACL_OK;
}

static tacl_status_t map_peer(tacl__shm_t *shm, tacl__shm_peer_t *peer,
                              uint64_t nonce)
{
    char name[64];
    tacl_status_t status;
    void *seg;

    seg_name(name, sizeof(name), nonce, peer->rank);
    status = map_named(shm, name, peer->rank, &seg);
    if (status != TACL_OK)
        return status;
    peer->seg = seg;
    peer->hdr = seg;
    if (peer->hdr->magic != TACL_SHM_MAGIC || peer->hdr->nonce != nonce ||
        peer->hdr->rank != peer->rank) {
        munmap(seg, shm->seg_size);
        peer->seg = NULL;
        peer->hdr = NULL;
        return tacl__error(TACL_ERR_INTERNAL, SHM,
                           "segment %s does not belong to rank %d of this "
                           "job", name, peer->rank);
    }
    peer->out = tacl__shm_queue_at(seg, shm->base.my_local);
    peer->in = tacl__shm_queue_at(shm->seg, shm->base.local_of[peer->rank]);
    return TACL_OK;
}

/*
 * Read every neighbour's probe word the way a pull would; whether all
 * reads worked.  A neighbour read this way surely has this pid in our pid
 * namespace, so it is watched for life; one that could not be read is
 * watched only if kill(pid, 0) finds it now, while it is known alive.
 */
static int probe_cma(tacl__shm_t *shm, const shm_record_t *all)
{
    int all_ok = 1;

    for (int i = 0; i < shm->base.nlocal; ++i) {
        tacl__shm_peer_t *peer = &shm->peers[i];
        const shm_record_t *rec = &all[peer->rank];
        uint64_t word = 0;
        struct iovec local = {&word, sizeof(word)};
        struct iovec remote = {(void *)(uintptr_t)rec->probe_addr,
                               sizeof(word)};
        int ok;

        if (i == shm->base.my_local)
            continue;
        ok = process_vm_readv(peer->pid, &local, 1, &remote, 1, 0) ==
             (ssize_t)sizeof(word) && word == rec->probe_value;
        if (!ok)
            TACL_INFO(SHM, "cannot read rank %d's memory with "
                      "process_vm_readv: %m", peer->rank);
        peer->watch = ok || kill(peer->pid, 0) == 0;
        all_ok &= ok;
    }
    return all_ok;
}

static void choose_mode(tacl__shm_t *shm, const shm_record_t *all)
{
    /* TACL_SHM_MODE's words: 0 auto, 1 cma, 2 copy. */
    int mode = tacl__config_word(TACL_CFG_SHM_MODE);
    int cma_ok = 1;

    shm->use_map = tacl__config_bool(TACL_CFG_SHM_MAP);
    for (int i = 0; i < shm->base.nlocal; ++i)
        cma_ok &= all[shm->peers[i].rank].probe_ok;
    if (mode == 2) {
        shm->use_cma = 0;
    } else if (mode == 1) {
        shm->use_cma = cma_ok;
        if (!cma_ok)
            TACL_WARN(SHM, "TACL_SHM_MODE=cma but process_vm_readv does not "
                      "work between these processes (ptrace restrictions?); "
                      "using copy");
    } else {
        shm->use_cma = cma_ok;
        if (!cma_ok)
            TACL_INFO(SHM, "process_vm_readv does not work between these "
                      "processes; large messages go through copy");
    }
}

/* The three setup steps; on failure what was mapped is left for close. */
static tacl_status_t setup_segments(tacl__shm_t *shm,
                                    const tacl__tl_params_t *params)
{
    shm_setup_t setup = {params, NULL, 0};
    shm_record_t mine = {0};
    tacl_status_t status, step;
    char name[64];
    int have_seg = 0;

    setup.all = calloc((size_t)params->nranks, sizeof(shm_record_t));
    if (!setup.all)
        return tacl__error(TACL_ERR_NO_MEMORY, SHM, "out of memory");
    if (getrandom(&mine.nonce, sizeof(mine.nonce), GRND_NONBLOCK) !=
        (ssize_t)sizeof(mine.nonce))
        mine.nonce = tacl__now_ns() ^ ((uint64_t)getpid() << 32);
    mine.pid = (int32_t)getpid();
    mine.ok = 1;
    status = exchange(&setup, &mine, "start");
    if (status != TACL_OK)
        goto out_free;
    setup.nonce = setup.all[0].nonce;
    for (int i = 0; i < shm->base.nlocal; ++i)
        shm->peers[i].pid = (pid_t)setup.all[shm->peers[i].rank].pid;

    step = shm->base.nlocal > 1 ? create_segment(shm, setup.nonce) : TACL_OK;
    have_seg = shm->seg != NULL;
    mine.ok = step == TACL_OK;
    if (have_seg) {
        mine.probe_addr = (uint64_t)(uintptr_t)&shm->hdr->probe;
        mine.probe_value = shm->hdr->probe;
    }
    status = exchange(&setup, &mine, "create its shared-memory segment");
    if (status != TACL_OK)
        goto out_unlink;

    step = TACL_OK;
    for (int i = 0; i < shm->base.nlocal && step == TACL_OK; ++i)
        if (i != shm->base.my_local)
            step = map_peer(shm, &shm->peers[i], setup.nonce);
    mine.ok = step == TACL_OK;
    mine.probe_ok = shm->base.nlocal > 1 && step == TACL_OK &&
                    probe_cma(shm, setup.all);
    status = exchange(&setup, &mine, "map its neighbours' segments");
    if (status == TACL_OK)
        choose_mode(shm, setup.all);

out_unlink:
    if (have_seg) {
        seg_name(name, sizeof(name), setup.nonce, shm->base.rank);
        shm_unlink(name);
    }
out_free:
    free(setup.all);
    return status;
}

static void shm_close(tacl__tl_t *tl)
{
    tacl__shm_t *shm = (tacl__shm_t *)tl;

    for (int i = 0; shm->peers && i < shm->base.nlocal; ++i) {
        tacl__shm_peer_cleanup(&shm->peers[i]);
        if (shm->peers[i].seg)
            munmap(shm->peers[i].seg, shm->seg_size);
    }
    if (shm->seg)
        munmap(shm->seg, shm->seg_size);
    free(shm->peers);
    tacl__tl_base_free(&shm->base);
}

static tacl_status_t shm_init(const tacl__tl_params_t *params,
                              tacl__tl_t **tl_p)
{
    unsigned long long eager = tacl__config_size(TACL_CFG_SHM_EAGER_LIMIT);
    tacl__tl_base_t *base;
    tacl__shm_t *shm;
    tacl_status_t status;

    status = tacl__tl_base_new(&tacl__tl_shm_ops, sizeof(*shm), params,
                               TACL_SUBSYS_SHM, tacl__shm_fail_pending,
                               &base);
    if (status != TACL_OK)
        return status;
    shm = (tacl__shm_t *)base;
    shm->eager_limit = eager > 0 ? (uint64_t)eager : 0;
    shm->peers = tacl__tl_base_peers(base, sizeof(*shm->peers),
                                     offsetof(tacl__shm_peer_t, rank));
    if (shm->peers == NULL) {
        status = TACL_ERR_NO_MEMORY;
        goto err_close;
    }
    status = setup_segments(shm, params);
    if (status != TACL_OK)
        goto err_close;
    TACL_INFO(SHM, "rank %d: %d ranks on this node, large messages by %s, "
              "eager up to %llu bytes", shm->base.rank, shm->base.nlocal,
              shm->use_cma ? "cma" : "copy",
              (unsigned long long)shm->eager_limit);
    *tl_p = &shm->base.super;
    return TACL_OK;

err_close:
    shm_close(&shm->base.super);
    return status;
}

const tacl__transport_ops_t tacl__tl_shm_ops = {
    .size = sizeof(tacl__transport_ops_t),
    .name = "shm",
    /* Its peers share /dev/shm: they can map one another's areas. */
    .caps = TACL__TL_CAP_HOST | TACL__TL_CAP_MAP | TACL__TL_CAP_PROBE,
    .reach = TACL__TL_PEER_NODE,
    .init = shm_init,
    .reachable = tacl__tl_base_reachable,
    .send = tacl__shm_send,
    .recv = tacl__shm_recv,
    .progress = tacl__shm_progress,
    .wait = tacl__shm_wait,
    .probe = tacl__shm_probe,
    .cancel_all = tacl__tl_base_cancel_all,
    .close = shm_close,
};
