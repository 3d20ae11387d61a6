/* packrat command-line: one function per subcommand. */
#ifndef PR_CLI_H
#define PR_CLI_H

#include <stdint.h>

#include "packrat/engine.h"

int pr_cli_run(int argc, char **argv);
int pr_cli_profile(int argc, char **argv);
int pr_cli_plan(int argc, char **argv);
int pr_cli_serve(int argc, char **argv);
int pr_cli_bench(int argc, char **argv);

/* Parse a positive integer flag value; exits with a message when invalid. */
long pr_cli_parse_long(const char *flag, const char *val, long min, long max);

/* --dim NAME=N: values of named symbolic dimensions other than the batch. */
#define PR_CLI_MAX_DIMS 8
typedef struct {
  int n;
  char names[PR_CLI_MAX_DIMS][64];
  const char *name_ptrs[PR_CLI_MAX_DIMS]; /* names[i], for the session options */
  int64_t values[PR_CLI_MAX_DIMS];
} pr_cli_dims_t;
/* Adds NAME=N from val to d; exits with a message when invalid. */
void pr_cli_parse_dim(const char *flag, const char *val, pr_cli_dims_t *d);
/* Points opt's dim_names/dim_values at d (d must stay in place while opt is used). */
void pr_cli_dims_apply(const pr_cli_dims_t *d, pr_session_options_t *opt);
#define PR_CLI_DIM_HELP \
  "  --dim NAME=N        value of the named symbolic dimension NAME (repeatable)\n"

#endif
