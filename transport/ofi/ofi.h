/*
 * Internal layout of the ofi transport, shared by its files.
 *
 * One instance owns a libfabric endpoint of type FI_EP_RDM (reliable,
 * unconnected) with tagged messages per rail (one without TACL_NICS),
 * each with its completion queue and an address vector holding every
 * rank's endpoint name on that rail, gathered at init.  Matching
 * is the provider's: the source rank travels in the tag (tl_base.h's wire
 * tags), receives name it with a full tag mask, and FI_ORDER_SAS keeps
 * (source, tag) order.  Eager and rendezvous protocols are the provider's
 * (ofi_rxm over tcp: eager up to 16 KB, rendezvous above).
 *
 * Every operation the provider holds has a request (ofi_req_t) whose
 * fi_context is the operation's context on the wire; requests sit on the
 * pending list until their completion is read from the queue.  What the
 * provider refused with -FI_EAGAIN, or what exceeds its queue sizes
 * (fi_info's tx and rx sizes), waits on a backlog, in posting order, and
 * is posted by progress() as completions free room.
 *
 * Rails: with TACL_NICS set, an instance opens one such endpoint (with
 * its own fabric, domain, queue and address vector) per interface it
 * names, a rail; without it, one endpoint as the provider chooses.  A
 * message of at least TACL_OFI_STRIPE_MIN bytes to a peer that shares n
 * >= 2 rails with this rank goes as pieces over them, piece i on rail
 * i mod n of both, and so does, on rail 0 alone, a message longer than
 * the provider takes at once (ofi_ops.c); smaller messages, control
 * messages and peeks use rail 0.
 *
 * Besides tacl's tagged messages the endpoint carries small untagged
 * control messages between the instances (ofi_peer.c): a ping to a peer
 * some operation has waited on for a while, whose failure is how a dead
 * peer is found, and a goodbye at close, after which a peer's operations
 * fail at once instead of waiting.
 *
 * The files call one another one way, each only those listed before it:
 * ofi_load.c (libfabric itself, loaded on first use), ofi_info.c
 * (choosing the provider), ofi_mr.c (registrations), ofi_ops.c
 * (requests, posting,
 * completions), ofi_peer.c (control messages, liveness), then ofi.c (the
 * ops table: init, progress, wait, close).
 */
#ifndef TACL_TRANSPORT_OFI_OFI_H
#define TACL_TRANSPORT_OFI_OFI_H

#include <stdint.h>

/*
 * libfabric is loaded when the transport is first needed (ofi_load.c),
 * not linked: Debian's libfabric pulls in libpsm_infinipath and libpsm2,
 * whose constructors take over SIGINT, SIGABRT and SIGTERM in every
 * process that loads them, so a process of a library linked with it no
 * longer dies of SIGTERM (torch's ranks hung when stopped).  The five
 * functions tacl calls outside libfabric's inline wrappers go through
 * these names, which the header's declarations and inlines take too.
 */
#define fi_getinfo tacl__fi_getinfo
#define fi_freeinfo tacl__fi_freeinfo
#define fi_dupinfo tacl__fi_dupinfo
#define fi_fabric tacl__fi_fabric
#define fi_strerror tacl__fi_strerror
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "stage.h"
#include "tl_base.h"

/** The ofi transport's ops table. */
extern const tacl__transport_ops_t tacl__tl_ofi_ops;

/** The message of a libfabric error code, for logs (ofi_load.c). */
const char *tacl__ofi_strerror(ssize_t rc);

/* ---- choosing the provider (ofi_info.c) ---- */

/** What tacl asks of a provider, as fi_getinfo hints say it. */
#define TACL_OFI_CAPS (FI_TAGGED | FI_MSG)
#define TACL_OFI_ORDER FI_ORDER_SAS

/** The most rails an instance opens (TACL_NICS entries). */
#define TACL_OFI_MAX_RAILS 8
/** The lowest TACL_OFI_STRIPE_MIN (its pieces stay above eager sizes). */
#define TACL_OFI_STRIPE_FLOOR (256ull << 10)
/** The lowest TACL_OFI_MAX_MSG, likewise. */
#define TACL_OFI_PIECE_FLOOR (64ull << 10)
/** ofi_rxm's eager size unless FI_OFI_RXM_BUFFER_SIZE is set. */
#define TACL_OFI_RXM_EAGER (16ull << 10)
/** Pieces of a striped message start at multiples of this. */
#define TACL_OFI_PIECE_ALIGN 4096ull
/**
 * The wire tag bit of a piece of a split message: a receive of a whole
 * message never matches a piece.  It is the top bit of the sender's
 * rank, so split messages need at most 2^15 ranks.  A peek ignores it:
 * it finds whole messages and first pieces, which carry their message's
 * length in the completion data (ofi_ops.c).
 */
#define TACL_OFI_WIRE_PIECE (1ull << 63)

/*
 * What a query asks of a provider beyond what tacl always needs
 * (tacl__ofi_asks): FI_MR_LOCAL offered, so that a provider may leave
 * registration to tacl; FI_HMEM with FI_MR_HMEM, device buffers handed
 * to the provider as they are (registered by tacl).  tacl offers
 * FI_MR_LOCAL only after asking without it (TACL_OFI_REGISTER=auto):
 * EFA then registers what it needs through its own cache, which a
 * memory monitor keeps true as memory is freed, and which it turns off
 * when the application takes FI_MR_LOCAL.
 */
#define TACL_OFI_ASK_MR_LOCAL 1
#define TACL_OFI_ASK_HMEM 2
/* TACL_OFI_REGISTER's and TACL_OFI_HMEM's words (config.c's order). */
#define TACL_OFI_REGISTER_ALWAYS 1
#define TACL_OFI_HMEM_ON 1
#define TACL_OFI_HMEM_OFF 2

/**
 * The asks to try, in order, into ask (at most 4), their count: with
 * FI_HMEM first where TACL_OFI_HMEM is not off and a CUDA device is
 * usable (only with it where on), and within each, without FI_MR_LOCAL
 * first unless TACL_OFI_REGISTER=always.
 */
int tacl__ofi_asks(int ask[4]);

/** The provider chosen, and why, in words (also for tacl-info). */
typedef struct {
    char provider[64];         /* fi_info's prov_name, e.g. tcp;ofi_rxm */
    char fabric[64];
    char domain[64];
    char why[256];
    char memory[192];          /* who registers; how device memory goes */
    int ask;                   /* the TACL_OFI_ASK_* it answered */
} tacl__ofi_choice_t;

/**
 * Whether tacl registers the buffers it hands the provider of info: it
 * wants local buffers registered (FI_MR_LOCAL), or
 * TACL_OFI_REGISTER=always.
 */
int tacl__ofi_registers(const struct fi_info *info);

/**
 * Choose the provider by TACL_OFI_PROVIDER (auto: efa when present, else
 * tcp): *info_p gets a copy of the first fi_info that offers tagged
 * messages on a reliable-datagram endpoint in sending order (free it with
 * fi_freeinfo), and *choice_p says which and why.  A provider that
 * cannot is refused with TACL_ERR_UNSUPPORTED and a message naming what
 * it lacks.  info_p may be NULL (tacl-info: only the choice).
 */
tacl_status_t tacl__ofi_choose(struct fi_info **info_p,
                               tacl__ofi_choice_t *choice_p);

/**
 * As tacl__ofi_choose, but the fi_info whose domain is iface (tcp names
 * its domains after interfaces): a rail.  No such domain is refused with
 * TACL_ERR_INVALID_ARG and a message naming iface.
 */
tacl_status_t tacl__ofi_choose_rail(const char *iface,
                                    struct fi_info **info_p,
                                    tacl__ofi_choice_t *choice_p);

/**
 * The rails TACL_NICS names (NAME or NAME@<Gbit/s>, comma separated),
 * their interface names into names; how many (0: unset, one endpoint as
 * the provider chooses), or a negative status, decided and logged, when
 * it names more than TACL_OFI_MAX_RAILS.
 */
int tacl__ofi_rail_names(char names[TACL_OFI_MAX_RAILS][32]);

/** The rails an instance would open, in words, for tacl-info. */
void tacl__ofi_describe_rails(char *buf, size_t len);

/**
 * Piece i of n of a split message of len bytes: its offset and length.
 * Pieces are even, their starts aligned to TACL_OFI_PIECE_ALIGN, none
 * longer than a multiple of it that n of them fill, the last ending the
 * message; none is empty while len has n units of TACL_OFI_PIECE_ALIGN.
 */
void tacl__ofi_piece(uint64_t len, uint64_t n, uint64_t i, uint64_t *off_p,
                     uint64_t *len_p);

/**
 * For provider prov_name ("tcp;ofi_rxm"), ofi_rxm's eager size in this
 * process: FI_OFI_RXM_BUFFER_SIZE as libfabric reads it, else
 * TACL_OFI_RXM_EAGER; 0 where rxm is not among its layers or the
 * setting is not a positive number.
 */
uint64_t tacl__ofi_rxm_eager(const char *prov_name);

/** Whether provider name (a prefix of prov_name) offers an RDM endpoint. */
int tacl__ofi_provider_present(const char *name);

/**
 * What the providers in list (fi_getinfo's answer for one provider,
 * without hints) lack of what tacl needs, as a capability name, or NULL
 * when one of them has it all.
 */
const char *tacl__ofi_missing(const struct fi_info *list);

/* ---- registrations (ofi_mr.c) ---- */

typedef struct tacl__ofi_mr_entry tacl__ofi_mr_entry_t;
typedef struct tacl__ofi_req tacl__ofi_req_t;
typedef struct tacl__ofi tacl__ofi_t;

/** What the registration cache did, for tests and the log at close. */
typedef struct {
    uint64_t regs;             /* registrations made for the cache */
    uint64_t hits;             /* uses that found one made */
    uint64_t per_msg;          /* buffers registered for one message */
    uint64_t released;         /* dropped: tacl_mem_free gave it back */
    uint64_t stale;            /* dropped: another device allocation */
    uint64_t evicted;          /* dropped for room */
} tacl__ofi_mr_stats_t;

typedef struct {
    tacl__ofi_mr_entry_t *head;    /* cached */
    tacl__ofi_mr_entry_t *dropped; /* gone, still used by a request */
    uint32_t count, max;       /* max: TACL_OFI_MR_CACHE */
    uint64_t cursor;           /* in core's release log (memseg.h) */
    uint64_t tick;
    uint64_t keys;             /* the last key asked for */
    tacl__ofi_mr_stats_t stats;
} tacl__ofi_mr_cache_t;

/** An instance's empty cache; at init, before any registration. */
void tacl__ofi_mr_init(tacl__ofi_t *ofi);
/**
 * Register req's buffer (kind, rail, buf and len set) where tacl must:
 * the provider wants local buffers registered, or device_mem (device
 * memory handed to an FI_HMEM provider).  Cached where the memory is
 * a tacl_mem_alloc segment or a device allocation, else registered for
 * this request.  A registration that fails is decided and logged.
 */
tacl_status_t tacl__ofi_mr_get(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                               int device_mem);
/** The descriptor to post req's buffer with (NULL: none needed). */
void *tacl__ofi_mr_desc(const tacl__ofi_req_t *req);
/** req is done with its registration (kept if cached). */
void tacl__ofi_mr_put(tacl__ofi_t *ofi, tacl__ofi_req_t *req);
/** Close every registration, with a line of what the cache did; before
 * the domains close. */
void tacl__ofi_mr_forget(tacl__ofi_t *ofi);

/* ---- requests, posting and completions (ofi_ops.c) ---- */

/* What a request is for. */
enum {
    TACL_OFI_REQ_SEND = 0,
    TACL_OFI_REQ_RECV,
    TACL_OFI_REQ_CTRL_SEND,    /* a control message out (ofi_peer.c) */
    TACL_OFI_REQ_CTRL_RECV,    /* a control buffer posted for one in */
    TACL_OFI_REQ_PEEK          /* a look for a message from any source */
};

/* Request flags. */
#define TACL_OFI_REQ_F_PENDING 1u /* the provider holds it */
#define TACL_OFI_REQ_F_LATE 2u    /* a receive posted after its peer left */
#define TACL_OFI_REQ_F_PIECE 8u   /* SEND, RECV: one piece of a stripe */
#define TACL_OFI_REQ_F_FIRST 16u  /* SEND: the piece carrying the length;
                                   * PEEK: it found such a piece */

/* A striped operation's pieces still out, and the first error of one,
 * in the operation's transport words (op_fifo.h has [0]). */
#define TACL_OFI_OP_LEFT(op) ((op)->tl_priv[4])
#define TACL_OFI_OP_STATUS(op) ((op)->tl_priv[5])
/* A receive in pieces: 1 while its others wait for its first, which is
 * then its only piece posted (ofi_ops.c), and the next such operation
 * on the instance's deferred list. */
#define TACL_OFI_OP_DEFERRED(op) ((op)->tl_priv[2])
#define TACL_OFI_OP_NEXT(op) ((op)->tl_priv[1])


/** Called when a control request completes (ofi_peer.c's). */
typedef void (*tacl__ofi_ctrl_fn_t)(tacl__ofi_t *ofi, tacl__ofi_req_t *req,
                                    tacl_status_t status);

struct tacl__ofi_req {
    struct fi_context ctx;     /* first: what the provider hands back */
    tacl__ofi_req_t *prev;     /* on the pending list or a backlog */
    tacl__ofi_req_t *next;
    tacl__tl_op_t *op;         /* SEND, RECV: the operation */
    struct fid_mr *mr;         /* its own registration, or */
    tacl__ofi_mr_entry_t *mr_entry; /* a cached one it holds */
    tacl__ofi_ctrl_fn_t ctrl_done; /* CTRL_*: its completion */
    void *buf;                 /* what the provider reads or writes */
    uint64_t len;
    int peer;
    uint8_t rail;              /* the endpoint it goes to */
    uint8_t kind;              /* TACL_OFI_REQ_* */
    uint8_t flags;             /* TACL_OFI_REQ_F_* */
    tacl_status_t status;      /* an ending decided before the provider's */
    uint64_t msg[2];           /* CTRL_*: the control message; PEEK:
                                * msg[0] tacl's tag, and once found
                                * msg[1] the message's length */
};

/** A doubly linked list of requests (pending, or a backlog). */
typedef struct {
    tacl__ofi_req_t *head;
    tacl__ofi_req_t *tail;
    uint64_t count;
} tacl__ofi_reqq_t;

/* Peer states (ofi_peer.c). */
enum {
    TACL_OFI_PEER_UNKNOWN = 0, /* nothing exchanged yet */
    TACL_OFI_PEER_TALKED,      /* a message went or came: say goodbye */
    TACL_OFI_PEER_GONE         /* it said goodbye: it is closed */
};

/** What tacl__ofi_t keeps per world rank. */
typedef struct {
    uint32_t npending;         /* operations with it on pending or backlog */
    uint8_t state;             /* TACL_OFI_PEER_* */
    uint8_t nrails;            /* the rails it opened */
    uint8_t pinging;           /* bit r: a ping to it on rail r in flight */
    uint8_t unanswered;        /* bit r: this round's ping on rail r has
                                * had no answer yet */
    uint8_t round;             /* the ping round answers must carry */
    uint64_t since_ns;         /* last ping sent, or first pending op
                                * (or first wait of the staging) */
    uint64_t asked_ns;         /* the staging last found no message from
                                * it (tacl__ofi_arrived); 0: not asked */
    uint64_t ping_ns;          /* when the oldest control message in
                                * flight to it was sent */
    uint64_t round_ns;         /* when this round's pings were sent */
} tacl__ofi_peer_t;

/* Control receives kept posted. */
#define TACL_OFI_CTRL_RECVS 8

/** One rail: an endpoint and what it needs. */
typedef struct {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;         /* NULL once closed or failed */
    struct fid_ep *abandoned;  /* the endpoint a failure left open */
    int cq_fd;                 /* the queue's wait descriptor, or -1 */
    uint64_t bytes;            /* of tacl messages completed on it */
    uint64_t msgs;             /* tacl messages and pieces completed */
    fi_addr_t *addrs;          /* per world rank; FI_ADDR_NOTAVAIL where
                                * that rank has no such rail */
} tacl__ofi_rail_t;

struct tacl__ofi {
    tacl__tl_base_t base;      /* first: rank, node, done queue, failure */
    tacl__ofi_rail_t rails[TACL_OFI_MAX_RAILS];
    int nrails;                /* 0: every rank is on this node */
    char rail_names[TACL_OFI_MAX_RAILS][32]; /* TACL_NICS's, if set */
    uint64_t stripe_min;       /* TACL_OFI_STRIPE_MIN */
    uint64_t piece_max;        /* longest message or piece sent at once */
    uint64_t data_max;         /* lengths completion data can carry, or 0 */
    int need_mr;               /* tacl registers every buffer */
    int hmem;                  /* device buffers go as they are */
    tacl__ofi_mr_cache_t mrs;  /* registrations kept (ofi_mr.c) */
    uint64_t tx_size, rx_size; /* the provider's queue sizes */
    uint64_t max_msg;
    uint64_t ntx, nrx;         /* requests of each side it holds */
    tacl__ofi_peer_t *peers;   /* per world rank */
    tacl__ofi_reqq_t pending;  /* the provider holds them */
    tacl__ofi_reqq_t backlog_tx;  /* not posted yet, in posting order */
    tacl__ofi_reqq_t backlog_rx;
    tacl__ofi_req_t *free_reqs;   /* a free list, linked through next */
    uint64_t nops;             /* tacl operations pending or backlogged */
    tacl__ofi_reqq_t found;    /* messages peeks found, oldest first */
    tacl__ofi_req_t *peek;     /* the peek in flight, or NULL */
    tacl__tl_op_t *deferred;   /* receives whose pieces wait for their
                                * first, linked by TACL_OFI_OP_NEXT */
    tacl__stage_t *stage;      /* CUDA staging; NULL: host memory only */
    tacl_status_t peek_failed; /* the provider cannot peek: why */
    int closing;               /* close(): control receives not reposted */
    uint64_t asked_ns;         /* the staging last waited on any peer */
    uint64_t ping_ns;          /* how long an op waits before a ping */
    uint64_t dead_ns;          /* how long a ping may take to go out */
    uint64_t next_check_ns;
    tacl__ofi_choice_t choice;
};

/** Whether the staging waits on peer p at now: it found no message
 * from it within the last ping_ns (tacl__ofi_arrived). */
static inline int tacl__ofi_awaited(const tacl__ofi_t *ofi,
                                    const tacl__ofi_peer_t *p, uint64_t now)
{
    return p->asked_ns != 0 && now - p->asked_ns < ofi->ping_ns;
}

/** Whether the endpoints are open (not yet closed or failed). */
static inline int tacl__ofi_live(const tacl__ofi_t *ofi)
{
    return ofi->nrails > 0 && ofi->rails[0].ep != NULL;
}

/** Requests: a free one (NULL, logged, when out of memory), and back. */
tacl__ofi_req_t *tacl__ofi_req_get(tacl__ofi_t *ofi);
void tacl__ofi_req_put(tacl__ofi_t *ofi, tacl__ofi_req_t *req);
void tacl__ofi_reqq_push(tacl__ofi_reqq_t *q, tacl__ofi_req_t *req);
void tacl__ofi_reqq_remove(tacl__ofi_reqq_t *q, tacl__ofi_req_t *req);


/**
 * Post req (its kind, peer, buf and len set) now, or put it on the
 * backlog when the provider has no room; an error the provider decides
 * at once is decided and logged here.
 */
tacl_status_t tacl__ofi_post(tacl__ofi_t *ofi, tacl__ofi_req_t *req);
/** Check and post a send (or a receive if recv) of tacl's op. */
tacl_status_t tacl__ofi_post_op(tacl__ofi_t *ofi, tacl__tl_op_t *op,
                                int recv);
/**
 * The probe slot's look for a message with tacl tag tag from any
 * source (ofi.c has the design): a message an earlier peek found for
 * tag is reported at once (1, its sender and length in *peer, *len);
 * otherwise a peek is posted unless one is in flight, its answer read,
 * and the found list asked again; 0 when it has nothing yet.  A negative
 * status, decided and logged once, when the provider cannot peek.
 */
int tacl__ofi_probe(tacl__ofi_t *ofi, uint64_t tag, int *peer, uint64_t *len);
/**
 * The staging's look for the next message from peer with tag, as the
 * probe's for one from any source: 1 and its length in *len when it has
 * arrived (the receive posted next takes it), 0 when not yet, a negative
 * status when it never will (the provider cannot peek, or the peer
 * closed its transport).  While it keeps answering 0 the peer counts as
 * waited on, so it is pinged as for a posted operation (ofi_peer.c):
 * a staged receive from a dead peer fails instead of waiting out the
 * communicator's timeout.
 */
int tacl__ofi_arrived(tacl__ofi_t *ofi, int peer, uint64_t tag,
                      uint64_t *len);
/** Read completions and post what the backlog holds; events handled. */
int tacl__ofi_poll(tacl__ofi_t *ofi);
/**
 * Every operation ends with status: the endpoint is closed first, so the
 * provider no longer touches any buffer, then everything it held or the
 * backlogs hold completes (control requests are dropped).
 */
void tacl__ofi_fail_pending(tacl__ofi_t *ofi, tacl_status_t status);

/* ---- control messages and liveness (ofi_peer.c) ---- */

/** Post the control receives on every rail; at init. */
tacl_status_t tacl__ofi_ctrl_start(tacl__ofi_t *ofi);
/**
 * Ping each peer an operation has waited on for ping_ns since the last
 * ping; receives posted after their peer left end.  Events handled.
 */
int tacl__ofi_check_peers(tacl__ofi_t *ofi);
/** Say goodbye to every peer it talked with; waits up to max_s. */
void tacl__ofi_say_goodbye(tacl__ofi_t *ofi, double max_s);

#endif /* TACL_TRANSPORT_OFI_OFI_H */
