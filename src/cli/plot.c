/* SVG plots of profiles and plans (plot.h).
 *
 * Notes on the design:
 * - Text from the profile (the model's name, the CPU) is escaped for XML and
 *   cut to printable ASCII, so that the file always parses.
 * - x is log2 of the batch; y is linear from 0 (plans) or log10 (profiles).
 *   A linear axis ends where the plan's decision lives (plot.h); what lies
 *   above is marked, never dropped silently. */
#include "cli/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 780
#define H 520
#define LEFT 70
#define RIGHT 190
#define TOP 72
#define BOTTOM 50

typedef struct {
  FILE *f;
  int max_b;
  double y_lo, y_hi; /* the axis' range (ms) */
  bool log_y;
  int clipped;
} plot_t;

/* XML-safe printable ASCII copy of s */
static void xml_text(FILE *f, const char *s) {
  for (size_t i = 0; s[i] && i < 200; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '&')
      fputs("&amp;", f);
    else if (c == '<')
      fputs("&lt;", f);
    else if (c == '>')
      fputs("&gt;", f);
    else if (c == '\'')
      fputs("&apos;", f);
    else if (c == '"')
      fputs("&quot;", f);
    else
      fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
  }
}

static double px_x(const plot_t *pl, int b) {
  return LEFT + log2((double)b) * (W - LEFT - RIGHT) / log2(pl->max_b > 1 ? pl->max_b : 2);
}

/* y of a latency, clamped to the axis */
static double px_y(const plot_t *pl, double ms) {
  double v = ms < pl->y_lo ? pl->y_lo : ms > pl->y_hi ? pl->y_hi : ms, f;
  if (pl->log_y)
    f = (log10(v) - log10(pl->y_lo)) / (log10(pl->y_hi) - log10(pl->y_lo));
  else
    f = (v - pl->y_lo) / (pl->y_hi - pl->y_lo);
  return H - BOTTOM - f * (H - TOP - BOTTOM);
}

/* A round tick step for a linear axis of this span: 1, 2 or 5 x 10^k. */
static double tick_step(double span) {
  double raw = span / 5, mag = pow(10, floor(log10(raw)));
  return raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
}

/* The y range: linear from 0 to the part that matters, or log over all. */
static void y_range(plot_t *pl, const pr_profile_t *p, const pr_cli_plot_opts_t *o) {
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads <= o->threads && p->points[i].latency_ms > 0) {
      lo = fmin(lo, p->points[i].latency_ms);
      hi = fmax(hi, p->points[i].latency_ms);
    }
  if (!(hi > 0)) lo = 0.1, hi = 1;
  if (pl->log_y) {
    pl->y_lo = pow(10, floor(log10(lo)));
    pl->y_hi = pow(10, ceil(log10(hi)));
    if (pl->y_hi <= pl->y_lo) pl->y_hi = 10 * pl->y_lo;
    return;
  }
  double ref = o->plan ? fmax(o->plan->latency_ms, o->fat_ms) : hi;
  double top = hi < 2 * ref ? hi : 2 * ref;
  double step = tick_step(top);
  pl->y_lo = 0;
  pl->y_hi = ceil(top / step) * step;
}

static void axes(plot_t *pl) {
  FILE *f = pl->f;
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", LEFT, H - BOTTOM,
          W - RIGHT, H - BOTTOM);
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>\n", LEFT, TOP, LEFT,
          H - BOTTOM);
  for (int b = 1; b <= pl->max_b; b *= 2)
    fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle'>%d</text>\n", px_x(pl, b),
            H - BOTTOM + 16, b);
  fprintf(f, "<text x='%d' y='%d' text-anchor='middle'>batch (log scale)</text>\n",
          (W - RIGHT + LEFT) / 2, H - 12);
  fprintf(f,
          "<text x='14' y='%d' transform='rotate(-90 14 %d)' text-anchor='middle'>"
          "latency (ms%s)</text>\n",
          H / 2, H / 2, pl->log_y ? ", log scale" : "");
  if (pl->log_y) {
    for (double d = pl->y_lo; d <= pl->y_hi * 1.0001; d *= 10)
      for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) /* 1, 2, 5 */
        if (d * m <= pl->y_hi * 1.0001)
          fprintf(f, "<text x='%d' y='%.1f' text-anchor='end'>%g</text>\n", LEFT - 6,
                  px_y(pl, d * m) + 4, d * m);
    return;
  }
  double step = tick_step(pl->y_hi);
  for (double v = 0; v <= pl->y_hi * 1.0001; v += step) {
    fprintf(f, "<text x='%d' y='%.1f' text-anchor='end'>%g</text>\n", LEFT - 6, px_y(pl, v) + 4, v);
    fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>\n", LEFT + 1, px_y(pl, v),
            W - RIGHT, px_y(pl, v));
  }
}

/* One line per thread count; points above the axis are triangles on it. */
static void curves(plot_t *pl, const pr_profile_t *p, int T) {
  FILE *f = pl->f;
  double step = fmin(14.0, (H - TOP - BOTTOM) / (double)T);
  for (int t = 1; t <= T; t++) {
    double hue = 360.0 * (t - 1) / T;
    fprintf(f, "<polyline fill='none' stroke='hsl(%.0f,70%%,45%%)' stroke-width='1.5' points='",
            hue);
    for (int b = 1; b <= pl->max_b; b++) {
      double l = pr_profile_latency(p, t, b);
      if (l >= 0) fprintf(f, "%.1f,%.1f ", px_x(pl, b), px_y(pl, l));
    }
    fprintf(f, "'/>\n");
    for (int b = 1; b <= pl->max_b; b++) {
      double l = pr_profile_latency(p, t, b);
      if (l <= pl->y_hi) continue;
      double x = px_x(pl, b), y = px_y(pl, l);
      fprintf(f,
              "<path class='clipped' d='M%.1f,%.1f l-5,9 h10 z' fill='hsl(%.0f,70%%,45%%)'>"
              "<title>threads %d batch %d: %.3f ms</title></path>\n",
              x, y - 4, hue, t, b, l);
      pl->clipped++;
    }
    if (step >= 6)
      fprintf(
          f,
          "<text x='%d' y='%.1f' fill='hsl(%.0f,70%%,45%%)' font-size='%.0f'>%d thread%s</text>\n",
          W - RIGHT + 8, TOP + 4 + step * (t - 1), hue, fmin(12, step), t, t > 1 ? "s" : "");
  }
}

/* Horizontal dashed reference line with a label above it (or below) */
static void ref_line(plot_t *pl, double ms, const char *color, const char *label, bool below) {
  double y = px_y(pl, ms);
  fprintf(pl->f,
          "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='%s' stroke-dasharray='6,4'/>\n"
          "<text x='%d' y='%.1f' fill='%s'>%s</text>\n",
          LEFT, y, W - RIGHT, y, color, LEFT + 6, below ? y + 14 : y - 4, color, label);
}

static void plan_marks(plot_t *pl, const pr_cli_plot_opts_t *o) {
  const pr_plan_t *plan = o->plan;
  char label[160];
  for (int i = 0; i < plan->n_instances; i++) {
    const pr_plan_instance_t *in = &plan->instances[i];
    fprintf(pl->f,
            "<circle class='plan' cx='%.1f' cy='%.1f' r='6' fill='none' stroke='black' "
            "stroke-width='2'><title>instance %d: %d threads, batch %d: %.3f ms</title></circle>\n",
            px_x(pl, in->batch), px_y(pl, in->latency_ms), i, in->threads, in->batch,
            in->latency_ms);
  }
  snprintf(label, sizeof label, "plan: %d instance%s, %.2f ms", plan->n_instances,
           plan->n_instances > 1 ? "s" : "", plan->latency_ms);
  ref_line(pl, plan->latency_ms, "black", label, o->fat_ms >= plan->latency_ms);
  if (o->fat_ms < 0) return;
  snprintf(label, sizeof label, "one %d-thread instance at batch %d: %.2f ms (%.2fx the plan)",
           o->threads, plan->batch, o->fat_ms, o->fat_ms / plan->latency_ms);
  ref_line(pl, o->fat_ms, "#c00", label, o->fat_ms < plan->latency_ms);
  fprintf(pl->f,
          "<rect class='fat' x='%.1f' y='%.1f' width='10' height='10' fill='#c00'>"
          "<title>one %d-thread instance, batch %d: %.3f ms</title></rect>\n",
          px_x(pl, plan->batch) - 5, px_y(pl, o->fat_ms) - 5, o->threads, plan->batch, o->fat_ms);
}

static void title(plot_t *pl, const pr_profile_t *p, const pr_cli_plot_opts_t *o) {
  FILE *f = pl->f;
  fprintf(f, "<text x='%d' y='20' font-size='14'>", LEFT);
  xml_text(f, p->model);
  if (o->plan)
    fprintf(f, ": plan for batch %d on %d cores</text>\n", o->plan->batch, o->threads);
  else
    fprintf(f, ": latency[threads][batch] on %d cores</text>\n", o->threads);
  fprintf(f, "<text x='%d' y='38' font-size='11'>", LEFT);
  xml_text(f, p->cpu);
  fprintf(f,
          "</text>\n<text class='corun' x='%d' y='54' font-size='11'>Latencies include the "
          "measured co-running slowdown (instances side by side); %d-thread points run "
          "alone.</text>\n",
          LEFT, o->threads);
}

bool pr__cli_plot_svg(const char *path, const pr_profile_t *p, const pr_cli_plot_opts_t *o,
                      char *err, size_t err_len) {
  plot_t pl = {.f = fopen(path, "w"), .max_b = 1, .log_y = o->log_y};
  if (!pl.f) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return false;
  }
  for (int i = 0; i < p->n_points; i++)
    if (p->points[i].threads <= o->threads && p->points[i].batch > pl.max_b)
      pl.max_b = p->points[i].batch;
  y_range(&pl, p, o);
  fprintf(pl.f,
          "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
          "font-family='sans-serif' font-size='12'>\n<rect width='100%%' height='100%%' "
          "fill='white'/>\n",
          W, H);
  title(&pl, p, o);
  axes(&pl);
  curves(&pl, p, o->threads);
  if (o->plan) plan_marks(&pl, o);
  if (pl.clipped)
    fprintf(pl.f,
            "<text class='clipnote' x='%d' y='%d' font-size='11'>%d point%s above %g ms "
            "drawn as triangles on the top edge (hover for the value)</text>\n",
            LEFT, TOP - 4, pl.clipped, pl.clipped > 1 ? "s" : "", pl.y_hi);
  fprintf(pl.f, "</svg>\n");
  if (fclose(pl.f)) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return false;
  }
  return true;
}

/* ---- the joint plan: the cores coloured by model, one box per core ---- */

bool pr__cli_plot_joint_svg(const char *path, const pr_profile_t *ps, const pr_plan_t *plans, int n,
                            int cores, char *err, size_t err_len) {
  static const char *const colours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                        "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return false;
  }
  int per_row = cores < 32 ? cores : 32, rows = (cores + per_row - 1) / per_row, box = 28;
  int width = LEFT + per_row * box + 40, legend = TOP + rows * (box + 6) + 20;
  fprintf(f,
          "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
          "font-family='sans-serif' font-size='12'>\n<rect width='100%%' height='100%%' "
          "fill='white'/>\n<text x='%d' y='20' font-size='14'>joint plan of %d models on %d "
          "cores: each core's model, instance and batch</text>\n",
          width < 520 ? 520 : width, legend + n * 18 + 10, LEFT, n, cores);
  for (int core = 0; core < cores; core++) { /* an unassigned core stays grey */
    int x = LEFT + core % per_row * box, y = TOP + core / per_row * (box + 6);
    fprintf(f,
            "<rect class='core' x='%d' y='%d' width='%d' height='%d' fill='#ddd' "
            "stroke='white'/>\n",
            x, y, box - 2, box - 2);
  }
  for (int k = 0; k < n; k++) {
    const char *colour = colours[k % 8];
    for (int i = 0; i < plans[k].n_instances; i++) {
      const pr_plan_instance_t *in = &plans[k].instances[i];
      for (int c = 0; c < in->threads; c++) {
        int core = in->first_core + c, x = LEFT + core % per_row * box,
            y = TOP + core / per_row * (box + 6);
        fprintf(f,
                "<rect class='core m%d' x='%d' y='%d' width='%d' height='%d' fill='%s' "
                "stroke='white' opacity='%.2f'><title>core %d: ",
                k, x, y, box - 2, box - 2, colour, i % 2 ? 0.7 : 1.0, core);
        xml_text(f, ps[k].model);
        fprintf(f, ", instance %d (%d threads, batch %d, %.2f ms)</title></rect>\n", i, in->threads,
                in->batch, in->latency_ms);
        if (!c)
          fprintf(f, "<text x='%d' y='%d' font-size='10' fill='white'>%d</text>\n", x + 3, y + 16,
                  in->batch);
      }
    }
    fprintf(f, "<rect x='%d' y='%d' width='12' height='12' fill='%s'/><text x='%d' y='%d'>", LEFT,
            legend + k * 18, colour, LEFT + 18, legend + k * 18 + 11);
    xml_text(f, ps[k].model);
    fprintf(f, ": batch %d, %.2f ms (numbers: each instance's batch)</text>\n", plans[k].batch,
            plans[k].latency_ms);
  }
  fprintf(f, "</svg>\n");
  if (fclose(f)) {
    snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    return false;
  }
  return true;
}
