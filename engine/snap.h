/*
 * The engine's in-memory snapshots (snap.c): its shards, step counter and
 * data position saved to peers' memory every K steps, flushed to a file
 * per rank, and restored on a resumed job.  Uses only tacl.h.
 */
#ifndef ENGINE_SNAP_H
#define ENGINE_SNAP_H

#include <tacl.h>

#include "engine.h"

/* How a save's copies travel (--snapshot-mode). */
typedef enum {
    ENGINE_SNAP_BACKGROUND = 0, /* tacl's background traffic, non-blocking */
    ENGINE_SNAP_FOREGROUND,     /* every part at once, non-blocking */
    ENGINE_SNAP_BLOCKING,       /* the step waits for the copies */
    ENGINE_SNAP_SCHEDULED       /* background, in the idle spans of the
                                   network learned from the first steps
                                   (the thesis' Algorithm 6.2) */
} engine_snap_mode_t;

/* mode named by name; -1 for a name it does not know. */
int engine_snap_parse_mode(const char *name, engine_snap_mode_t *mode);

typedef struct {
    int replicas;     /* copies counting the own one; 0: tacl's default */
    engine_snap_mode_t mode;
    int part_bytes;   /* bytes of one part of a copy; 0: 256 KiB */
    int parts;        /* parts of a copy in flight at once; 0: 4 */
    int every;        /* save after every K-th step; 0: never */
    int flush_every;  /* flush every F-th save; 0: only at the end */
    const char *key;  /* the job key naming the node-local stores */
    const char *file; /* files FILE.rank<r>, or NULL */
    double pace;      /* < 0: a due step waits for the previous save;
                         else tacl_snapshot_due decides (skipping while
                         copies are in flight) with this step-overhead
                         bound (0: none) */
    /* The gradient compression, or NULL: its error-feedback residuals
     * and the plan they are laid out by are saved with the shards. */
    const gcomp_codec_t *codec;
    /* Send every copy, also where replicas (engine_replica_group) hold
     * the same state and could serve as one another's copies. */
    int send_all;
} engine_snap_opts_t;

typedef struct engine_snap engine_snap_t;

/* A snapshot set over e's state on comm (collective); err gets why not. */
tacl_status_t engine_snap_create(engine_t *e, tacl_comm_t comm,
                                 const engine_snap_opts_t *o,
                                 engine_snap_t **snap_p, char *err,
                                 size_t errlen);

/* Restore (collective): memory first, then the files; *found_p 0 when
 * nothing was saved, else e holds the state of step *step_p. */
tacl_status_t engine_snap_resume(engine_snap_t *s, int *found_p,
                                 uint64_t *step_p);

/*
 * After a restore with compression: 1 and the plan's words
 * (engine_plan_import) when a plan was saved under the same compression
 * settings, its residuals restored into the engine; 0 when no plan was
 * set yet at the saved step; -1 when the settings differ (the residuals
 * then mean nothing: set a new plan, which zeroes them).
 */
int engine_snap_restored_plan(const engine_snap_t *s, const int32_t **words_p);

/* After every optimizer step: mark the next step's start (scheduled
 * copies), then save it if wanted and a K-th step (non-blocking, the
 * previous save waited for first, or with pace skipped while it is in
 * flight); flush it when due. */
tacl_status_t engine_snap_after_step(engine_snap_t *s, int want);

/* Steps the scheduled copies watch before they follow a plan (0 for
 * other modes). */
int engine_snap_learning_steps(const engine_snap_t *s);

/* One line on how the saves went (tacl_snapshot_stats), into buf. */
void engine_snap_report(engine_snap_t *s, char *buf, size_t len);

/* One line on where the last restore's time went on this rank
 * (tacl_snapshot_stats' restore fields), into buf. */
void engine_snap_restore_report(engine_snap_t *s, char *buf, size_t len);

/* After the last step: its state to the file if one is named; wait for
 * the save in flight. */
tacl_status_t engine_snap_finish(engine_snap_t *s);

/* Destroy the set (collective); purge removes the node-local stores. */
void engine_snap_destroy(engine_snap_t *s, int purge);

#endif /* ENGINE_SNAP_H */
