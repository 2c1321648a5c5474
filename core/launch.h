/*
 * Launchers: where tacl_comm_init_env() finds a process's rank, the rank
 * count and rank 0's bootstrap address.  Each launcher people use leaves
 * its own variables; this module recognises them, in an order that puts
 * the most specific first (tacl's own, then torchrun, Open MPI, MPICH's
 * and Intel MPI's Hydra, Slurm), and says which one it guessed in every
 * message.
 */
#ifndef TACL_CORE_LAUNCH_H
#define TACL_CORE_LAUNCH_H

#include "tacl.h"

/* The first port of the range that ports derived from a job id use, and
 * its size: below Linux's ephemeral range (32768 up), so an outgoing
 * connection never holds the port a job derived. */
#define TACL__LAUNCH_PORT_BASE 20000
#define TACL__LAUNCH_PORT_SPAN 12000

typedef struct {
    const char *launcher;   /* "tacl", "torchrun", "Open MPI", ... */
    const char *rank_var;   /* the variable the rank came from */
    int rank;
    int nranks;
    int local_rank;         /* -1 when the launcher does not say */
    int local_size;         /* -1 when the launcher does not say */
    char host[256];         /* rank 0's bootstrap host */
    int port;               /* and port */
    const char *addr_from;  /* how host:port were found, for the log */
} tacl__launch_t;

/* Fill *l from the environment, or fail naming the launcher guessed and
 * the variable that is missing or wrong. */
tacl_status_t tacl__launch_detect(tacl__launch_t *l);

/* The first host of a Slurm host list ("gpu[07-09,12],login" gives
 * "gpu07"), into out (size bytes).  TACL_ERR_INVALID_ARG when the list is
 * empty, malformed or the name does not fit. */
tacl_status_t tacl__launch_first_host(const char *list, char *out,
                                      size_t size);

/* A port in [TACL__LAUNCH_PORT_BASE, + SPAN) derived from a job key, the
 * same in every process that has the same key. */
int tacl__launch_port(const char *key);

#endif /* TACL_CORE_LAUNCH_H */
