/* Flag parsing shared by the packrat subcommands (args.h). */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/engine.h"

long pr__cli_parse_long(const char *flag, const char *val, long min, long max) {
  if (!val) {
    fprintf(stderr, "packrat: %s needs a value\n", flag);
    exit(2);
  }
  char *end;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (errno || *end || end == val || v < min || v > max) {
    fprintf(stderr, "packrat: %s must be an integer in [%ld, %ld], got '%s'\n", flag, min, max,
            val);
    exit(2);
  }
  return v;
}

double pr__cli_parse_double(const char *flag, const char *val, double min, double max) {
  if (!val) {
    fprintf(stderr, "packrat: %s needs a value\n", flag);
    exit(2);
  }
  char *end;
  errno = 0;
  double v = strtod(val, &end);
  if (errno || *end || end == val || !(v >= min && v <= max)) {
    fprintf(stderr, "packrat: %s must be a number in [%g, %g], got '%s'\n", flag, min, max, val);
    exit(2);
  }
  return v;
}

int pr__cli_parse_batches(const char *flag, const char *val, int *out, int max) {
  if (!val || !*val) {
    fprintf(stderr, "packrat: %s needs a list of batch sizes (e.g. 1,2,4,8,16)\n", flag);
    exit(2);
  }
  int n = 0;
  for (const char *p = val;;) {
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item || n == max) {
      fprintf(stderr, "packrat: %s needs at most %d comma-separated batch sizes, got '%s'\n", flag,
              max, val);
      exit(2);
    }
    memcpy(item, p, len);
    item[len] = 0;
    int b = (int)pr__cli_parse_long(flag, item, 1, 1 << 20), k = n;
    while (k > 0 && out[k - 1] > b) k--; /* insertion, ascending */
    if (k == 0 || out[k - 1] != b) {
      memmove(out + k + 1, out + k, (size_t)(n - k) * sizeof *out);
      out[k] = b, n++;
    }
    if (!p[len]) break;
    p += len + 1;
  }
  return n;
}

void pr__cli_parse_dim(const char *flag, const char *val, pr_cli_dims_t *d) {
  const char *eq = val ? strchr(val, '=') : NULL;
  if (!eq || eq == val || (size_t)(eq - val) >= sizeof d->names[0]) {
    fprintf(stderr, "packrat: %s needs NAME=N (a name of at most %zu characters)\n", flag,
            sizeof d->names[0] - 1);
    exit(2);
  }
  if (d->n == PR_CLI_MAX_DIMS) {
    fprintf(stderr, "packrat: at most %d %s flags\n", PR_CLI_MAX_DIMS, flag);
    exit(2);
  }
  int i = d->n++;
  snprintf(d->names[i], sizeof d->names[i], "%.*s", (int)(eq - val), val);
  d->name_ptrs[i] = d->names[i];
  d->values[i] = pr__cli_parse_long(flag, eq + 1, 1, 1L << 30);
}

void pr__cli_dims_apply(const pr_cli_dims_t *d, pr_session_options_t *opt) {
  opt->n_dims = d->n;
  opt->dim_names = d->n ? d->name_ptrs : NULL;
  opt->dim_values = d->n ? d->values : NULL;
}

int pr__cli_parse_precision(const char *flag, const char *val) {
  int p = pr_precision_parse(val);
  if (p < 0) {
    fprintf(stderr, "packrat: %s must be fp32 or bf16, got '%s'\n", flag, val ? val : "nothing");
    exit(2);
  }
  return p;
}
