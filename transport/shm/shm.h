/*
 * Internal layout of the shm transport, shared by its files.
 *
 * Each rank owns one POSIX shared-memory segment: a header (pid, a probe
 * word for cross-memory attach, a futex doorbell and a "sleeping" flag)
 * followed by one single-producer single-consumer queue per rank of the
 * node, indexed by the sender's local index.  A queue is TACL_SHM_NSLOTS
 * slots of TACL_SHM_SLOT_SIZE bytes with a 64-byte header each; head and
 * tail are counters on their own cache lines, published with C11
 * release stores and read with acquire loads.
 *
 * Four message kinds travel through the slots: DATA (a fragment of a
 * message copied inline: every eager message and, in copy mode, every
 * large one), RTS (a request to send a large message by cross-memory
 * copy, cma mode; when the sender's buffer lies in a tacl_mem_alloc
 * segment it names the segment, and the receiver maps it (shm_map.h)
 * and copies with its own loads and stores instead), CTS (a receiver's
 * answer to an RTS asking the sender to write the message itself,
 * process_vm_writev, into a receive buffer that is cheap to pin) and FIN
 * (the side that copied tells the other its operation is finished).
 */
#ifndef TACL_TRANSPORT_SHM_SHM_H
#define TACL_TRANSPORT_SHM_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "memseg.h"
#include "shm_map.h"
#include "tl_base.h"

#define TACL_SHM_NSLOTS 16
#define TACL_SHM_SLOT_SIZE (64u * 1024)
/* Bytes one progress call pulls for one receive in cma mode. */
#define TACL_SHM_CMA_CHUNK (4u << 20)
/* How often, at most, peers with pending operations are checked alive. */
#define TACL_SHM_LIVENESS_NS (5ull * 1000 * 1000)
/* Slots one progress call consumes from one queue at most. */
#define TACL_SHM_POLL_BUDGET (2 * TACL_SHM_NSLOTS)
#define TACL_SHM_MAGIC 0x7461636c73686d32ull /* "taclshm2" */
#define TACL_SHM_PAGE 4096u

enum {
    TACL_SHM_MSG_DATA = 1,
    TACL_SHM_MSG_RTS,
    TACL_SHM_MSG_CTS,
    TACL_SHM_MSG_FIN
};

/** One slot's header; the payload lives in the queue's data area. */
typedef struct {
    uint32_t kind;
    uint32_t frag_len;         /* DATA: payload bytes in this slot */
    uint64_t tag;              /* DATA, RTS */
    uint64_t msg_len;          /* DATA, RTS: length of the whole message */
    uint64_t offset;           /* DATA: where this fragment goes */
    uint64_t addr;             /* RTS: the sender's buffer; CTS: the
                                  receiver's */
    uint64_t op_id;            /* RTS, CTS: the sender's operation; FIN:
                                  the operation of the rank it goes to */
    int64_t status;            /* FIN: how the copy ended */
    uint64_t peer_op;          /* CTS: the receiver's operation */
    tacl__memseg_ref_t seg;    /* RTS: the segment holding addr (id 0:
                                  none); the receiver may map it */
} tacl__shm_slot_t;

/** The control part of one queue, at the start of its area. */
typedef struct {
    _Alignas(64) _Atomic uint64_t head;    /* slots produced */
    _Alignas(64) _Atomic uint64_t tail;    /* slots consumed */
    /* Set by a producer that found the queue full and may sleep. */
    _Alignas(64) _Atomic uint32_t producer_waiting;
    _Alignas(64) tacl__shm_slot_t slots[TACL_SHM_NSLOTS];
} tacl__shm_queue_ctl_t;

/** The segment header. */
typedef struct {
    uint64_t magic;
    uint64_t nonce;
    int32_t rank;
    int32_t pid;
    uint32_t nqueues;
    uint32_t pad;
    uint64_t probe;            /* a known word other ranks read by CMA */
    _Alignas(64) _Atomic uint32_t doorbell; /* bumped on every delivery */
    _Alignas(64) _Atomic uint32_t sleeping; /* the owner is in wait() */
} tacl__shm_seg_hdr_t;

#define TACL_SHM_ROUND_PAGE(x)                                               \
    (((x) + TACL_SHM_PAGE - 1) / TACL_SHM_PAGE * TACL_SHM_PAGE)
#define TACL_SHM_HDR_STRIDE TACL_SHM_ROUND_PAGE(sizeof(tacl__shm_seg_hdr_t))
#define TACL_SHM_CTL_STRIDE TACL_SHM_ROUND_PAGE(sizeof(tacl__shm_queue_ctl_t))
#define TACL_SHM_QUEUE_STRIDE                                                \
    (TACL_SHM_CTL_STRIDE + (size_t)TACL_SHM_NSLOTS * TACL_SHM_SLOT_SIZE)

/** A view of one queue in a mapped segment. */
typedef struct {
    tacl__shm_queue_ctl_t *ctl;
    uint8_t *data;
} tacl__shm_queue_t;

/**
 * A message that arrived before its receive was posted.  It waits on its
 * peer's ux queue until a receive takes it; a DATA message taken before
 * all its bytes are here is the peer's in_ux until they are.
 */
typedef struct {
    tacl__tl_msg_t link;       /* first: its peer, tag and queue link */
    uint32_t kind;             /* DATA or RTS */
    int complete;              /* DATA: every byte arrived */
    uint64_t len;
    void *buf;                 /* DATA: heap copy */
    uint64_t addr;             /* RTS */
    uint64_t op_id;            /* RTS */
    tacl__memseg_ref_t seg;    /* RTS */
    tacl__tl_op_t *recv;       /* DATA: receive waiting for the rest */
    tacl_status_t status;      /* DATA: TACL_ERR_NO_MEMORY, else OK */
} tacl__shm_ux_t;

/** Where the fragments of the message now arriving from a peer go. */
enum {
    TACL_SHM_IN_NONE = 0,      /* the next DATA slot starts a message */
    TACL_SHM_IN_OP,            /* into a posted receive */
    TACL_SHM_IN_UX,            /* into an unexpected entry */
    TACL_SHM_IN_DISCARD        /* nowhere: its receive already failed */
};

/**
 * A CTS or FIN waiting for a free slot, and the operation a FIN finishes
 * here: the side that copied completes only once its FIN is in the
 * other's queue, so a rank that stops calling progress() after its last
 * operation never strands its peer.
 */
typedef struct {
    uint32_t kind;             /* TACL_SHM_MSG_CTS or TACL_SHM_MSG_FIN */
    uint64_t op_id;
    int64_t status;            /* FIN */
    uint64_t addr;             /* CTS */
    uint64_t peer_op;          /* CTS */
    tacl__tl_op_t *op;         /* FIN: completes when the FIN is written */
} tacl__shm_ctl_t;

/** What a rank knows about another rank of its node. */
typedef struct {
    int rank;                  /* world rank */
    pid_t pid;
    int watch;                 /* pid is valid here: check it for life */
    void *seg;                 /* the peer's segment, mapped here */
    tacl__shm_seg_hdr_t *hdr;
    tacl__shm_queue_t out;     /* to the peer, in its segment */
    tacl__shm_queue_t in;      /* from the peer, in our segment */
    uint64_t out_head;         /* our copy of out.ctl->head */
    uint64_t in_tail;          /* our copy of in.ctl->tail */
    tacl__tl_opq_t sends;      /* posted sends, oldest first */
    tacl__tl_opq_t rts_wait;   /* sends whose RTS is out, awaiting FIN */
    tacl__tl_opq_t recvs;      /* posted receives not matched yet */
    tacl__tl_opq_t pulls;      /* receives pulling data by CMA */
    tacl__tl_opq_t pushes;     /* sends writing data by CMA (after CTS) */
    tacl__tl_opq_t push_wait;  /* receives whose CTS is out, awaiting FIN */
    tacl__tl_msgq_t ux;        /* unexpected messages (tacl__shm_ux_t) no
                                  receive has taken, oldest first */
    int in_kind;               /* TACL_SHM_IN_* */
    tacl__tl_op_t *in_op;
    tacl__shm_ux_t *in_ux;
    uint64_t in_len;
    uint64_t in_got;
    tacl__shm_ctl_t *ctls;     /* CTSs and FINs waiting for a free slot */
    size_t nctls;
    size_t ctls_cap;
    tacl__shm_maps_t maps;     /* its tacl_mem_alloc segments mapped here */
} tacl__shm_peer_t;

typedef struct {
    tacl__tl_base_t base;      /* first: rank, node, done queue, failure */
    tacl__shm_peer_t *peers;   /* by local index; ours is unused */
    void *seg;                 /* our segment */
    size_t seg_size;
    tacl__shm_seg_hdr_t *hdr;
    int use_cma;
    int use_map;               /* map peers' segments (TACL_SHM_MAP) */
    uint64_t eager_limit;
    uint64_t next_op_id;
    uint64_t next_liveness_ns;
} tacl__shm_t;

/* Private fields of an operation. */
/* tl_priv[0]: the status, on the done queue (TACL__TL_OP_STATUS). */
#define TACL_SHM_OP_OFFSET(op) ((op)->tl_priv[1])  /* bytes moved */
#define TACL_SHM_OP_ID(op) ((op)->tl_priv[2])      /* send: RTS id; recv
                                                      awaiting FIN: CTS id */
#define TACL_SHM_OP_ADDR(op) ((op)->tl_priv[2])    /* pull, push: remote
                                                      buffer */
#define TACL_SHM_OP_RID(op) ((op)->tl_priv[3])     /* pull, push: remote op */
#define TACL_SHM_OP_FLAGS(op) ((op)->tl_priv[4])
#define TACL_SHM_OP_MAP(op) ((op)->tl_priv[5])     /* mapped pull: entry of
                                                      peer->maps */
#define TACL_SHM_OP_F_RTS 1u       /* send: goes by rendezvous */
#define TACL_SHM_OP_F_STARTED 2u   /* send: its first fragment is out */
#define TACL_SHM_OP_F_MAPPED 4u    /* pull: OP_ADDR is a mapping here */

static inline tacl__shm_queue_t tacl__shm_queue_at(void *seg, int index)
{
    uint8_t *base = (uint8_t *)seg + TACL_SHM_HDR_STRIDE +
                    (size_t)index * TACL_SHM_QUEUE_STRIDE;
    tacl__shm_queue_t q = {(tacl__shm_queue_ctl_t *)base,
                           base + TACL_SHM_CTL_STRIDE};
    return q;
}

static inline size_t tacl__shm_seg_size(int nlocal)
{
    return TACL_SHM_HDR_STRIDE + (size_t)nlocal * TACL_SHM_QUEUE_STRIDE;
}

/* shm_queue.c: slots, doorbells and sleeping. */

/** Free slots in the queue to a peer. */
unsigned tacl__shm_out_space(tacl__shm_peer_t *peer);
/** The next free slot to a peer and its payload; call only with space. */
tacl__shm_slot_t *tacl__shm_out_slot(tacl__shm_peer_t *peer,
                                     uint8_t **payload_p);
/** Publish the slot returned by tacl__shm_out_slot(). */
void tacl__shm_out_publish(tacl__shm_peer_t *peer);
/** The oldest unread slot from a peer, or NULL. */
const tacl__shm_slot_t *tacl__shm_in_slot(tacl__shm_peer_t *peer,
                                          const uint8_t **payload_p);
/** Release the slot returned by tacl__shm_in_slot(). */
void tacl__shm_in_release(tacl__shm_peer_t *peer);
/** Whether a slot from the peer waits to be read. */
int tacl__shm_in_pending(tacl__shm_peer_t *peer);
/** Wake the owner of a segment if it sleeps. */
void tacl__shm_ring(tacl__shm_seg_hdr_t *hdr);
/** Ring a peer's producer side if it waits for the slots we freed. */
void tacl__shm_ring_producer(tacl__shm_peer_t *peer);
/** Mark that we wait for space to the peer; whether there is space now. */
int tacl__shm_out_arm(tacl__shm_peer_t *peer);
/** Sleep on our doorbell unless it moved from seq; bounded by timeout_us. */
void tacl__shm_sleep(tacl__shm_t *shm, uint32_t seq, int64_t timeout_us);

/* shm_proto.c: matching, transfers, progress, failures. */

tacl_status_t tacl__shm_send(tacl__tl_t *tl, tacl__tl_op_t *op);
tacl_status_t tacl__shm_recv(tacl__tl_t *tl, tacl__tl_op_t *op);
int tacl__shm_probe(tacl__tl_t *tl, uint64_t tag, int *peer, uint64_t *len);
int tacl__shm_progress(tacl__tl_t *tl);
tacl_status_t tacl__shm_wait(tacl__tl_t *tl, int64_t timeout_us);
/** Complete every pending operation with status (the base's fail). */
void tacl__shm_fail_pending(tacl__tl_base_t *base, tacl_status_t status);
/** Free what the protocol holds for a peer (unexpected messages, FINs). */
void tacl__shm_peer_cleanup(tacl__shm_peer_t *peer);

#endif /* TACL_TRANSPORT_SHM_SHM_H */
