/* packrat command-line: one function per subcommand. */
#ifndef PR_CLI_H
#define PR_CLI_H

int pr_cli_run(int argc, char **argv);
int pr_cli_profile(int argc, char **argv);
int pr_cli_plan(int argc, char **argv);
int pr_cli_serve(int argc, char **argv);
int pr_cli_bench(int argc, char **argv);
int pr_cli_infer(int argc, char **argv);
int pr_cli_quantize(int argc, char **argv);

#endif
