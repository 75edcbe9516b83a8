/* Subcommands of the `fedkern` operator CLI. Each takes the words after its
 * name and returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef FK_CLI_H
#define FK_CLI_H

#include "common/base/err.h"
typedef struct fk_cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} fk_cli_cmd;

int fk_cmd_demo(int argc, char **argv);
int fk_cmd_data(int argc, char **argv);
int fk_cmd_sim(int argc, char **argv);
int fk_cmd_certs(int argc, char **argv);
int fk_cmd_job(int argc, char **argv);
/* fedkern health [connection options] [--json]: `fedkern job health`. */
int fk_cmd_health(int argc, char **argv);
int fk_cmd_model(int argc, char **argv);
/* fedkern state compact|info PATH (cli/state.c). */
int fk_cmd_state(int argc, char **argv);

/* The loader options of `fedkern data info` (--format, --label, --header, --delim, --var,
 * --label_var, --labels, --samples_in_columns, --cols) from p into o (cli/data.c). */
struct fk_source;
struct fk_params;
struct fk_err;
FK_CHECKRETURN int fk_cli_source_opts(struct fk_source *o, const struct fk_params *p, struct fk_err *err);

/* Load the query rows of `model eval|predict` / `job predict` (cli/prep.c): the loader
 * options so; then, unless the user gave --prep/--affine or use_model is 0, the preprocessing
 * the job's clients applied as model records it (common/data/prep_model.h; row `client`
 * when they differ). A model without the record: a warning on stderr. model may be NULL. */
struct fk_bundle;
struct fk_dataset;
FK_CHECKRETURN int fk_cli_load_query(const char *cmd, const char *data, const struct fk_source *so,
                                     const struct fk_bundle *model, long client, int use_model,
                                     struct fk_dataset *ds, struct fk_err *err);

/* Print "fedkern NAME: message" to stderr and return 1. */
int fk_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
