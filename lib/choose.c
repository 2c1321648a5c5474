/*
 * The communicator's decider (comm.h, tacl__choose): how one call runs,
 * asked by the real call (through the plan cache), tacl_comm_estimate
 * and tacl-info, all of them through algorithms/'s tacl__algo_choose
 * with the same inputs: the communicator's view, TACL_ALGO's table
 * (parsed once per configuration load, here) and TACL_TUNER's tuner.
 */
#include <pthread.h>

#include "comm.h"
#include "config.h"
#include "log.h"

static pthread_mutex_t force_lock = PTHREAD_MUTEX_INITIALIZER;
static tacl__algo_force_t force_table;
static _Atomic unsigned force_gen; /* the load it was parsed at; 0 none */

const tacl__algo_force_t *tacl__choose_force(void)
{
    unsigned gen = tacl__config_generation();

    if (atomic_load_explicit(&force_gen, memory_order_acquire) == gen)
        return &force_table;
    pthread_mutex_lock(&force_lock);
    if (atomic_load_explicit(&force_gen, memory_order_relaxed) != gen) {
        /* A spec that does not parse forces nothing; creating a
         * communicator refuses it with the parser's message. */
        if (tacl__algo_force_parse(tacl__config_str(TACL_CFG_ALGO),
                                   &force_table) != TACL_OK)
            tacl__last_error_clear();
        atomic_store_explicit(&force_gen, gen, memory_order_release);
    }
    pthread_mutex_unlock(&force_lock);
    return &force_table;
}

static const tacl__algo_t *tune_pick(void *arg, const tacl__coll_args_t *a)
{
    return tacl__tune_sim_pick(arg, a);
}

tacl_status_t tacl__choose(tacl_comm_t comm, const tacl__coll_args_t *a,
                           unsigned flags, tacl__choice_t *choice_p)
{
    const tacl__algo_tuner_t tuner = {tune_pick, comm};

    if (comm->check)
        flags &= ~(unsigned)TACL__CHOOSE_ALONE;
    return tacl__algo_choose(&comm->view, a, tacl__choose_force(), &tuner,
                             flags, choice_p);
}
