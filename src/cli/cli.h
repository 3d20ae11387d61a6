/* packrat command-line: one function per subcommand. */
#ifndef PR_CLI_H
#define PR_CLI_H

int pr__cli_run(int argc, char **argv);
int pr__cli_profile(int argc, char **argv);
int pr__cli_plan(int argc, char **argv);
int pr__cli_serve(int argc, char **argv);
int pr__cli_bench(int argc, char **argv);
int pr__cli_infer(int argc, char **argv);
int pr__cli_quantize(int argc, char **argv);
int pr__cli_tokenize(int argc, char **argv);

#endif
