/*
 * train: train the engine's character-level language model with one of
 * the sharding strategies, as every rank of a job started by tacl-run,
 * tacl-cluster or torchrun-style variables (alone, it is one rank).
 *
 *   tacl-run -n 4 -- train --strategy IIG --group-size 2 --steps 200 \
 *       --data FILE
 *
 * Rank 0 prints one line per step: the loss of the global batch, tokens
 * per second, the model-state bytes it holds, and the bytes all ranks
 * sent inside partition groups and between them during the step; with
 * a word embedding (--vocab) also its sync's seconds, bytes and scheme.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#include <tacl.h>

#include "engine.h"
#include "profile.h"
#include "snap.h"

#define DEFAULT_DATA "/usr/share/common-licenses/GPL-3"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: train [options]\n"
        "  --strategy S     NNN NNI NNG NII NIG NGG INI ING III IIG IGG GNG\n"
        "                   GIG GGG, or DDP ZeRO-1 ZeRO-2 ZeRO-3 MiCS (GGG)\n"
        "  --group-size P   ranks per partition group (default: the node)\n"
        "  --hpz --qwz --qgz  ZeRO++ options (ZeRO-3 only)\n"
        "  --qwz-bits B --qgz-bits B  8 or 4 (defaults 8 and 4)\n"
        "  --steps K        optimizer steps (default 20)\n"
        "  --micro-steps S  gradient accumulation steps (default 1)\n"
        "  --batch B        global batch in samples (default 64)\n"
        "  --ctx C --emb E --hidden H --blocks L  model shape (8 16 256 4)\n"
        "  --lr X --seed N  Adam learning rate (3e-3), seed (1)\n"
        "  --vocab V        add a word embedding of V words (Zipf-drawn, "
        "a frequency-\n"
        "                   sorted vocabulary), replicated, its gradient "
        "synced by the\n"
        "                   sparse all-reduce (default: none)\n"
        "  --embed-dim E    floats of a word vector (16)\n"
        "  --sparse-scheme S  the sync's scheme: auto (default), zen, "
        "agsparse, ps,\n"
        "                   sparcml, omni, agpadded, zen_hier, dense_zen, "
        "or dense\n"
        "                   (the dense all-reduce of the whole table)\n"
        "  --data FILE      training text (default %s)\n"
        "  --save FILE --load FILE  checkpoint after the last step / "
        "before the first\n"
        "  --snapshot-every K     save a snapshot to peers' memory after "
        "every K-th step\n"
        "  --snapshot-replicas M  copies of each rank's state, its own "
        "counted (2)\n"
        "  --snapshot-key KEY     names the node-local stores (default "
        "train)\n"
        "  --snapshot-file PATH   also write PATH.rank<r> after the last "
        "step\n"
        "  --snapshot-flush-every F  and after every F-th snapshot, in the "
        "background\n"
        "  --snapshot-mode MODE   background (copies fill the gaps of "
        "training\n"
        "                   traffic), foreground (copies sent at once, "
        "overlapping\n"
        "                   the next step), blocking (the step waits for "
        "them) or\n"
        "                   scheduled (background, in the network's idle "
        "spans\n"
        "                   learned from the first 10 steps: the thesis' "
        "Algorithm 6.2)\n"
        "  --snapshot-part BYTES  bytes of one part of a copy (256 KiB)\n"
        "  --snapshot-parts P  parts of a copy in flight at once (1: "
        "unpipelined,\n"
        "                   the default; more pipeline them)\n"
        "  --snapshot-pace F  a due save is skipped, not waited for, while "
        "the\n"
        "                   previous one's copies travel, and spaced so "
        "its cost\n"
        "                   stays within share F of a step (0: no bound)\n"
        "  --snapshot-alternate B  measure a save's cost: saves before the "
        "steps of\n"
        "                   every other block of B steps only (with "
        "--snapshot-every 1);\n"
        "                   the summary compares those steps' times with "
        "the others'\n"
        "  --snapshot-send-all  send every copy, also where replicas "
        "(DDP's ranks,\n"
        "                   MiCS's groups) hold the same state and serve "
        "as one\n"
        "                   another's copies (the default sends them CRCs "
        "only)\n"
        "  --snapshot-keep  keep the node-local stores at the end, as a job "
        "stopped\n"
        "                   to be resumed later would (default: purge "
        "them)\n"
        "  --resume         restore the newest snapshot (memory, then the "
        "files)\n"
        "                   and run on to step K of --steps\n"
        "  --kill-at R:S    fault injection: rank R SIGKILLs itself after "
        "step S\n"
        "  --timeline       rank 0 prints \"timeline EVENT T\" (T: wall "
        "clock, s) at\n"
        "                   start, communicator, restored, first step, "
        "a failed\n"
        "                   step (and the --kill-at rank at kill)\n"
        "  --compress CODEC compress gradient reduce-scatters (ZeRO-2, "
        "ZeRO-3, MiCS):\n"
        "                   fp16 bf16 int8 int4 topk threshold randk sign, "
        "with error\n"
        "                   feedback (a residual per gradient shard)\n"
        "  --density D      topk, threshold, randk: share kept, in (0, 1] "
        "(0.01)\n"
        "  --bits B         int8, int4: 8 or 4 (the name's width)\n"
        "  --plan P         none: every layer compressed on its own "
        "(default);\n"
        "                   fusion: the planner's groups, all compressed; "
        "full: its\n"
        "                   groups, each compressed or not.  fusion and "
        "full profile\n"
        "                   the first --profile-steps steps (uncompressed) "
        "and print\n"
        "                   the plan\n"
        "  --profile-steps N  steps profiled before planning (3)\n"
        "  --warmup-steps N  steps 1..N uncompressed, counted from the "
        "job's start\n"
        "                   (as 1-bit Adam's freeze_step; 0)\n"
        "  --compress-hops H  which hops carry encoded data: inter (dense "
        "inside a\n"
        "                   node, encoded between nodes), all (flat), auto "
        "(inter on\n"
        "                   a job of several nodes, all on one: the "
        "default)\n"
        "  --no-error-feedback  drop the residuals (to show what they "
        "are for)\n"
        "  --quiet          print only the summary\n", DEFAULT_DATA);
}

static uint8_t *read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long len = 0;

    if (f == NULL) {
        fprintf(stderr, "train: cannot open %s: %s\n", path,
                strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)len + 1)) ==
        NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "train: cannot read %s\n", path);
        free(buf);
        buf = NULL;
        len = 0;
    }
    *len_p = (size_t)len;
    fclose(f);
    return buf;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static tacl_status_t init_comm(tacl_comm_t *comm_p)
{
    tacl_unique_id_t id;
    tacl_status_t st;

    if (getenv("TACL_RANK") != NULL || getenv("RANK") != NULL)
        return tacl_comm_init_env(comm_p);
    st = tacl_get_unique_id(&id);
    if (st != TACL_OK)
        return st;
    return tacl_comm_init_rank(1, &id, 0, comm_p);
}

/* --timeline: "timeline EVENT T" with T the wall clock (CLOCK_REALTIME),
 * so that the events of processes that come and go (a killed rank, a
 * restarted job) line up in one recovery timeline
 * (perf/snapshot_timeline.sh). */
static void timeline(int on, const char *event, double at)
{
    if (!on)
        return;
    printf("timeline %s %.6f\n", event, at);
    fflush(stdout);
}

static double wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* This process's CPU time, all its threads. */
static double cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum {
    OPT_STRATEGY = 256, OPT_GROUP, OPT_HPZ, OPT_QWZ, OPT_QGZ, OPT_QWZ_BITS,
    OPT_QGZ_BITS, OPT_STEPS, OPT_MICRO, OPT_BATCH, OPT_CTX, OPT_EMB,
    OPT_HIDDEN, OPT_BLOCKS, OPT_LR, OPT_SEED, OPT_DATA, OPT_SAVE, OPT_LOAD,
    OPT_QUIET, OPT_HELP, OPT_SNAP_EVERY, OPT_SNAP_REPLICAS, OPT_SNAP_KEY,
    OPT_SNAP_FILE, OPT_SNAP_FLUSH, OPT_SNAP_MODE, OPT_SNAP_PART,
    OPT_SNAP_PARTS,
    OPT_SNAP_PACE, OPT_SNAP_ALT, OPT_SNAP_KEEP, OPT_SNAP_SEND_ALL, OPT_TIMELINE, OPT_RESUME, OPT_KILL_AT, OPT_COMPRESS, OPT_DENSITY,
    OPT_BITS, OPT_PLAN, OPT_PROFILE_STEPS, OPT_NO_EF, OPT_WARMUP, OPT_VOCAB,
    OPT_EMBED_DIM, OPT_SPARSE_SCHEME, OPT_HOPS
};

static const struct option long_opts[] = {
    {"strategy", required_argument, NULL, OPT_STRATEGY},
    {"group-size", required_argument, NULL, OPT_GROUP},
    {"hpz", no_argument, NULL, OPT_HPZ},
    {"qwz", no_argument, NULL, OPT_QWZ},
    {"qgz", no_argument, NULL, OPT_QGZ},
    {"qwz-bits", required_argument, NULL, OPT_QWZ_BITS},
    {"qgz-bits", required_argument, NULL, OPT_QGZ_BITS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"micro-steps", required_argument, NULL, OPT_MICRO},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"ctx", required_argument, NULL, OPT_CTX},
    {"emb", required_argument, NULL, OPT_EMB},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"blocks", required_argument, NULL, OPT_BLOCKS},
    {"lr", required_argument, NULL, OPT_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"data", required_argument, NULL, OPT_DATA},
    {"save", required_argument, NULL, OPT_SAVE},
    {"load", required_argument, NULL, OPT_LOAD},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"snapshot-every", required_argument, NULL, OPT_SNAP_EVERY},
    {"snapshot-replicas", required_argument, NULL, OPT_SNAP_REPLICAS},
    {"snapshot-key", required_argument, NULL, OPT_SNAP_KEY},
    {"snapshot-file", required_argument, NULL, OPT_SNAP_FILE},
    {"snapshot-flush-every", required_argument, NULL, OPT_SNAP_FLUSH},
    {"snapshot-mode", required_argument, NULL, OPT_SNAP_MODE},
    {"snapshot-part", required_argument, NULL, OPT_SNAP_PART},
    {"snapshot-parts", required_argument, NULL, OPT_SNAP_PARTS},
    {"snapshot-pace", required_argument, NULL, OPT_SNAP_PACE},
    {"snapshot-keep", no_argument, NULL, OPT_SNAP_KEEP},
    {"snapshot-send-all", no_argument, NULL, OPT_SNAP_SEND_ALL},
    {"snapshot-alternate", required_argument, NULL, OPT_SNAP_ALT},
    {"timeline", no_argument, NULL, OPT_TIMELINE},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"kill-at", required_argument, NULL, OPT_KILL_AT},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"density", required_argument, NULL, OPT_DENSITY},
    {"bits", required_argument, NULL, OPT_BITS},
    {"plan", required_argument, NULL, OPT_PLAN},
    {"profile-steps", required_argument, NULL, OPT_PROFILE_STEPS},
    {"no-error-feedback", no_argument, NULL, OPT_NO_EF},
    {"warmup-steps", required_argument, NULL, OPT_WARMUP},
    {"compress-hops", required_argument, NULL, OPT_HOPS},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"embed-dim", required_argument, NULL, OPT_EMBED_DIM},
    {"sparse-scheme", required_argument, NULL, OPT_SPARSE_SCHEME},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

typedef struct {
    engine_opts_t eo;
    const char *strategy, *data, *save, *load;
    int steps, quiet;
    engine_snap_opts_t snap;
    int snapshots, resume;
    int keep_snapshots;       /* --snapshot-keep: no purge at the end */
    int alternate;            /* --snapshot-alternate B, or 0 */
    int timeline;             /* --timeline */
    int kill_rank, kill_step; /* -1: none */
    const char *compress, *plan;  /* codec and plan names, or NULL */
    const char *hops;             /* --compress-hops, or NULL */
    double density;               /* 0: the default */
    int bits, profile_steps, no_ef;
    int warmup;                   /* --warmup-steps */
    gcomp_codec_t codec;
    engine_plan_kind_t plan_kind;
    const char *vocab, *embed_dim, *scheme; /* word options, or NULL */
} args_t;

/* A scheme named as tacl names it (case aside); -1 for another name. */
static int parse_scheme(const char *name, tacl_sparse_scheme_t *scheme)
{
    for (int i = 0; i < TACL_NUM_SPARSE_SCHEMES; i++)
        if (strcasecmp(name, tacl_sparse_scheme_name(
                                 (tacl_sparse_scheme_t)i)) == 0) {
            *scheme = (tacl_sparse_scheme_t)i;
            return 0;
        }
    return -1;
}

/*
 * The word embedding's options: numbers each named in its message; the
 * embedding's own bounds are the engine's (engine_create says which).
 */
static int check_words(args_t *a)
{
    if (a->vocab == NULL) {
        if (a->embed_dim != NULL || a->scheme != NULL) {
            fprintf(stderr, "train: --embed-dim and --sparse-scheme need "
                    "--vocab V\n");
            return 1;
        }
        return 0;
    }
    if (parse_int(a->vocab, 2, INT32_MAX, &a->eo.vocab) != 0) {
        fprintf(stderr, "train: --vocab wants a number of words, at least "
                "2, not '%s'\n", a->vocab);
        return 1;
    }
    a->eo.embed_dim = 16;
    if (a->embed_dim != NULL &&
        parse_int(a->embed_dim, 1, INT32_MAX, &a->eo.embed_dim) != 0) {
        fprintf(stderr, "train: --embed-dim wants a positive number of "
                "floats, not '%s'\n", a->embed_dim);
        return 1;
    }
    if (a->scheme != NULL && parse_scheme(a->scheme, &a->eo.sparse_scheme)) {
        fprintf(stderr, "train: --sparse-scheme: unknown scheme '%s'; "
                "tacl's are", a->scheme);
        for (int i = 0; i < TACL_NUM_SPARSE_SCHEMES; i++)
            fprintf(stderr, " %s",
                    tacl_sparse_scheme_name((tacl_sparse_scheme_t)i));
        fprintf(stderr, "\n");
        return 1;
    }
    if (a->save != NULL || a->load != NULL) {
        fprintf(stderr, "train: checkpoints (--save, --load) do not hold "
                "the word embedding yet; with --vocab use the snapshots\n");
        return 1;
    }
    return 0;
}

/* The compression options against each other and the strategy. */
static int check_compress(args_t *a)
{
    char why[512];
    const char *no;

    if (a->compress == NULL) {
        if (a->plan != NULL || a->density > 0.0 || a->bits != 0 ||
            a->no_ef || a->warmup > 0 || a->hops != NULL) {
            fprintf(stderr, "train: --plan, --density, --bits, "
                    "--warmup-steps, --compress-hops and "
                    "--no-error-feedback need --compress CODEC\n");
            return 1;
        }
        return 0;
    }
    if (gcomp_codec_init(&a->codec, a->compress, a->density, a->bits, why,
                         sizeof(why)) != 0) {
        fprintf(stderr, "train: %s\n", why);
        return 1;
    }
    a->codec.error_feedback = !a->no_ef;
    if (a->hops != NULL && gcomp_hops_parse(a->hops, &a->codec.hops) != 0) {
        fprintf(stderr, "train: --compress-hops wants auto, inter or all, "
                "not '%s'\n", a->hops);
        return 1;
    }
    if (a->plan != NULL && engine_plan_parse(a->plan, &a->plan_kind) != 0) {
        fprintf(stderr, "train: --plan wants none, fusion or full, not "
                "'%s'\n", a->plan);
        return 1;
    }
    if (a->plan_kind != ENGINE_PLAN_NONE && a->profile_steps < 1) {
        fprintf(stderr, "train: --profile-steps must be at least 1 for "
                "--plan %s\n", a->plan);
        return 1;
    }
    no = engine_compress_unsupported(&a->eo);
    if (no != NULL) {
        fprintf(stderr, "train: strategy %s: %s\n", a->strategy, no);
        return 1;
    }
    return 0;
}

/*
 * After a restore with compression: the saved plan again, its residuals
 * kept (*planned_p 1), or say why the residuals start from zero.
 */
static int resume_plan(engine_t *e, engine_snap_t *snap, const args_t *a,
                       int rank, int *planned_p)
{
    const int32_t *words;
    int got = engine_snap_restored_plan(snap, &words);

    if (got > 0 && engine_plan_import(e, &a->codec, words) != TACL_OK) {
        fprintf(stderr, "train: rank %d: --resume: the saved plan: %s\n",
                rank, engine_error(e));
        return -1;
    }
    *planned_p = got > 0;
    if (rank == 0 && got > 0)
        printf("resume: plan of %d groups and its residuals restored\n",
               (int)words[0]);
    else if (rank == 0 && got < 0)
        printf("resume: the snapshot's residuals were made under other "
               "compression settings; they start from zero\n");
    fflush(stdout);
    return 0;
}

static int parse_args(int argc, char **argv, args_t *a)
{
    int c, bad = 0, *ip;
    char *end;

    engine_opts_default(&a->eo);
    a->strategy = "GGG";
    a->data = DEFAULT_DATA;
    a->steps = 20;
    a->snap.key = "train";
    a->snap.pace = -1;
    a->kill_rank = a->kill_step = -1;
    a->profile_steps = 3;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        ip = NULL;
        switch (c) {
        case OPT_STRATEGY: a->strategy = optarg; break;
        case OPT_GROUP: ip = &a->eo.group_size; break;
        case OPT_HPZ: a->eo.hpz = 1; break;
        case OPT_QWZ: a->eo.qwz = 1; break;
        case OPT_QGZ: a->eo.qgz = 1; break;
        case OPT_QWZ_BITS: ip = &a->eo.qwz_bits; break;
        case OPT_QGZ_BITS: ip = &a->eo.qgz_bits; break;
        case OPT_STEPS: ip = &a->steps; break;
        case OPT_MICRO: ip = &a->eo.micro_steps; break;
        case OPT_BATCH: ip = &a->eo.batch; break;
        case OPT_CTX: ip = &a->eo.ctx; break;
        case OPT_EMB: ip = &a->eo.emb; break;
        case OPT_HIDDEN: ip = &a->eo.hidden; break;
        case OPT_BLOCKS: ip = &a->eo.blocks; break;
        case OPT_LR:
            a->eo.lr = strtof(optarg, &end);
            bad |= *end != '\0';
            break;
        case OPT_SEED:
            a->eo.seed = strtoull(optarg, &end, 10);
            bad |= *end != '\0';
            break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_SAVE: a->save = optarg; break;
        case OPT_LOAD: a->load = optarg; break;
        case OPT_QUIET: a->quiet = 1; break;
        case OPT_SNAP_EVERY: ip = &a->snap.every; break;
        case OPT_SNAP_REPLICAS: ip = &a->snap.replicas; break;
        case OPT_SNAP_KEY: a->snap.key = optarg; break;
        case OPT_SNAP_FILE: a->snap.file = optarg; break;
        case OPT_SNAP_FLUSH: ip = &a->snap.flush_every; break;
        case OPT_SNAP_MODE:
            if (engine_snap_parse_mode(optarg, &a->snap.mode) != 0) {
                fprintf(stderr, "train: --snapshot-mode wants background, "
                        "foreground, blocking or scheduled, not '%s'\n",
                        optarg);
                bad = 1;
            }
            break;
        case OPT_SNAP_PART: ip = &a->snap.part_bytes; break;
        case OPT_SNAP_PARTS: ip = &a->snap.parts; break;
        case OPT_SNAP_ALT: ip = &a->alternate; break;
        case OPT_SNAP_PACE:
            a->snap.pace = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(a->snap.pace >= 0) ||
                a->snap.pace >= 1) {
                fprintf(stderr, "train: --snapshot-pace wants a share in "
                        "[0, 1) of the step time, not '%s'\n", optarg);
                bad = 1;
            }
            break;
        case OPT_RESUME: a->resume = 1; break;
        case OPT_SNAP_KEEP: a->keep_snapshots = 1; break;
        case OPT_SNAP_SEND_ALL: a->snap.send_all = 1; break;
        case OPT_TIMELINE: a->timeline = 1; break;
        case OPT_KILL_AT:
            if (sscanf(optarg, "%d:%d", &a->kill_rank, &a->kill_step) != 2 ||
                a->kill_rank < 0 || a->kill_step < 1) {
                fprintf(stderr, "train: --kill-at wants RANK:STEP, not "
                        "'%s'\n", optarg);
                bad = 1;
            }
            break;
        case OPT_COMPRESS: a->compress = optarg; break;
        case OPT_DENSITY:
            a->density = strtod(optarg, &end);
            if (*end != '\0' || end == optarg || !(a->density > 0.0) ||
                a->density > 1.0) {
                fprintf(stderr, "train: --density wants a share in (0, 1], "
                        "not '%s'\n", optarg);
                bad = 1;
            }
            break;
        case OPT_BITS: ip = &a->bits; break;
        case OPT_PLAN: a->plan = optarg; break;
        case OPT_PROFILE_STEPS: ip = &a->profile_steps; break;
        case OPT_NO_EF: a->no_ef = 1; break;
        case OPT_WARMUP: ip = &a->warmup; break;
        case OPT_HOPS: a->hops = optarg; break;
        case OPT_VOCAB: a->vocab = optarg; break;
        case OPT_EMBED_DIM: a->embed_dim = optarg; break;
        case OPT_SPARSE_SCHEME: a->scheme = optarg; break;
        case OPT_HELP: usage(stdout); exit(0);
        default: bad = 1; break;
        }
        if (ip != NULL && parse_int(optarg, 0, 1 << 24, ip) != 0) {
            fprintf(stderr, "train: bad number '%s'\n", optarg);
            bad = 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "train: unexpected argument '%s'\n", argv[optind]);
        bad = 1;
    }
    if (!bad && engine_parse_strategy(a->strategy, &a->eo) != 0) {
        fprintf(stderr, "train: unknown or invalid strategy '%s' (three of "
                "N/I/G with optimizer states sharded at least as finely as "
                "parameters and gradients, or an alias)\n", a->strategy);
        bad = 1;
    }
    if (!bad)
        bad = check_compress(a);
    if (!bad)
        bad = check_words(a);
    a->snapshots = a->snap.every > 0 || a->snap.file != NULL || a->resume;
    if (!bad && a->alternate != 0 &&
        (a->alternate < 0 || a->snap.every != 1 || a->resume)) {
        fprintf(stderr, "train: --snapshot-alternate wants a block of at "
                "least 1 step, --snapshot-every 1 and no --resume\n");
        bad = 1;
    }
    if (!bad && a->resume && a->load != NULL) {
        fprintf(stderr, "train: --resume and --load exclude each other\n");
        bad = 1;
    }
    if (bad)
        usage(stderr);
    return bad ? -1 : 0;
}

/* --snapshot-alternate B: step k (from 0, the first step of the run) is
 * in a block with saves when k / B is odd, so the first block, with the
 * warm-up step, has none. */
static int alt_on(const args_t *a, uint64_t k)
{
    return (int)((k / (uint64_t)a->alternate) % 2);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

/* The median of n values (sorted here); 0 for none. */
static double median_of(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The steps with a save before them against those without: counts,
 * means and medians of their times, and the ratios (the first step is
 * left out of both, and, for scheduled copies, the steps they learn
 * from). */
static void alt_report(double *t[2], const int n[2], const double cpu[2])
{
    double mean[2] = {0, 0}, median[2] = {0, 0};

    for (int on = 0; on < 2; on++) {
        for (int j = 0; j < n[on]; j++)
            mean[on] += t[on][j] / n[on];
        median[on] = median_of(t[on], n[on]);
    }
    printf("alternate steps_with %d steps_without %d mean_with_s %.6f "
           "mean_without_s %.6f median_with_s %.6f median_without_s %.6f "
           "mean_ratio %.4f median_ratio %.4f cpu_with_s %.6f "
           "cpu_without_s %.6f\n",
           n[1], n[0], mean[1], mean[0], median[1], median[0],
           mean[0] > 0 ? mean[1] / mean[0] : 0.0,
           median[0] > 0 ? median[1] / median[0] : 0.0,
           n[1] > 0 ? cpu[1] / n[1] : 0.0, n[0] > 0 ? cpu[0] / n[0] : 0.0);
}

int main(int argc, char **argv)
{
    args_t a;
    tacl_comm_t comm;
    engine_t *e = NULL;
    engine_snap_t *snap = NULL;
    engine_step_t s;
    uint64_t first = 0, target, plan_at;
    int planned = 0; /* a plan restored with its residuals */
    uint8_t *text;
    size_t len, psi;
    uint64_t bp, bg, bos;
    int rank, n, m, rc = 1;
    char err[512];
    double t0, t1, total_t = 0.0, embed_t = 0.0, embed_b = 0.0;
    double first_t = 0.0; /* the first step's share of total_t */
    /* --snapshot-alternate: each step's time from the previous step's
     * end (so with the save made before it), by whether it had one. */
    double *alt_t[2] = {NULL, NULL}, last_end = 0.0;
    double alt_cpu[2] = {0, 0}, last_cpu = 0.0; /* this process's CPU */
    int alt_n[2] = {0, 0};
    /* The measured counterpart of a plan made in this run's prediction
     * (engine_plan_span), a step after the plan's first. */
    double *spans = NULL;
    int nspans = 0, profiled = 0;
    struct rusage ru;
    tacl_status_t st;

    double started = wall_s();

    memset(&a, 0, sizeof(a));
    if (parse_args(argc, argv, &a) != 0)
        return 2;
    text = read_file(a.data, &len);
    if (text == NULL)
        return 1;
    st = init_comm(&comm);
    if (st != TACL_OK) {
        fprintf(stderr, "train: cannot make the communicator: %s (%s)\n",
                tacl_status_string(st), tacl_last_error());
        free(text);
        return 1;
    }
    tacl_comm_rank(comm, &rank);
    if (rank == 0) {
        timeline(a.timeline, "start", started);
        timeline(a.timeline, "communicator", wall_s());
    }
    st = engine_create(comm, &a.eo, text, len, &e, err, sizeof(err));
    if (st != TACL_OK) {
        fprintf(stderr, "train: rank %d: %s\n", rank, err);
        goto out_comm;
    }
    /* The residuals now, so that the state line counts them. */
    if (a.compress != NULL) {
        float *rs, *ar;
        size_t rs_n, ar_n;

        if (engine_residuals(e, &rs, &rs_n, &ar, &ar_n) != TACL_OK) {
            fprintf(stderr, "train: rank %d: the residuals: %s\n", rank,
                    engine_error(e));
            goto out_engine;
        }
    }
    engine_shape(e, &psi, &n, &m);
    engine_state_bytes(e, &bp, &bg, &bos);
    if (rank == 0)
        printf("train: strategy %s ranks %d group %d psi %zu batch %d "
               "micro-steps %d%s%s%s\n", a.strategy, n, m, psi, a.eo.batch,
               a.eo.micro_steps, a.eo.hpz ? " hpZ" : "",
               a.eo.qwz ? " qwZ" : "", a.eo.qgz ? " qgZ" : "");
    if (rank == 0) {
        const model_t *md = engine_model(e);

        printf("layers %d", md->n_layers);
        for (int l = 0; l < md->n_layers; l++)
            printf(" %zu", md->padded[l]);
        printf("\n");
        if (a.vocab != NULL)
            printf("words vocab %d dim %d scheme %s\n", md->vocab, md->wdim,
                   tacl_sparse_scheme_name(a.eo.sparse_scheme));
    }
    printf("state rank %d p %llu g %llu os %llu\n", rank,
           (unsigned long long)bp, (unsigned long long)bg,
           (unsigned long long)bos);
    fflush(stdout);
    if (a.load != NULL && engine_load(e, a.load) != TACL_OK) {
        fprintf(stderr, "train: rank %d: %s\n", rank, engine_error(e));
        goto out_engine;
    }
    a.snap.codec = a.compress != NULL ? &a.codec : NULL;
    if (a.snapshots &&
        engine_snap_create(e, comm, &a.snap, &snap, err, sizeof(err)) !=
            TACL_OK) {
        fprintf(stderr, "train: rank %d: %s\n", rank, err);
        goto out_engine;
    }
    if (a.resume) {
        int found;
        double t_restore = now_s();

        if (engine_snap_resume(snap, &found, &first) != TACL_OK) {
            fprintf(stderr, "train: rank %d: --resume: %s\n", rank, err);
            goto out_engine;
        }
        /* The restore's time, for the thesis' t_rtvl (Equation 6.1). */
        t_restore = now_s() - t_restore;
        if (rank == 0)
            timeline(a.timeline, "restored", wall_s());
        if (rank == 0 && found)
            printf("resume: restored step %llu (key %s) in %.3f s\n",
                   (unsigned long long)first, a.snap.key, t_restore);
        else if (rank == 0)
            printf("resume: nothing saved under key '%s' in peer memory%s%s"
                   "; starting from step 0\n", a.snap.key,
                   a.snap.file != NULL ? " nor in files " : "",
                   a.snap.file != NULL ? a.snap.file : "");
        if (found) {
            char line[320];

            /* Every rank's: a replaced node's ranks fetch, rank 0 may
             * not. */
            engine_snap_restore_report(snap, line, sizeof(line));
            printf("%s\n", line);
        }
        fflush(stdout);
        if (found && a.compress != NULL &&
            resume_plan(e, snap, &a, rank, &planned) != 0)
            goto out_engine;
    }
    /* A resumed job runs on to step --steps; otherwise --steps more. */
    first = engine_step_index(e);
    target = a.resume ? (uint64_t)a.steps : first + (uint64_t)a.steps;
    /* Compression starts at step plan_at: after fusion's and full's
     * profiled steps, and not before --warmup-steps (counted from the
     * job's start, so a resumed job past them compresses at once). */
    plan_at = first + (a.plan_kind == ENGINE_PLAN_NONE
                           ? 0
                           : (uint64_t)a.profile_steps);
    plan_at = plan_at > (uint64_t)a.warmup ? plan_at : (uint64_t)a.warmup;
    if (rank == 0 && a.compress != NULL && !a.quiet) {
        printf("compress %s plan %s error-feedback %s density %g bits %d "
               "warmup %d hops %s\n", a.compress,
               engine_plan_name(a.plan_kind),
               a.codec.error_feedback ? "on" : "off",
               a.codec.params.density, a.codec.params.bits, a.warmup,
               gcomp_hops_name(a.codec.hops));
        fflush(stdout);
    }
    if (rank == 0 && a.compress != NULL && plan_at >= target)
        fprintf(stderr, "train: warning: compression would start after "
                "step %llu (--plan %s profiles %d steps, --warmup-steps "
                "%d): nothing is compressed (give more --steps)\n",
                (unsigned long long)plan_at, engine_plan_name(a.plan_kind),
                a.plan_kind == ENGINE_PLAN_NONE ? 0 : a.profile_steps,
                a.warmup);
    if (a.compress != NULL && a.plan_kind != ENGINE_PLAN_NONE &&
        (spans = calloc(target - first + 1, sizeof(double))) == NULL) {
        fprintf(stderr, "train: rank %d: out of memory\n", rank);
        goto out_engine;
    }
    if (a.alternate > 0) {
        alt_t[0] = calloc(target - first + 1, sizeof(double));
        alt_t[1] = calloc(target - first + 1, sizeof(double));
        if (alt_t[0] == NULL || alt_t[1] == NULL) {
            fprintf(stderr, "train: rank %d: out of memory\n", rank);
            goto out_engine;
        }
    }
    for (uint64_t i = first; i < target; i++) {
        /* none: every layer alone; fusion and full: plan from the
         * profiled steps. */
        if (a.compress != NULL && a.plan_kind == ENGINE_PLAN_NONE &&
            i == plan_at && !planned &&
            engine_plan_layerwise(e, &a.codec) != TACL_OK) {
            fprintf(stderr, "train: rank %d: %s\n", rank, engine_error(e));
            goto out_engine;
        }
        if (a.compress != NULL && a.plan_kind != ENGINE_PLAN_NONE &&
            i == plan_at && !planned &&
            engine_plan_profiled(e, comm, &a.codec, a.plan_kind, !a.quiet,
                                 err, sizeof(err)) != TACL_OK) {
            fprintf(stderr, "train: rank %d: --plan %s: %s\n", rank,
                    engine_plan_name(a.plan_kind), err);
            goto out_engine;
        }
        if (a.compress != NULL && a.plan_kind != ENGINE_PLAN_NONE &&
            i == plan_at && !planned)
            profiled = 1;
        t0 = now_s();
        st = engine_step(e, &s);
        t1 = now_s();
        if (st != TACL_OK) {
            if (rank == 0)
                timeline(a.timeline, "failed", wall_s());
            fprintf(stderr, "train: rank %d: step %llu: %s\n", rank,
                    (unsigned long long)i + 1, engine_error(e));
            goto out_engine;
        }
        total_t += t1 - t0;
        if (profiled && i > plan_at)
            spans[nspans++] = engine_plan_span(e);
        /* Scheduled copies: the steps before their plan are left out. */
        if (a.alternate > 0 &&
            i > first + (snap != NULL ? engine_snap_learning_steps(snap)
                                      : 0)) {
            int on = alt_on(&a, i - first);

            alt_t[on][alt_n[on]++] = t1 - last_end;
            alt_cpu[on] += cpu_s() - last_cpu;
        }
        last_end = t1;
        last_cpu = a.alternate > 0 ? cpu_s() : 0.0;
        if (rank == 0 && !a.quiet) {
            uint64_t bits;

            /* loss_bits: the loss's exact double, for bit-for-bit
             * comparisons (a resumed run against an uninterrupted one). */
            memcpy(&bits, &s.loss, sizeof(bits));
            printf("step %llu loss %.9g tokens/s %.0f state_bytes %llu "
                   "intra_bytes %.0f inter_bytes %.0f loss_bits %llu",
                   (unsigned long long)engine_step_index(e), s.loss,
                   a.eo.batch / (t1 - t0),
                   (unsigned long long)(bp + bg + bos), s.intra_bytes,
                   s.inter_bytes, (unsigned long long)bits);
            if (a.vocab != NULL)
                printf(" embed_s %.6f embed_bytes %.0f embed_scheme %s",
                       s.embed_s, s.embed_bytes,
                       tacl_sparse_scheme_name(s.embed_scheme));
            printf("\n");
        }
        embed_t += s.embed_s;
        embed_b += s.embed_bytes;
        fflush(stdout);
        if (snap != NULL &&
            engine_snap_after_step(snap, a.alternate == 0 ||
                                             alt_on(&a, i + 1 - first)) !=
                TACL_OK) {
            fprintf(stderr, "train: rank %d: step %llu: %s\n", rank,
                    (unsigned long long)i + 1, err);
            goto out_engine;
        }
        /* The summary's rate counts what a snapshot holds the loop up
         * (a blocking save's copies; a non-blocking one's pack and the
         * wait for the previous save), the step lines do not. */
        if (snap != NULL)
            total_t += now_s() - t1;
        if (i == first)
            first_t = total_t;
        if (rank == 0 && i == first)
            timeline(a.timeline, "first_step", wall_s());
        if (rank == a.kill_rank && i + 1 == (uint64_t)a.kill_step) {
            timeline(a.timeline, "kill", wall_s());
            raise(SIGKILL);
        }
    }
    if (snap != NULL && engine_snap_finish(snap) != TACL_OK) {
        fprintf(stderr, "train: rank %d: %s\n", rank, err);
        goto out_engine;
    }
    if (a.save != NULL && engine_save(e, a.save) != TACL_OK) {
        fprintf(stderr, "train: rank %d: %s\n", rank, engine_error(e));
        goto out_engine;
    }
    getrusage(RUSAGE_SELF, &ru);
    if (rank == 0 && snap != NULL) {
        char line[640];

        engine_snap_report(snap, line, sizeof(line));
        printf("%s\n", line);
    }
    if (rank == 0 && nspans > 0 && !a.quiet)
        printf("plan measured %.3f ms a micro-step (median of %d steps "
               "after the plan's first; the waits for parameter gathers and "
               "the optimizer left out, as in the prediction)\n",
               1e3 * median_of(spans, nspans), nspans);
    if (rank == 0) {
        printf("summary strategy %s steps %d tokens/s %.0f peak_rss_kb %ld "
               "loss %.9g", a.strategy, (int)(target - first),
               total_t > 0 ? (double)(target - first) * a.eo.batch / total_t
                           : 0.0,
               ru.ru_maxrss, target > first ? s.loss : 0.0);
        /* Without the first step (its warm-up, a first save's stores
         * and layout): the steady rate, when there are steps after it. */
        if (target - first > 1 && total_t > first_t)
            printf(" steady_tokens/s %.0f",
                   (double)(target - first - 1) * a.eo.batch /
                       (total_t - first_t));
        if (a.vocab != NULL)
            printf(" embed_s %.6f embed_bytes %.0f embed_scheme %s", embed_t,
                   embed_b, target > first
                                ? tacl_sparse_scheme_name(s.embed_scheme)
                                : "none");
        printf("\n");
    }
    if (rank == 0 && a.alternate > 0)
        alt_report(alt_t, alt_n, alt_cpu);
    /* Every rank's table: the replicas must agree (the tests compare). */
    if (a.vocab != NULL)
        printf("words rank %d checksum %016llx\n", rank,
               (unsigned long long)engine_words_checksum(e));
    rc = 0;
    /* The job is over: its node-local stores go (the files stay),
     * unless it is to be resumed. */
    engine_snap_destroy(snap, !a.keep_snapshots);
out_engine:
    free(spans);
    free(alt_t[0]);
    free(alt_t[1]);
    engine_destroy(e);
out_comm:
    if (rc != 0)
        tacl_comm_abort(comm);
    else
        tacl_comm_destroy(comm);
    free(text);
    return rc;
}
