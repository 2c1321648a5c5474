/*
 * Small TCP helpers for the bootstrap: choosing the address to listen on,
 * listening, connecting and accepting with a deadline, and moving whole
 * buffers over non-blocking sockets.  Every socket made here is IPv4,
 * non-blocking and close-on-exec; every wait is a poll() bounded by a
 * deadline in tacl__now_ns() nanoseconds.
 *
 * Setup helpers (listen, connect, accept, address choice) decide and record
 * their errors.  The transfer helpers return TACL_ERR_REMOTE (the peer
 * closed or reset the connection) and TACL_ERR_TIMEOUT without recording
 * them, because only the caller knows which peer it was talking to.
 */
#ifndef TACL_CORE_SOCKET_H
#define TACL_CORE_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "tacl.h"

/** Room for "255.255.255.255:65535" and a terminating zero. */
#define TACL_SOCK_ADDR_STRLEN 24

/** Format an address as "a.b.c.d:port" into buf; returns buf. */
const char *tacl__sock_addr_str(const struct sockaddr_in *addr, char *buf);

/**
 * Choose the address a listener should use: the IPv4 address of the
 * interface named by TACL_SOCKET_IFNAME if it is set, else of the first up
 * non-loopback interface, else 127.0.0.1.
 */
tacl_status_t tacl__sock_pick_addr(struct in_addr *addr_p);

/** Resolve an IPv4 host name or dotted address with getaddrinfo(). */
tacl_status_t tacl__sock_resolve(const char *host, struct in_addr *addr_p);

/**
 * Open a listener on addr (port 0 picks a free one).  With reuse, set
 * SO_REUSEADDR, and fall back to every address when addr is not one of
 * this host's.  *bound_p receives the address actually bound, with the
 * port filled in.
 */
tacl_status_t tacl__sock_listen(const struct sockaddr_in *addr, int reuse,
                                int *fd_p, struct sockaddr_in *bound_p);

/**
 * Connect to addr before the deadline.  With retry, a refused or failed
 * attempt is retried until the deadline (the listener may not exist yet).
 */
tacl_status_t tacl__sock_connect(const struct sockaddr_in *addr, int retry,
                                 uint64_t deadline_ns, int *fd_p);

/**
 * Accept one connection from a listener if one is waiting: *fd_p is the
 * new socket, or -1 when none is ready.
 */
tacl_status_t tacl__sock_accept(int listen_fd, int *fd_p);

/**
 * Wait until fd is ready for events or the deadline passes: TACL_OK or
 * TACL_ERR_TIMEOUT (unrecorded).  EINTR is retried.
 */
tacl_status_t tacl__sock_wait(int fd, short events, uint64_t deadline_ns);

/** Send all len bytes before the deadline. */
tacl_status_t tacl__sock_send_all(int fd, const void *buf, size_t len,
                                  uint64_t deadline_ns);

/** Receive exactly len bytes before the deadline. */
tacl_status_t tacl__sock_recv_all(int fd, void *buf, size_t len,
                                  uint64_t deadline_ns);

/**
 * One non-blocking receive of at most len bytes: TACL_OK with the count in
 * *got_p (0 when nothing is waiting), or TACL_ERR_REMOTE (unrecorded) on
 * end of file or reset.
 */
tacl_status_t tacl__sock_recv_some(int fd, void *buf, size_t len,
                                   size_t *got_p);

/** One non-blocking send of at most len bytes; *sent_p may be 0. */
tacl_status_t tacl__sock_send_some(int fd, const void *buf, size_t len,
                                   size_t *sent_p);

struct iovec;

/** One non-blocking gathering send; *sent_p may be 0. */
tacl_status_t tacl__sock_sendv_some(int fd, const struct iovec *iov,
                                    int iovcnt, size_t *sent_p);

/** Milliseconds left until a deadline, for poll(): 0 once it passed. */
int tacl__sock_ms_left(uint64_t deadline_ns);

#endif /* TACL_CORE_SOCKET_H */
