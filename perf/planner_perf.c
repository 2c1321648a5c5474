/*
 * planner_perf: how long the compression planner takes on a model of 314
 * tensors (ResNet101's count, the thesis' Table 5.1: 6.6 s for
 * Algorithm 5.1), on three networks from 1 to 100 Gbit/s.  The profile is
 * synthetic and fixed: ResNet-like sizes (a conv weight, then its batch
 * norm's two vectors, channels growing stage by stage) with backward time
 * proportional to size; codecs fp16, int8 and top-k 1% with costs of a
 * CPU's order (and on the progress thread, slower).  Prints milliseconds
 * per plan (plan_ms: Cupcake's fusion for every option and Espresso's
 * per-tensor decisions, the target being 50 ms) and per decision alone
 * (decide_ms); asserts nothing about time.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "planner.h"

#define NTENSORS 314
#define REPEAT 5

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ResNet-like: per layer a conv (c_in * c_out * 9 floats) and two BN
 * vectors; gradients ready from the last layer back. */
static void resnet_like(double *bytes, double *back)
{
    for (int i = 0; i < NTENSORS; i++) {
        int layer = (NTENSORS - 1 - i) / 3, stage = layer * 4 / 105;
        double ch = 64.0 * (1 << stage);
        bytes[i] = (i % 3 == 0) ? ch * ch * 9 * 4 : ch * 4;
        back[i] = 2e-5 + bytes[i] / 40e9; /* 40 GB/s of gradient math */
    }
}

int main(int argc, char **argv)
{
    static double bytes[NTENSORS], back[NTENSORS];
    const tacl_planner_codec_t codecs[] = {
        {"fp16", 20e-6, 1 / 20e9, 20e-6, 1 / 20e9, 0.5, 1, 5e-6, 1 / 4e9, 0},
        {"int8", 30e-6, 1 / 10e9, 20e-6, 1 / 15e9, 0.26, 0, 5e-6, 1 / 2e9, 0},
        {"topk", 200e-6, 1 / 2e9, 30e-6, 1 / 20e9, 0.02, 0, 10e-6, 1 / 0.5e9,
         65536},
    };
    const double gbits[] = {1, 10, 100};
    tacl_planner_model_t model = {NTENSORS, bytes, back, 0.06};

    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("planner_perf (tacl planner) tacl %d.%d.%d\n",
               TACL_VERSION_MAJOR, TACL_VERSION_MINOR, TACL_VERSION_PATCH);
        return 0;
    }
    resnet_like(bytes, back);
    printf("# planner on %d tensors, %d codecs; best of %d runs\n", NTENSORS,
           3, REPEAT);
    printf("%8s %10s %8s %8s %12s %12s %10s %10s %12s\n", "Gbit/s", "plan_ms",
           "groups", "states", "step_s", "uncomp_s", "speedup", "decide_ms",
           "decided_s");
    for (int net = 0; net < 3; net++) {
        tacl_planner_comm_t comm = {8, 30e-6,
                                    2 * 7.0 / 8 / (gbits[net] * 125e6),
                                    7.0 / (gbits[net] * 125e6)};
        tacl_planner_plan_t plan = {0};
        tacl_planner_t *p;
        static int codec[NTENSORS], on_cpu[NTENSORS];
        double best = 1e30, dbest = 1e30, decided = 0;

        if (tacl_planner_create(&model, &comm, codecs, 3, &p) != TACL_OK) {
            fprintf(stderr, "planner_perf: %s\n", tacl_planner_last_error());
            return 1;
        }
        for (int r = 0; r < REPEAT; r++) {
            double t0 = now();
            tacl_planner_plan_free(&plan);
            if (tacl_planner_plan(p, &plan) != TACL_OK) {
                fprintf(stderr, "planner_perf: %s\n",
                        tacl_planner_last_error());
                return 1;
            }
            best = now() - t0 < best ? now() - t0 : best;
            t0 = now();
            if (tacl_planner_decide(p, codec, on_cpu, &decided) != TACL_OK) {
                fprintf(stderr, "planner_perf: %s\n",
                        tacl_planner_last_error());
                return 1;
            }
            dbest = now() - t0 < dbest ? now() - t0 : dbest;
        }
        printf("%8g %10.3f %8d %8ld %12.6f %12.6f %9.3fx %10.3f %12.6f\n",
               gbits[net], best * 1e3, plan.ngroups, plan.visited,
               plan.step_time, plan.uncompressed_time,
               plan.uncompressed_time / plan.step_time, dbest * 1e3, decided);
        tacl_planner_plan_free(&plan);
        tacl_planner_destroy(p);
    }
    return 0;
}
