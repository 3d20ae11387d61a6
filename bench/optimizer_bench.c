/* Optimizer speed: packrat's exact optimizer against the Packrat paper's
 * O(T^2 B^2) dynamic program on the same synthetic profiles, growing T and B.
 * Profiles follow the shape measured on real models: latency grows linearly
 * with the batch and sub-linearly with threads (diminishing returns), plus
 * noise. Both must find the same optimum; prints a markdown table.
 *
 * With --joint: the joint optimizer (pr_plan_joint) dividing T cores among
 * M models, each on its own such profile (every t, b <= 8 and powers of two
 * to 64), planned for batches 1, 4, 16 and 64 in turn, weights 1 and 2.
 *
 * usage: optimizer_bench [--max-paper-cells N]   (paper DP skipped above N = T^2 B^2 / 4)
 *        optimizer_bench --joint */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "packrat/planner.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned rng = 7;
static double urand(void) {
  rng = rng * 1103515245u + 12345u;
  return (double)((rng >> 8) & 0xffff) / 65536.0;
}

/* grid: every b <= 8, then powers of two up to maxb; or every b when dense */
static void make_profile(pr_profile_t *p, int T, int maxb, int dense) {
  p->points = calloc((size_t)T * (size_t)maxb + 1, sizeof *p->points);
  p->n_points = 0;
  p->cores = T;
  for (int t = 1; t <= T; t++)
    for (int b = 1; b <= maxb; b++) {
      if (!dense && b > 8 && (b & (b - 1))) continue;
      double lat = 2.0 + 9.0 * b / pow(t, 0.75) + 0.05 * t;
      lat *= 1 + 0.03 * urand();
      p->points[p->n_points++] = (pr_profile_point_t){
          .threads = t, .batch = b, .latency_ms = lat, .p90_ms = lat, .isolated_ms = lat};
    }
}

static double time_opt(const pr_profile_t *p, int B, int T, pr_plan_t *plan) {
  int reps = 0;
  double t0 = now(), t;
  do {
    pr_plan_optimize(p, B, T, plan);
    reps++;
  } while ((t = now() - t0) < 0.2);
  return t / reps * 1e3;
}

static int joint(void) {
  static const int cases[][2] = {{2, 16},  {4, 16},  {2, 64},  {4, 64},  {8, 64},
                                 {2, 256}, {4, 256}, {8, 256}, {16, 256}};
  static const int batches[] = {1, 4, 16, 64};
  printf("| models | T | batches | points per profile | pr_plan_joint ms | worst score |\n");
  printf("|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int M = cases[i][0], T = cases[i][1];
    pr_profile_t *p = calloc((size_t)M, sizeof *p);
    pr_joint_model_t *ms = calloc((size_t)M, sizeof *ms);
    pr_joint_share_t *sh = calloc((size_t)M, sizeof *sh);
    char err[256], list[128] = "";
    for (int k = 0; k < M; k++) {
      make_profile(&p[k], T, 64, 0);
      ms[k] = (pr_joint_model_t){.profile = &p[k], .batch = batches[k % 4], .weight = 1 + k % 2};
      if (k < 4)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", k ? "," : "",
                 ms[k].batch);
    }
    int reps = 0;
    double t0 = now(), t;
    pr_status_t st;
    do {
      st = pr_plan_joint(ms, M, T, sh, err, sizeof err);
      reps++;
    } while ((t = now() - t0) < 0.3);
    double worst = 0;
    for (int k = 0; k < M; k++) worst = fmax(worst, sh[k].score);
    if (st)
      printf("| %d | %d | %s | %d | failed: %s | - |\n", M, T, list, p[0].n_points, err);
    else
      printf("| %d | %d | %s%s | %d | %.3f | %.2f |\n", M, T, list, M > 4 ? ",..." : "",
             p[0].n_points, t / reps * 1e3, worst);
    fflush(stdout);
    for (int k = 0; k < M; k++) pr_profile_free(&p[k]);
    free(p);
    free(ms);
    free(sh);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--joint")) return joint();
  double max_cells = 2e10;
  if (argc > 2 && !strcmp(argv[1], "--max-paper-cells")) max_cells = atof(argv[2]);
  static const int cases[][3] = {{4, 16, 0},     {8, 64, 0},     {16, 128, 0},   {32, 256, 0},
                                 {64, 512, 0},   {128, 1024, 0}, {256, 1000, 0}, {256, 1024, 0},
                                 {256, 1000, 1}, {256, 1024, 1}};
  pr_plan_t *plan = malloc(sizeof *plan);
  printf(
      "| T | B | profile grid | points | packrat ms | paper DP ms | same optimum | speed-up |\n");
  printf("|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int T = cases[i][0], B = cases[i][1], dense = cases[i][2];
    int maxb = B < 1024 ? (dense ? B : 1024) : 1024;
    pr_profile_t p = {0};
    make_profile(&p, T, maxb, dense);
    double ms = time_opt(&p, B, T, plan);
    double cells = (double)T * T * B * B / 4;
    char paper[32] = "skipped", same[16] = "-", speed[32] = "-";
    if (cells <= max_cells) {
      double t0 = now();
      double l = pr_plan_paper_dp(&p, B, T);
      double pms = (now() - t0) * 1e3;
      snprintf(paper, sizeof paper, "%.1f", pms);
      snprintf(same, sizeof same, "%s", fabs(l - plan->latency_ms) < 1e-9 ? "yes" : "NO");
      snprintf(speed, sizeof speed, "%.0fx", pms / ms);
    }
    printf("| %d | %d | %s | %d | %.3f | %s | %s | %s |\n", T, B,
           dense ? "every b" : "b<=8, powers of 2", p.n_points, ms, paper, same, speed);
    fflush(stdout);
    pr_profile_free(&p);
  }
  free(plan);
  return 0;
}
