/* Flag parsing shared by the packrat subcommands: integer values, --dim
 * NAME=N. Each helper exits with status 2 and a message on stderr when a
 * value is invalid (command-line usage errors, never library errors). */
#ifndef PR_CLI_ARGS_H
#define PR_CLI_ARGS_H

#include <stdint.h>

#include "packrat/engine.h"

/* Parse a positive integer flag value; exits with a message when invalid. */
long pr__cli_parse_long(const char *flag, const char *val, long min, long max);
/* Parse a number flag value in [min, max]; exits with a message when invalid. */
double pr__cli_parse_double(const char *flag, const char *val, double min, double max);
/* Parse a comma-separated list of batch sizes (each 1..1<<20) into out,
 * sorted ascending and deduplicated; returns the count. Exits with a message
 * when the list is empty, has more than max entries or a bad entry. */
int pr__cli_parse_batches(const char *flag, const char *val, int *out, int max);
/* --precision's value: PR_PRECISION_FP32 or _BF16 ("fp32", "bf16"); exits 2
 * with a message on anything else. */
int pr__cli_parse_precision(const char *flag, const char *val);

/* --dim NAME=N: values of named symbolic dimensions other than the batch. */
#define PR_CLI_MAX_DIMS 8
typedef struct {
  int n;
  char names[PR_CLI_MAX_DIMS][64];
  const char *name_ptrs[PR_CLI_MAX_DIMS]; /* names[i], for the session options */
  int64_t values[PR_CLI_MAX_DIMS];
} pr_cli_dims_t;
/* Adds NAME=N from val to d; exits with a message when invalid. */
void pr__cli_parse_dim(const char *flag, const char *val, pr_cli_dims_t *d);
/* Points opt's dim_names/dim_values at d (d must stay in place while opt is used). */
void pr__cli_dims_apply(const pr_cli_dims_t *d, pr_session_options_t *opt);
#define PR_CLI_DIM_HELP \
  "  --dim NAME=N        value of the named symbolic dimension NAME (repeatable)\n"

#endif
