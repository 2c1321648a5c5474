/*
 * tacl-plan: the compression planner on a profile file.
 *
 *     tacl-plan PROFILE
 *     tacl-run -n N tacl-plan --estimate PROFILE
 *
 * The profile is text, one item a line ('#' starts a comment):
 *
 *     forward SECONDS
 *     comm RANKS ALPHA BETA_ALLREDUCE BETA_ALLGATHER
 *     codec NAME ENC_FIXED ENC_PER_BYTE DEC_FIXED DEC_PER_BYTE RATIO SUMMABLE
 *           [CPU_ENC_FIXED CPU_ENC_PER_BYTE]
 *     min_bytes NAME BYTES               (after codec NAME: its smallest
 *                                         group; tacl_planner_min_bytes_
 *                                         default's by default)
 *     tensor BYTES BACKWARD_SECONDS      (in gradient-ready order)
 *
 * With --estimate, under a launcher, the comm line is replaced by lines
 * fitted to tacl_comm_estimate on the job's communicator.
 * It prints the groups (first and last tensor, bytes, option) and the
 * predicted step time against uncompressed, then Espresso's per-tensor
 * decisions with one call a tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"

#define MAX_CODECS 16

typedef struct {
    double *bytes, *back;
    int n, cap;
    double forward;
    tacl_planner_comm_t comm;
    tacl_planner_codec_t codecs[MAX_CODECS];
    int ncodecs;
} profile_t;

static int add_tensor(profile_t *pf, double bytes, double back)
{
    if (pf->n == pf->cap) {
        int cap = pf->cap ? 2 * pf->cap : 256;
        double *b = realloc(pf->bytes, (size_t)cap * sizeof(double));
        double *t = b ? realloc(pf->back, (size_t)cap * sizeof(double)) : 0;
        if (b)
            pf->bytes = b;
        if (t == NULL)
            return -1;
        pf->back = t;
        pf->cap = cap;
    }
    pf->bytes[pf->n] = bytes;
    pf->back[pf->n++] = back;
    return 0;
}

/* One line of the profile; -1 when it is not understood. */
static int read_line(profile_t *pf, const char *line)
{
    tacl_planner_codec_t *k = &pf->codecs[pf->ncodecs];
    tacl_planner_comm_t *c = &pf->comm;
    char name[32];
    double a, b;

    if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
        return 0;
    if (sscanf(line, "forward %lf", &pf->forward) == 1)
        return 0;
    if (sscanf(line, "comm %d %lf %lf %lf", &c->ranks, &c->alpha,
               &c->beta_allreduce, &c->beta_allgather) == 4)
        return 0;
    if (sscanf(line, "tensor %lf %lf", &a, &b) == 2)
        return add_tensor(pf, a, b);
    if (pf->ncodecs < MAX_CODECS &&
        sscanf(line, "codec %31s %lf %lf %lf %lf %lf %d %lf %lf", k->name,
               &k->encode_fixed, &k->encode_per_byte, &k->decode_fixed,
               &k->decode_per_byte, &k->ratio, &k->summable,
               &k->cpu_encode_fixed, &k->cpu_encode_per_byte) >= 7) {
        k->min_bytes = tacl_planner_min_bytes_default(k->name);
        pf->ncodecs++;
        return 0;
    }
    if (sscanf(line, "min_bytes %31s %lf", name, &a) == 2)
        for (int i = pf->ncodecs - 1; i >= 0; i--)
            if (strcmp(pf->codecs[i].name, name) == 0) {
                pf->codecs[i].min_bytes = a;
                return 0;
            }
    return -1;
}

static void print_plan(const profile_t *pf, const tacl_planner_plan_t *plan)
{
    printf("# %d tensors, %d groups, %ld search states\n", pf->n,
           plan->ngroups, plan->visited);
    printf("%-8s %-8s %14s  %s\n", "first", "last", "bytes", "option");
    for (int g = 0; g < plan->ngroups; g++) {
        int last = g + 1 < plan->ngroups ? plan->first[g + 1] - 1 : pf->n - 1;
        double bytes = 0;
        for (int i = plan->first[g]; i <= last; i++)
            bytes += pf->bytes[i];
        printf("%-8d %-8d %14.0f  %s%s\n", plan->first[g], last, bytes,
               plan->option[g] == TACL_PLANNER_NONE
                   ? "none"
                   : pf->codecs[plan->option[g]].name,
               plan->on_cpu[g] ? " (cpu)" : "");
    }
    printf("step %.6f s; uncompressed %.6f s (fused), %.6f s (layer-wise); "
           "speedup %.3fx\n",
           plan->step_time, plan->uncompressed_time, plan->layerwise_time,
           plan->uncompressed_time / plan->step_time);
}

/* Espresso's per-tensor decisions, one call a tensor. */
static void print_decided(const profile_t *pf, tacl_planner_t *planner)
{
    int *codec = malloc((size_t)pf->n * sizeof(int));
    int *on_cpu = malloc((size_t)pf->n * sizeof(int));
    double t;

    if (codec && on_cpu &&
        tacl_planner_decide(planner, codec, on_cpu, &t) == TACL_OK) {
        printf("# per tensor (one call each): step %.6f s\n", t);
        for (int i = 0; i < pf->n; i++)
            printf("tensor %-6d %s%s\n", i,
                   codec[i] == TACL_PLANNER_NONE ? "none"
                                                 : pf->codecs[codec[i]].name,
                   codec[i] != TACL_PLANNER_NONE && on_cpu[i] ? " (cpu)"
                                                              : "");
    }
    free(codec);
    free(on_cpu);
}

/*
 * --estimate: the communication lines from tacl_comm_estimate on the
 * communicator of the launcher's job (tacl-run -n N tacl-plan ...), in
 * place of the profile's comm line; *print_p is whether this rank prints.
 */
static int comm_from_estimate(profile_t *pf, int *print_p)
{
    tacl_comm_t comm;
    int rank = 0;

    if (tacl_comm_init_env(&comm) != TACL_OK) {
        fprintf(stderr, "tacl-plan: --estimate needs a launcher: %s\n",
                tacl_last_error());
        return -1;
    }
    if (tacl_planner_comm_fit(comm, &pf->comm) != TACL_OK ||
        tacl_comm_rank(comm, &rank) != TACL_OK) {
        fprintf(stderr, "tacl-plan: %s\n", tacl_planner_last_error());
        tacl_comm_destroy(comm);
        return -1;
    }
    *print_p = rank == 0;
    if (*print_p)
        printf("# lines from tacl_comm_estimate on %d ranks: alpha %g s, "
               "%g s/B all-reduced, %g s/B gathered\n",
               pf->comm.ranks, pf->comm.alpha, pf->comm.beta_allreduce,
               pf->comm.beta_allgather);
    tacl_comm_destroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    profile_t pf = {.comm = {.ranks = 1}};
    tacl_planner_model_t model;
    tacl_planner_plan_t plan;
    tacl_planner_t *planner;
    char line[512];
    int lineno = 0, rc = 1, estimate, print = 1;
    FILE *f;

    estimate = argc == 3 && strcmp(argv[1], "--estimate") == 0;
    if (argc != 2 + estimate || (f = fopen(argv[argc - 1], "r")) == NULL) {
        fprintf(stderr,
                "usage: tacl-plan [--estimate] PROFILE (a readable file)\n");
        return 2;
    }
    while (fgets(line, sizeof(line), f) != NULL)
        if (++lineno && read_line(&pf, line) != 0) {
            fprintf(stderr, "tacl-plan: %s:%d: not understood: %s",
                    argv[argc - 1], lineno, line);
            goto out;
        }
    if (estimate && comm_from_estimate(&pf, &print) != 0)
        goto out;
    model = (tacl_planner_model_t){pf.n, pf.bytes, pf.back, pf.forward};
    if (tacl_planner_create(&model, &pf.comm, pf.codecs, pf.ncodecs,
                            &planner) != TACL_OK ||
        tacl_planner_plan(planner, &plan) != TACL_OK) {
        fprintf(stderr, "tacl-plan: %s\n", tacl_planner_last_error());
        goto out;
    }
    if (print) {
        print_plan(&pf, &plan);
        print_decided(&pf, planner);
    }
    tacl_planner_plan_free(&plan);
    tacl_planner_destroy(planner);
    rc = 0;
out:
    fclose(f);
    free(pf.bytes);
    free(pf.back);
    return rc;
}
