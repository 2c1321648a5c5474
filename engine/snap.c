/*
 * The engine's in-memory snapshots (tacl.h, tacl_snapshot_*): every
 * rank's parameter and Adam shards, its step counter and data position
 * are registered with a snapshot set; after the optimizer step,
 * every K steps, they are saved non-blocking (the previous save is waited
 * for first), and flushed to a file per rank every F saves and at the
 * end when a file is named.  A resumed job restores from peer memory
 * first, then from the files, and goes on from the restored step.
 *
 * Gradient shards are not saved: a save follows a step, whose optimizer
 * update zeroes every gradient shard (update, words_update), so they
 * would add a quarter to every copy and carry nothing; a restore zeroes
 * them, as a step boundary has them.  (A checkpoint of DeepSpeed or torch
 * DCP holds no gradients either.)
 *
 * With gradient compression the error-feedback residuals are saved too,
 * with the plan that lays them out and a digest of the compression
 * settings: a resumed job sets that plan again without zeroing them, so
 * its losses are the uninterrupted run's (as 1-bit Adam keeps its error
 * buffers in the optimizer state a checkpoint holds).
 *
 * A set holds at most 32 regions.  When the shards fit (layers times
 * three, and the position), each is registered as it is, so a save copies
 * straight from them and a restore writes straight into them; else, as
 * a deep model's do not, each kind's shards are packed layer after layer
 * into one buffer before a save and unpacked after a restore.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

static const char *const kind_names[ENGINE_SHARD_KINDS] = {"param", "grad",
                                                           "adam_m",
                                                           "adam_v"};

struct engine_snap {
    engine_t *e;
    engine_snap_opts_t o;
    tacl_snapshot_t set;
    int rank, layers;
    int direct; /* every shard its own region: no packs */
    float *pack[ENGINE_SHARD_KINDS];
    size_t floats[ENGINE_SHARD_KINDS];
    uint64_t position[2]; /* step, data position */
    int32_t *plan;        /* with compression: the plan, then the digest */
    size_t plan_words;    /* engine_plan_words */
    char path[4096];      /* this rank's file, or "" */
    tacl_request_t pending;
    tacl_request_t flushing; /* the periodic flush in the background */
    uint64_t pending_step, saved_step, flushed_step;
    int saves, have_saved, have_flushed;
    double pack_s, total_pack_s; /* the last save's pack, and all */
    char *err;
    size_t errlen;
};

static tacl_status_t fail(engine_snap_t *s, tacl_status_t st,
                          const char *what)
{
    snprintf(s->err, s->errlen, "snapshot %s: %s (%s)", what,
             tacl_status_string(st), tacl_last_error());
    return st;
}

/* The kinds a snapshot holds: all but the gradients (see above). */
static int kind_saved(int k)
{
    return k != ENGINE_SHARD_GRAD;
}

#define ENGINE_SAVED_KINDS (ENGINE_SHARD_KINDS - 1)

/* Copy every shard of each kind into its pack (to 1) or back (to 0),
 * unless they are registered as they are; then the position.  Back, the
 * gradients are zeroed. */
static void pack(engine_snap_t *s, int to)
{
    for (int l = 0; l < s->layers && !to; l++) {
        float *shard;
        size_t len;

        engine_shard(s->e, ENGINE_SHARD_GRAD, l, &shard, &len);
        if (len > 0)
            memset(shard, 0, len * sizeof(float));
    }
    for (int k = 0; k < ENGINE_SHARD_KINDS && !s->direct; k++) {
        float *at = s->pack[k];

        if (!kind_saved(k))
            continue;

        for (int l = 0; l < s->layers; l++) {
            float *shard;
            size_t len;

            engine_shard(s->e, (engine_shard_t)k, l, &shard, &len);
            if (to)
                memcpy(at, shard, len * sizeof(float));
            else
                memcpy(shard, at, len * sizeof(float));
            at += len;
        }
    }
    if (to)
        engine_position(s->e, &s->position[0], &s->position[1]);
    else
        engine_set_position(s->e, s->position[0], s->position[1]);
    if (to && s->plan != NULL) {
        uint64_t d = gcomp_digest(s->o.codec);

        engine_plan_export(s->e, s->plan);
        memcpy(s->plan + s->plan_words, &d, sizeof(d));
    }
}

/* With compression: the residuals and the plan, each one region. */
static tacl_status_t register_compression(engine_snap_t *s)
{
    float *rs, *ar;
    size_t rs_n, ar_n;
    tacl_status_t st = engine_residuals(s->e, &rs, &rs_n, &ar, &ar_n);

    if (st != TACL_OK)
        return fail(s, st, "residuals");
    s->plan_words = engine_plan_words(s->e);
    s->plan = calloc(s->plan_words + 2, sizeof(int32_t));
    if (s->plan == NULL)
        return fail(s, TACL_ERR_NO_MEMORY, "plan");
    st = tacl_snapshot_register(s->set, "residual.rs", rs_n ? rs : NULL,
                                rs_n * sizeof(float));
    if (st == TACL_OK)
        st = tacl_snapshot_register(s->set, "residual.ar", ar_n ? ar : NULL,
                                    ar_n * sizeof(float));
    if (st == TACL_OK)
        st = tacl_snapshot_register(s->set, "plan", s->plan,
                                    (s->plan_words + 2) * sizeof(int32_t));
    return st == TACL_OK ? TACL_OK : fail(s, st, "register");
}

int engine_snap_restored_plan(const engine_snap_t *s, const int32_t **words_p)
{
    uint64_t d;

    if (s->plan == NULL || !s->have_saved || s->plan[0] == 0)
        return 0;
    memcpy(&d, s->plan + s->plan_words, sizeof(d));
    if (d != gcomp_digest(s->o.codec))
        return -1;
    *words_p = s->plan;
    return 1;
}

/* The shards' regions: one a shard (direct), or one pack a kind. */
static tacl_status_t register_shards(engine_snap_t *s)
{
    tacl_status_t st = TACL_OK;
    char name[48];

    for (int k = 0; k < ENGINE_SHARD_KINDS && st == TACL_OK; k++) {
        if (!kind_saved(k))
            continue;
        for (int l = 0; l < s->layers && s->direct && st == TACL_OK; l++) {
            float *shard;
            size_t len;

            engine_shard(s->e, (engine_shard_t)k, l, &shard, &len);
            snprintf(name, sizeof(name), "%s.%d", kind_names[k], l);
            st = tacl_snapshot_register(s->set, name, len > 0 ? shard : NULL,
                                        len * sizeof(float));
        }
        if (!s->direct)
            st = tacl_snapshot_register(s->set, kind_names[k], s->pack[k],
                                        s->floats[k] * sizeof(float));
    }
    if (st != TACL_OK)
        fail(s, st, "register");
    return st;
}

int engine_snap_parse_mode(const char *name, engine_snap_mode_t *mode)
{
    static const char *const names[] = {"background", "foreground",
                                        "blocking", "scheduled"};

    for (int m = 0; m < 4; m++)
        if (strcmp(name, names[m]) == 0) {
            *mode = (engine_snap_mode_t)m;
            return 0;
        }
    return -1;
}

/* The most regions a snapshot set holds (tacl_snapshot_register). */
#define ENGINE_SNAP_REGIONS 32

/* Parts in flight per copy by default: one part after the other.  The
 * thesis pipelines its staging parts (Figure 6.16); here a part handed
 * to the transport waits in its TCP socket, ahead of the step's own
 * messages to that peer, so more parts in flight delayed them more:
 * measured inside one run (ALTERNATE=2 perf/snapshot_overhead.sh, 2x2
 * at 1 Gbit/s, 3 launches) 4 parts cost ZeRO-3 1.18x and MiCS 1.13x a
 * step, 1 part 1.07x and 1.05x (docs/bench/compression_snapshots.md).
 * --snapshot-parts P pipelines. */
#define ENGINE_SNAP_PARTS 1

/* Bytes of a part of a copy by default.  Background parts to another
 * node go one at a time, each once the last one's bytes have left the
 * link (executor.c, link_charge), so a collective's message waits behind
 * one part at most: on 2x2 at 1 Gbit/s (ZeRO-3, batch 2048, one launch
 * each, ALTERNATE=2 perf/snapshot_overhead.sh) a save made a step 1.27x
 * with parts of 1 MiB, 1.17x with 256 KiB, 1.16x with 128 KiB and 1.20x
 * with 64 KiB. */
#define ENGINE_SNAP_PART (256u << 10)

/* Steps scheduled copies watch before their plan (the thesis profiles
 * 20 iterations; tacl's default is 10). */
#define ENGINE_SNAP_LEARN 10

tacl_status_t engine_snap_create(engine_t *e, tacl_comm_t comm,
                                 const engine_snap_opts_t *o,
                                 engine_snap_t **snap_p, char *err,
                                 size_t errlen)
{
    size_t part = o->part_bytes > 0 ? (size_t)o->part_bytes : ENGINE_SNAP_PART;
    int parts = o->parts > 0 ? o->parts : ENGINE_SNAP_PARTS;
    tacl_snapshot_config_t cfg = {
        .replicas = o->replicas,
        .staging_bytes = part * (size_t)parts,
        .staging_parts = parts,
        .traffic = o->mode == ENGINE_SNAP_BACKGROUND
                       ? TACL_SNAPSHOT_TRAFFIC_BACKGROUND
                   : o->mode == ENGINE_SNAP_SCHEDULED
                       ? TACL_SNAPSHOT_TRAFFIC_SCHEDULED
                       : TACL_SNAPSHOT_TRAFFIC_FOREGROUND,
        .job_key = o->key,
        .max_step_overhead = o->pace > 0 ? o->pace : 0,
        .profile_steps = ENGINE_SNAP_LEARN};
    engine_snap_t *s = calloc(1, sizeof(*s));
    int nodes = 1;
    tacl_status_t st;

    if (s == NULL) {
        snprintf(err, errlen, "snapshot: out of memory");
        return TACL_ERR_NO_MEMORY;
    }
    s->e = e;
    s->o = *o;
    s->err = err;
    s->errlen = errlen;
    s->layers = engine_shard_layers(e);
    tacl_comm_rank(comm, &s->rank);
    if (o->file != NULL)
        snprintf(s->path, sizeof(s->path), "%s.rank%d", o->file, s->rank);
    /* Copies on other nodes when there are enough of them, else on other
     * ranks (one machine: a killed process, not a lost node). */
    st = tacl_comm_n_nodes(comm, &nodes);
    if (st == TACL_OK && nodes < (o->replicas > 0 ? o->replicas : 2))
        cfg.domain = TACL_SNAPSHOT_DOMAIN_RANK;
    s->direct = s->layers * ENGINE_SAVED_KINDS + 1 +
                    (o->codec != NULL ? 3 : 0) <=
                ENGINE_SNAP_REGIONS;
    for (int k = 0; k < ENGINE_SHARD_KINDS && st == TACL_OK && !s->direct;
         k++) {
        if (!kind_saved(k))
            continue;
        for (int l = 0; l < s->layers; l++) {
            float *shard;
            size_t len;

            engine_shard(e, (engine_shard_t)k, l, &shard, &len);
            s->floats[k] += len;
        }
        s->pack[k] = malloc((s->floats[k] > 0 ? s->floats[k] : 1) *
                            sizeof(float));
        if (s->pack[k] == NULL) {
            snprintf(err, errlen, "snapshot: out of memory");
            st = TACL_ERR_NO_MEMORY;
        }
    }
    if (st == TACL_OK &&
        (st = tacl_snapshot_create(comm, &cfg, &s->set)) != TACL_OK)
        fail(s, st, "create");
    if (st == TACL_OK)
        st = register_shards(s);
    if (st == TACL_OK &&
        (st = tacl_snapshot_register(s->set, "position", s->position,
                                     sizeof(s->position))) != TACL_OK)
        fail(s, st, "register");
    if (st == TACL_OK && o->codec != NULL)
        st = register_compression(s);
    /* Replicas' own copies serve as one another's copies, unless the
     * error-feedback residuals (each rank's own) are part of the state. */
    if (st == TACL_OK && !o->send_all && o->codec == NULL &&
        (st = tacl_snapshot_replicated(s->set, engine_replica_group(e))) !=
            TACL_OK)
        fail(s, st, "replicated");
    if (st != TACL_OK) {
        engine_snap_destroy(s, 0);
        return st;
    }
    *snap_p = s;
    return TACL_OK;
}

tacl_status_t engine_snap_resume(engine_snap_t *s, int *found_p,
                                 uint64_t *step_p)
{
    uint64_t version;
    int found;
    tacl_status_t st = tacl_snapshot_restore_file(s->set,
                                                  s->path[0] != '\0' ? s->path
                                                                     : NULL,
                                                  &found, &version);

    if (st != TACL_OK)
        return fail(s, st, "restore");
    if (found) {
        pack(s, 0);
        s->saved_step = version;
        s->have_saved = 1;
    }
    *found_p = found;
    *step_p = found ? s->position[0] : 0;
    return TACL_OK;
}

/* Wait for *req, if any, and free it: its status. */
static tacl_status_t finish_request(tacl_request_t *req)
{
    tacl_status_t st;

    if (*req == NULL)
        return TACL_OK;
    st = tacl_request_wait(*req);
    tacl_request_free(*req);
    *req = NULL;
    return st;
}

/* Wait for the save in flight, if any. */
static tacl_status_t settle(engine_snap_t *s)
{
    tacl_status_t st;

    if (s->pending == NULL)
        return TACL_OK;
    st = finish_request(&s->pending);
    if (st != TACL_OK)
        return fail(s, st, "save");
    s->saved_step = s->pending_step;
    s->have_saved = 1;
    return TACL_OK;
}

/* Wait for the background flush, if any. */
static tacl_status_t flush_settle(engine_snap_t *s)
{
    tacl_status_t st = finish_request(&s->flushing);

    return st != TACL_OK ? fail(s, st, "flush") : TACL_OK;
}

/* Save the current step non-blocking; flush it when due (in the
 * background, training on) or forced (the last step: at once). */
static tacl_status_t save(engine_snap_t *s, int flush)
{
    uint64_t step, data_pos;
    int due;
    tacl_status_t st = settle(s);

    if (st != TACL_OK)
        return st;
    engine_position(s->e, &step, &data_pos);
    s->pack_s = engine_clock_s();
    pack(s, 1);
    s->pack_s = engine_clock_s() - s->pack_s;
    s->total_pack_s += s->pack_s;
    st = tacl_snapshot_save_nb(s->set, step, &s->pending);
    if (st != TACL_OK) {
        s->pending = NULL;
        return fail(s, st, "save");
    }
    s->pending_step = step;
    s->saves++;
    if (s->o.mode == ENGINE_SNAP_BLOCKING && (st = settle(s)) != TACL_OK)
        return st;
    due = s->o.flush_every > 0 && s->saves % s->o.flush_every == 0;
    /* The own copy is committed once save_nb returns. */
    if ((flush || due) && s->path[0] != '\0') {
        st = flush_settle(s);
        if (st == TACL_OK)
            st = flush ? tacl_snapshot_flush(s->set, step, s->path)
                       : tacl_snapshot_flush_nb(s->set, step, s->path,
                                                &s->flushing);
        if (st != TACL_OK)
            return fail(s, st, "flush");
        s->flushed_step = step;
        s->have_flushed = 1;
    }
    return TACL_OK;
}

tacl_status_t engine_snap_after_step(engine_snap_t *s, int want)
{
    uint64_t step, data_pos;

    engine_position(s->e, &step, &data_pos);
    /* Every step, saved or not, is a step the scheduled copies learn. */
    if (s->o.mode == ENGINE_SNAP_SCHEDULED) {
        tacl_status_t st = tacl_snapshot_step(s->set);

        if (st != TACL_OK)
            return fail(s, st, "step");
    }
    if (!want || s->o.every <= 0 || step % (uint64_t)s->o.every != 0)
        return TACL_OK;
    if (s->o.pace >= 0 && s->o.mode != ENGINE_SNAP_BLOCKING) {
        int due = 0;
        tacl_status_t st = tacl_snapshot_due(s->set, &due);

        if (st != TACL_OK)
            return fail(s, st, "due");
        if (!due)
            return TACL_OK;
    }
    return save(s, 0);
}

int engine_snap_learning_steps(const engine_snap_t *s)
{
    return s->o.mode == ENGINE_SNAP_SCHEDULED ? ENGINE_SNAP_LEARN : 0;
}

void engine_snap_report(engine_snap_t *s, char *buf, size_t len)
{
    tacl_snapshot_stats_t st = {0};

    (void)tacl_snapshot_stats(s->set, &st);
    /* The breakdown of a save's cost (issue 29): the engine's pack of
     * its shards, then in tacl's save the agreement on the previous
     * one, the own copy, its separate checksum pass (0 when fused), and
     * the transfer to peers; the last save's and the totals; then the
     * scheduled copies' plan (zeros for other modes): the network's idle
     * spans in a step, their time, and what did not fit in them. */
    snprintf(buf, len,
             "snapshots saved %llu skipped_in_flight %llu "
             "skipped_overhead %llu save_s %.4f step_s %.4f pack_s %.6f "
             "agree_s %.6f copy_s %.6f crc_s %.6f transfer_s %.6f "
             "sent_bytes %llu total_pack_s %.6f total_save_s %.6f "
             "total_agree_s %.6f total_copy_s %.6f total_crc_s %.6f "
             "total_transfer_s %.6f total_sent_bytes %llu plan_spans %d "
             "plan_step_s %.6f plan_idle_s %.6f plan_beyond_bytes %llu",
             (unsigned long long)st.saves,
             (unsigned long long)st.skipped_busy,
             (unsigned long long)st.skipped_overhead, st.save_seconds,
             st.step_seconds, s->pack_s, st.agree_seconds, st.copy_seconds,
             st.checksum_seconds, st.transfer_seconds,
             (unsigned long long)st.bytes_sent, s->total_pack_s,
             st.total_save_seconds, st.total_agree_seconds,
             st.total_copy_seconds,
             st.total_checksum_seconds, st.total_transfer_seconds,
             (unsigned long long)st.total_bytes_sent, st.plan_spans,
             st.plan_step_seconds, st.plan_idle_seconds,
             (unsigned long long)st.plan_beyond_bytes);
}

void engine_snap_restore_report(engine_snap_t *s, char *buf, size_t len)
{
    tacl_snapshot_stats_t st = {0};

    (void)tacl_snapshot_stats(s->set, &st);
    /* The restore's phases in order (issue 29): this rank's copies
     * listed, the lists all-gathered, the fetched headers and room, the
     * bodies on the wire (checked part by part), the own copy's check,
     * the two agreements, the regions written. */
    snprintf(buf, len,
             "restore rank %d restore_s %.6f inventory_s %.6f gather_s %.6f "
             "header_s %.6f fetch_s %.6f verify_s %.6f agree_s %.6f "
             "write_s %.6f fetched_bytes %llu",
             s->rank, st.restore_seconds, st.restore_inventory_seconds,
             st.restore_gather_seconds, st.restore_header_seconds,
             st.restore_fetch_seconds, st.restore_verify_seconds,
             st.restore_agree_seconds, st.restore_write_seconds,
             (unsigned long long)st.restore_bytes_fetched);
}

tacl_status_t engine_snap_finish(engine_snap_t *s)
{
    uint64_t step, data_pos;
    tacl_status_t st;

    engine_position(s->e, &step, &data_pos);
    st = flush_settle(s);
    if (st != TACL_OK)
        return st;
    if (s->path[0] == '\0' || (s->have_flushed && s->flushed_step == step))
        return settle(s);
    if ((s->pending != NULL && s->pending_step == step) ||
        (s->pending == NULL && s->have_saved && s->saved_step == step)) {
        st = tacl_snapshot_flush(s->set, step, s->path);
        if (st != TACL_OK)
            return fail(s, st, "flush");
        return settle(s);
    }
    /* The last step goes to the file even between two saves. */
    st = save(s, 1);
    return st != TACL_OK ? st : settle(s);
}

void engine_snap_destroy(engine_snap_t *s, int purge)
{
    if (s == NULL)
        return;
    (void)finish_request(&s->pending);
    (void)finish_request(&s->flushing);
    if (s->set != NULL)
        tacl_snapshot_destroy(s->set, purge);
    for (int k = 0; k < ENGINE_SHARD_KINDS; k++)
        free(s->pack[k]);
    free(s->plan);
    free(s);
}
