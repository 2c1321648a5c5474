/*
 * TCP helpers for the bootstrap (see socket.h).  Sockets are non-blocking;
 * the "all" helpers loop over short transfers, retry EINTR and wait in
 * poll() for at most the time left before the caller's deadline.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "log.h"
#include "socket.h"

/* Pause between connection attempts while the listener does not exist. */
#define SOCK_RETRY_NS (20 * 1000000ull)

const char *tacl__sock_addr_str(const struct sockaddr_in *addr, char *buf)
{
    char ip[INET_ADDRSTRLEN];

    if (inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof(ip)) == NULL)
        snprintf(ip, sizeof(ip), "?");
    snprintf(buf, TACL_SOCK_ADDR_STRLEN, "%s:%u", ip,
             (unsigned)ntohs(addr->sin_port));
    return buf;
}

int tacl__sock_ms_left(uint64_t deadline_ns)
{
    uint64_t now = tacl__now_ns();

    if (now >= deadline_ns)
        return 0;
    /* Round up so a wait never ends just short of the deadline. */
    return (int)TACL_MIN((deadline_ns - now + 999999) / 1000000, 1u << 30);
}

tacl_status_t tacl__sock_pick_addr(struct in_addr *addr_p)
{
    const char *ifname = tacl__config_str(TACL_CFG_SOCKET_IFNAME);
    struct ifaddrs *ifs, *ifa;
    struct in_addr found = {.s_addr = htonl(INADDR_LOOPBACK)};
    int have = 0;

    if (getifaddrs(&ifs) != 0)
        return tacl__error(TACL_ERR_SYSTEM, BOOT,
                           "cannot list network interfaces: %m");
    for (ifa = ifs; ifa != NULL && !have; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_INET)
            continue;
        if (!(ifa->ifa_flags & IFF_UP))
            continue;
        if (ifname[0] != '\0') {
            if (strcmp(ifa->ifa_name, ifname) != 0)
                continue;
        } else if (ifa->ifa_flags & IFF_LOOPBACK) {
            continue;
        }
        found = ((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        have = 1;
    }
    freeifaddrs(ifs);
    if (!have && ifname[0] != '\0')
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "TACL_SOCKET_IFNAME=%s names no up interface "
                           "with an IPv4 address; set it to one that "
                           "`ip addr` lists", ifname);
    *addr_p = found;
    return TACL_OK;
}

tacl_status_t tacl__sock_resolve(const char *host, struct in_addr *addr_p)
{
    struct addrinfo hints = {.ai_family = AF_INET,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    int rc;

    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return tacl__error(TACL_ERR_INVALID_ARG, BOOT,
                           "cannot resolve host '%s' to an IPv4 address: "
                           "%s", host, gai_strerror(rc));
    *addr_p = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return TACL_OK;
}

static int sock_new(void)
{
    return socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void sock_nodelay(int fd)
{
    int one = 1;

    /* Latency of small control frames matters more than throughput. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

tacl_status_t tacl__sock_listen(const struct sockaddr_in *addr, int reuse,
                                int *fd_p, struct sockaddr_in *bound_p)
{
    struct sockaddr_in bound = *addr;
    socklen_t len = sizeof(bound);
    char str[TACL_SOCK_ADDR_STRLEN];
    int fd, one = 1;
    tacl_status_t status;

    fd = sock_new();
    if (fd < 0)
        return tacl__error(TACL_ERR_SYSTEM, BOOT, "socket() failed: %m");
    if (reuse &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, BOOT,
                             "setsockopt(SO_REUSEADDR) failed: %m");
        goto err_close;
    }
    if (bind(fd, (const struct sockaddr *)&bound, sizeof(bound)) != 0) {
        if (!(reuse && errno == EADDRNOTAVAIL)) {
            status = tacl__error(TACL_ERR_SYSTEM, BOOT,
                                 "cannot listen on %s: %m; choose a free "
                                 "port or another address",
                                 tacl__sock_addr_str(addr, str));
            goto err_close;
        }
        /* The root address is not local (a forwarded name): listen on
         * every address with the same port. */
        bound.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(fd, (const struct sockaddr *)&bound, sizeof(bound)) != 0) {
            status = tacl__error(TACL_ERR_SYSTEM, BOOT,
                                 "cannot listen on %s: %m; choose a free "
                                 "port", tacl__sock_addr_str(&bound, str));
            goto err_close;
        }
    }
    if (listen(fd, SOMAXCONN) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, BOOT, "listen() failed: %m");
        goto err_close;
    }
    if (getsockname(fd, (struct sockaddr *)&bound, &len) != 0) {
        status = tacl__error(TACL_ERR_SYSTEM, BOOT,
                             "getsockname() failed: %m");
        goto err_close;
    }
    *fd_p = fd;
    *bound_p = bound;
    return TACL_OK;

err_close:
    close(fd);
    return status;
}

tacl_status_t tacl__sock_wait(int fd, short events, uint64_t deadline_ns)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    int rc;

    for (;;) {
        rc = poll(&pfd, 1, tacl__sock_ms_left(deadline_ns));
        if (rc > 0)
            return TACL_OK;
        if (rc == 0 && tacl__now_ns() >= deadline_ns)
            return TACL_ERR_TIMEOUT;
        if (rc < 0 && errno != EINTR)
            return tacl__error(TACL_ERR_SYSTEM, BOOT, "poll() failed: %m");
    }
}

/* One connection attempt: 0 when connected, else the errno that ended it
 * (ETIMEDOUT when the deadline passed first). */
static int sock_try_connect(int fd, const struct sockaddr_in *addr,
                            uint64_t deadline_ns)
{
    socklen_t len = sizeof(int);
    int err = 0;

    if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0)
        return 0;
    if (errno != EINPROGRESS && errno != EINTR)
        return errno;
    if (tacl__sock_wait(fd, POLLOUT, deadline_ns) != TACL_OK)
        return ETIMEDOUT;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return errno;
    return err;
}

static int sock_retryable(int err)
{
    return err == ECONNREFUSED || err == ECONNRESET || err == ENETUNREACH ||
           err == EHOSTUNREACH || err == ECONNABORTED || err == EAGAIN;
}

tacl_status_t tacl__sock_connect(const struct sockaddr_in *addr, int retry,
                                 uint64_t deadline_ns, int *fd_p)
{
    char str[TACL_SOCK_ADDR_STRLEN];
    struct timespec pause = {.tv_nsec = SOCK_RETRY_NS};
    int fd, err;

    for (;;) {
        fd = sock_new();
        if (fd < 0)
            return tacl__error(TACL_ERR_SYSTEM, BOOT, "socket() failed: %m");
        err = sock_try_connect(fd, addr, deadline_ns);
        if (err == 0)
            break;
        close(fd);
        if (err == ETIMEDOUT || tacl__now_ns() >= deadline_ns)
            return tacl__error(TACL_ERR_TIMEOUT, BOOT,
                               "timed out connecting to %s (last error: "
                               "%s); check that rank 0 runs and that the "
                               "address is reachable",
                               tacl__sock_addr_str(addr, str),
                               strerror(err));
        if (!retry || !sock_retryable(err))
            return tacl__error(TACL_ERR_SYSTEM, BOOT,
                               "cannot connect to %s: %s",
                               tacl__sock_addr_str(addr, str),
                               strerror(err));
        if (tacl__now_ns() + SOCK_RETRY_NS < deadline_ns)
            nanosleep(&pause, NULL);
    }
    sock_nodelay(fd);
    *fd_p = fd;
    return TACL_OK;
}

tacl_status_t tacl__sock_accept(int listen_fd, int *fd_p)
{
    int fd;

    do {
        fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        /* A connection that was reset before we took it is not ours to
         * report; nothing is waiting then. */
        if (errno == EAGAIN || errno == EWOULDBLOCK ||
            errno == ECONNABORTED || errno == EPROTO) {
            *fd_p = -1;
            return TACL_OK;
        }
        return tacl__error(TACL_ERR_SYSTEM, BOOT, "accept() failed: %m");
    }
    sock_nodelay(fd);
    *fd_p = fd;
    return TACL_OK;
}

static int sock_peer_gone(int err)
{
    return err == ECONNRESET || err == EPIPE || err == ENOTCONN ||
           err == ETIMEDOUT || err == EHOSTUNREACH || err == ECONNABORTED;
}

tacl_status_t tacl__sock_recv_some(int fd, void *buf, size_t len,
                                   size_t *got_p)
{
    ssize_t n;

    do {
        n = recv(fd, buf, len, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        *got_p = (size_t)n;
        return TACL_OK;
    }
    if (n == 0 && len > 0)
        return TACL_ERR_REMOTE;
    if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
        *got_p = 0;
        return TACL_OK;
    }
    if (sock_peer_gone(errno))
        return TACL_ERR_REMOTE;
    return tacl__error(TACL_ERR_SYSTEM, BOOT, "recv() failed: %m");
}

/* What a non-blocking send of call() that returned n means: *sent_p
 * bytes went (0 when the socket is full), or the peer or system failed. */
static tacl_status_t sock_sent(ssize_t n, const char *call, size_t *sent_p)
{
    if (n >= 0) {
        *sent_p = (size_t)n;
        return TACL_OK;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *sent_p = 0;
        return TACL_OK;
    }
    if (sock_peer_gone(errno))
        return TACL_ERR_REMOTE;
    return tacl__error(TACL_ERR_SYSTEM, BOOT, "%s() failed: %m", call);
}

tacl_status_t tacl__sock_send_some(int fd, const void *buf, size_t len,
                                   size_t *sent_p)
{
    ssize_t n;

    do {
        n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return sock_sent(n, "send", sent_p);
}

tacl_status_t tacl__sock_sendv_some(int fd, const struct iovec *iov,
                                    int iovcnt, size_t *sent_p)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov,
                         .msg_iovlen = (size_t)iovcnt};
    ssize_t n;

    do {
        n = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return sock_sent(n, "sendmsg", sent_p);
}

/*
 * Send len bytes from out, or receive them into in when out is NULL,
 * waiting for the socket whenever it would block.
 */
static tacl_status_t sock_move_all(int fd, const char *out, char *in,
                                   size_t len, uint64_t deadline_ns)
{
    size_t done = 0, n;
    tacl_status_t status;

    while (done < len) {
        status = out ? tacl__sock_send_some(fd, out + done, len - done, &n)
                     : tacl__sock_recv_some(fd, in + done, len - done, &n);
        if (status != TACL_OK)
            return status;
        done += n;
        if (n == 0) {
            status = tacl__sock_wait(fd, out ? POLLOUT : POLLIN, deadline_ns);
            if (status != TACL_OK)
                return status;
        }
    }
    return TACL_OK;
}

tacl_status_t tacl__sock_send_all(int fd, const void *buf, size_t len,
                                  uint64_t deadline_ns)
{
    return sock_move_all(fd, buf, NULL, len, deadline_ns);
}

tacl_status_t tacl__sock_recv_all(int fd, void *buf, size_t len,
                                  uint64_t deadline_ns)
{
    return sock_move_all(fd, NULL, buf, len, deadline_ns);
}
