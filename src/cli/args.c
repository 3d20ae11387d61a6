/* Flag parsing shared by the packrat subcommands (args.h). */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packrat/engine.h"

long pr_cli_parse_long(const char *flag, const char *val, long min, long max) {
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

void pr_cli_parse_dim(const char *flag, const char *val, pr_cli_dims_t *d) {
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
  d->values[i] = pr_cli_parse_long(flag, eq + 1, 1, 1L << 30);
}

void pr_cli_dims_apply(const pr_cli_dims_t *d, pr_session_options_t *opt) {
  opt->n_dims = d->n;
  opt->dim_names = d->n ? d->name_ptrs : NULL;
  opt->dim_values = d->n ? d->values : NULL;
}

int pr_cli_parse_precision(const char *flag, const char *val) {
  int p = pr_precision_parse(val);
  if (p < 0) {
    fprintf(stderr, "packrat: %s must be fp32 or bf16, got '%s'\n", flag, val ? val : "nothing");
    exit(2);
  }
  return p;
}
