/*
 * SCHEDULED snapshot traffic (tacl.h, TACL_SNAPSHOT_TRAFFIC_SCHEDULED):
 * the thesis' Algorithm 6.2 (section 6.5.3) on spans profiled online
 * (section 6.5.4).
 *
 * The thesis timestamps every communication operation of the first
 * iterations and averages each idle span.  Here the executor records
 * when the caller's sends to other nodes are in flight
 * (tacl__exec_net_idle: an operation that only waits, a prefetch posted
 * early, leaves the link idle, as the quiet-link gate also holds); each
 * step mark (tacl_snapshot_due, or a save
 * when the caller never asks due) turns the step that ended into its
 * idle spans, as offsets from its start.  Once profile_steps steps were
 * watched, those with the most common number of spans are averaged span
 * by span, Algorithm 6.2 (algorithms/snap_partition.c) gives each span
 * its bytes, and from then on every mark opens the spans of the step it
 * starts (tacl__exec_bg_plan): a part starts only inside a span that
 * still has room for it, and the step's last span takes the rest.  A
 * span's room is all it holds, not only the bytes the plan gave it: on
 * time, parts fill the spans in order exactly as Algorithm 6.2 planned
 * (it fills each to its room in turn), and a part that missed its span
 * (a slow core, a step slower than the watched ones) takes room in a
 * later one instead of waiting for the step's last.
 *
 * f(s) = alpha + s / B on the link to the first holder: its class's
 * latency, and its bandwidth shared by the node's ranks, which all send
 * their copies at the same time.  The saves made while watching travel
 * as BACKGROUND traffic does.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "snapshot.h"

/* Gaps shorter than this, or than TACL_BG_QUIET_US, are a collective's
 * own steps, not idle time. */
#define SCHED_MIN_GAP_NS 200000u

struct tacl__snap_sched {
    int want;            /* steps to watch */
    double mu;           /* share of a span planned full */
    int watched;
    uint64_t mark_ns;    /* the current step's start; 0 before the first */
    /* Each watched step: its length, its spans' offsets and lengths. */
    uint64_t step_ns[TACL__SNAP_PROFILE_MAX];
    int nspans[TACL__SNAP_PROFILE_MAX];
    uint64_t off[TACL__SNAP_PROFILE_MAX][TACL__BG_SPANS];
    uint64_t len[TACL__SNAP_PROFILE_MAX][TACL__BG_SPANS];
    int planned;         /* 1: made; -1: no step had an idle span */
    int recording;       /* tacl__exec_netlog_use on */
    /* The plan: the average step's spans and Algorithm 6.2's bytes. */
    int n;
    uint64_t plan_off[TACL__BG_SPANS], plan_len[TACL__BG_SPANS];
    uint64_t budget[TACL__BG_SPANS];
    uint64_t room[TACL__BG_SPANS]; /* whole parts each span holds */
    uint64_t plan_step_ns, bytes, beyond;
    tacl__bg_plan_t bg;  /* what the executor spends (under its lock) */
};

tacl_status_t tacl__snap_sched_init(struct tacl_snapshot *snap,
                                    const tacl_snapshot_config_t *config)
{
    struct tacl__snap_sched *sc = calloc(1, sizeof(*sc));

    if (sc == NULL)
        return tacl__error(TACL_ERR_NO_MEMORY, COLL,
                           "snapshot create: out of memory");
    sc->want = config->profile_steps > 0 ? config->profile_steps : 10;
    sc->mu = config->span_share > 0 ? config->span_share : 0.8;
    snap->sched = sc;
    tacl__exec_netlog_use(snap->comm->x.ctx, 1);
    sc->recording = 1;
    return TACL_OK;
}

static void stop_recording(struct tacl_snapshot *snap)
{
    if (snap->sched->recording)
        tacl__exec_netlog_use(snap->comm->x.ctx, -1);
    snap->sched->recording = 0;
}

void tacl__snap_sched_free(struct tacl_snapshot *snap)
{
    if (snap->sched == NULL)
        return;
    stop_recording(snap);
    tacl__exec_bg_plan(&snap->comm->x, NULL, NULL);
    free(snap->sched);
    snap->sched = NULL;
}

/* The step from sc->mark_ns to now into the watched ones. */
static void watch(struct tacl_snapshot *snap, uint64_t now)
{
    struct tacl__snap_sched *sc = snap->sched;
    uint64_t start[TACL__BG_SPANS];
    tacl__ctx_t *ctx = snap->comm->x.ctx;
    int w = sc->watched,
        n = tacl__exec_net_idle(ctx, sc->mark_ns, now,
                                TACL_MAX(ctx->bg_quiet_ns, SCHED_MIN_GAP_NS),
                                start, sc->len[w], TACL__BG_SPANS);

    if (n < 0)
        return; /* more operations than the record holds: not this one */
    for (int i = 0; i < n; i++)
        sc->off[w][i] = start[i] - sc->mark_ns;
    sc->nspans[w] = n;
    sc->step_ns[w] = now - sc->mark_ns;
    sc->watched++;
}

/* The most common number of spans among the watched steps (ties: more
 * spans), or 0 when none had any. */
static int common_count(const struct tacl__snap_sched *sc)
{
    int best = 0, best_times = 0;

    for (int i = 0; i < sc->watched; i++) {
        int times = 0;

        for (int j = 0; j < sc->watched; j++)
            times += sc->nspans[j] == sc->nspans[i];
        if (sc->nspans[i] > 0 &&
            (times > best_times ||
             (times == best_times && sc->nspans[i] > best))) {
            best = sc->nspans[i];
            best_times = times;
        }
    }
    return best;
}

/* f(s)'s alpha and B: the link to the first holder, shared by the
 * node's ranks. */
static void link_rate(const struct tacl_snapshot *snap,
                      tacl__partition_in_t *in)
{
    const tacl__ctx_t *ctx = snap->comm->x.ctx;
    int h = snap->m > 1 ? tacl__snap_holder(snap, snap->rank, 1) : snap->rank;
    const tacl__link_t *link = &ctx->topo.link[snap->comm->x.link_of[h]];

    in->alpha_s = link->lat * 1e-6;
    in->bytes_per_s = link->bw * 1e9 / TACL_MAX(ctx->local_ranks, 1);
}

static void plan(struct tacl_snapshot *snap)
{
    struct tacl__snap_sched *sc = snap->sched;
    int n = common_count(sc), steps = 0;
    double span_s[TACL__BG_SPANS], idle = 0;
    tacl__partition_in_t in = {.copies = snap->m - 1,
                               .part_bytes = snap->chunk,
                               .mu = sc->mu,
                               .whole_parts = 1};

    stop_recording(snap);
    if (n == 0) {
        sc->planned = -1;
        TACL_WARN(COLL, "snapshot %s: no idle span of the network in %d "
                  "steps watched: its copies travel as background traffic",
                  snap->key, sc->watched);
        return;
    }
    memset(sc->plan_off, 0, sizeof(sc->plan_off));
    memset(sc->plan_len, 0, sizeof(sc->plan_len));
    sc->plan_step_ns = 0;
    for (int w = 0; w < sc->watched; w++) {
        if (sc->nspans[w] != n)
            continue;
        steps++;
        sc->plan_step_ns += sc->step_ns[w];
        for (int i = 0; i < n; i++) {
            sc->plan_off[i] += sc->off[w][i];
            sc->plan_len[i] += sc->len[w][i];
        }
    }
    sc->plan_step_ns /= (uint64_t)steps;
    for (int i = 0; i < n; i++) {
        sc->plan_off[i] /= (uint64_t)steps;
        sc->plan_len[i] /= (uint64_t)steps;
        span_s[i] = (double)sc->plan_len[i] * 1e-9;
        idle += span_s[i];
    }
    for (int i = 0; i < snap->nregions; i++)
        in.copy_bytes += snap->regions[i].bytes;
    link_rate(snap, &in);
    sc->n = n;
    sc->bytes = in.copy_bytes * (uint64_t)in.copies;
    sc->beyond = tacl__snap_partition(span_s, n, &in, sc->budget);
    /* Each span's room: what it takes of copies without end. */
    for (int i = 0; i < n; i++) {
        tacl__partition_in_t endless = in;
        double one[2] = {span_s[i], 0};
        uint64_t got[2];

        endless.copy_bytes = UINT64_MAX / 4;
        endless.copies = 1;
        tacl__snap_partition(one, 2, &endless, got);
        sc->room[i] = got[0];
    }
    sc->planned = 1;
    TACL_INFO(COLL,
              "snapshot %s: %d idle spans of the network, %.1f of a %.1f ms "
              "step (%d of %d watched steps alike); %llu bytes a save at "
              "%.3g GB/s, %llu of them beyond the spans",
              snap->key, n, idle * 1e3, (double)sc->plan_step_ns * 1e-6,
              steps, sc->watched, (unsigned long long)sc->bytes,
              in.bytes_per_s * 1e-9, (unsigned long long)sc->beyond);
    for (int i = 0; i < n; i++)
        TACL_INFO(COLL, "snapshot %s: span %d at %.1f ms for %.1f ms: %llu "
                  "bytes",
                  snap->key, i, (double)sc->plan_off[i] * 1e-6,
                  (double)sc->plan_len[i] * 1e-6,
                  (unsigned long long)sc->budget[i]);
    if (sc->beyond > 0)
        TACL_WARN(COLL, "snapshot %s: %llu of a save's %llu bytes do not "
                  "fit in the network's idle time (%.0f%% of its %d spans "
                  "planned full): they go in the step's last span, and "
                  "tacl_snapshot_due skips saves while they travel",
                  snap->key, (unsigned long long)sc->beyond,
                  (unsigned long long)sc->bytes, sc->mu * 100, n);
}

/* This step's spans, from now, to the executor. */
static void open_spans(struct tacl_snapshot *snap, uint64_t now)
{
    struct tacl__snap_sched *sc = snap->sched;
    tacl__bg_plan_t p = {.n = sc->n};

    for (int i = 0; i < sc->n; i++) {
        p.start_ns[i] = now + sc->plan_off[i];
        p.end_ns[i] = i == sc->n - 1
                          ? UINT64_MAX
                          : p.start_ns[i] +
                                (uint64_t)(sc->mu * (double)sc->plan_len[i]);
        p.left[i] = sc->room[i];
    }
    tacl__exec_bg_plan(&snap->comm->x, &sc->bg, &p);
}

void tacl__snap_sched_mark(struct tacl_snapshot *snap)
{
    struct tacl__snap_sched *sc = snap->sched;
    uint64_t now = tacl__now_ns();

    if (sc == NULL)
        return;
    if (sc->planned == 0 && sc->mark_ns != 0)
        watch(snap, now);
    sc->mark_ns = now;
    if (sc->planned == 0 && sc->watched >= sc->want)
        plan(snap);
    if (sc->planned > 0)
        open_spans(snap, now);
}

void tacl__snap_sched_stats(const struct tacl_snapshot *snap,
                            tacl_snapshot_stats_t *st)
{
    const struct tacl__snap_sched *sc = snap->sched;

    if (sc == NULL || sc->planned <= 0)
        return;
    st->plan_spans = sc->n;
    st->plan_step_seconds = (double)sc->plan_step_ns * 1e-9;
    st->plan_idle_seconds = 0;
    for (int i = 0; i < sc->n; i++)
        st->plan_idle_seconds += (double)sc->plan_len[i] * 1e-9;
    st->plan_bytes = sc->bytes;
    st->plan_beyond_bytes = sc->beyond;
}
