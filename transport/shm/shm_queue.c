/*
 * The shm queues and doorbells.
 *
 * A queue from rank A to rank B lives in B's segment; A is its only
 * producer and B its only consumer.  The producer fills the slot at
 * head % NSLOTS and publishes it with a release store of head + 1; the
 * consumer reads head with an acquire load, handles the slot and frees it
 * with a release store of tail + 1.  Each side keeps its own counter in
 * process memory so it never has to read back what it wrote.
 *
 * Sleeping (lost-wakeup safe): the owner of a segment reads its doorbell,
 * sets "sleeping", checks every queue and pending transfer, and only then
 * calls FUTEX_WAIT with the doorbell value it read.  Whoever delivers
 * something publishes it first, then increments the doorbell (a full
 * barrier) and issues FUTEX_WAKE if the owner said it sleeps.  Either the
 * owner's check sees the delivery, or the delivery's increment comes after
 * the owner read the doorbell and FUTEX_WAIT returns at once.  The futex is
 * shared (not FUTEX_PRIVATE) because the word lives in shared memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

unsigned tacl__shm_out_space(tacl__shm_peer_t *peer)
{
    uint64_t tail = atomic_load_explicit(&peer->out.ctl->tail,
                                         memory_order_acquire);

    return TACL_SHM_NSLOTS - (unsigned)(peer->out_head - tail);
}

tacl__shm_slot_t *tacl__shm_out_slot(tacl__shm_peer_t *peer,
                                     uint8_t **payload_p)
{
    unsigned index = (unsigned)(peer->out_head % TACL_SHM_NSLOTS);

    *payload_p = peer->out.data + (size_t)index * TACL_SHM_SLOT_SIZE;
    return &peer->out.ctl->slots[index];
}

void tacl__shm_out_publish(tacl__shm_peer_t *peer)
{
    ++peer->out_head;
    atomic_store_explicit(&peer->out.ctl->head, peer->out_head,
                          memory_order_release);
}

const tacl__shm_slot_t *tacl__shm_in_slot(tacl__shm_peer_t *peer,
                                          const uint8_t **payload_p)
{
    uint64_t head = atomic_load_explicit(&peer->in.ctl->head,
                                         memory_order_acquire);
    unsigned index;

    if (head == peer->in_tail)
        return NULL;
    index = (unsigned)(peer->in_tail % TACL_SHM_NSLOTS);
    *payload_p = peer->in.data + (size_t)index * TACL_SHM_SLOT_SIZE;
    return &peer->in.ctl->slots[index];
}

void tacl__shm_in_release(tacl__shm_peer_t *peer)
{
    ++peer->in_tail;
    atomic_store_explicit(&peer->in.ctl->tail, peer->in_tail,
                          memory_order_release);
}

int tacl__shm_in_pending(tacl__shm_peer_t *peer)
{
    return atomic_load_explicit(&peer->in.ctl->head, memory_order_acquire) !=
           peer->in_tail;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val,
                  const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

void tacl__shm_ring(tacl__shm_seg_hdr_t *hdr)
{
    /* The seq_cst increment orders the delivery before the flag read. */
    atomic_fetch_add(&hdr->doorbell, 1);
    if (atomic_load(&hdr->sleeping))
        futex(&hdr->doorbell, FUTEX_WAKE, INT_MAX, NULL);
}

void tacl__shm_ring_producer(tacl__shm_peer_t *peer)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&peer->in.ctl->producer_waiting,
                             memory_order_relaxed) &&
        atomic_exchange(&peer->in.ctl->producer_waiting, 0))
        tacl__shm_ring(peer->hdr);
}

int tacl__shm_out_arm(tacl__shm_peer_t *peer)
{
    atomic_store(&peer->out.ctl->producer_waiting, 1);
    atomic_thread_fence(memory_order_seq_cst);
    return tacl__shm_out_space(peer) > 0;
}

void tacl__shm_sleep(tacl__shm_t *shm, uint32_t seq, int64_t timeout_us)
{
    struct timespec ts;

    if (timeout_us <= 0)
        return;
    ts.tv_sec = (time_t)(timeout_us / 1000000);
    ts.tv_nsec = (long)(timeout_us % 1000000) * 1000;
    /* EAGAIN (the doorbell moved), EINTR and ETIMEDOUT all mean: go on. */
    futex(&shm->hdr->doorbell, FUTEX_WAIT, seq, &ts);
}
