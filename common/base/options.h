/* The options a program takes, as tables of documented keys: an unknown flag or config key
 * is a usage error (exit 2) caught before anything else is checked, with the nearest known
 * name; a name written the old way ('-' between words) works and draws a one-line warning. */
#ifndef FK_OPTIONS_H
#define FK_OPTIONS_H

#include <stdio.h>

#include "common/base/params.h"

/* One table of documented keys and the prefix in front of each ("net." or NULL). A list of
 * tables ends with docs == NULL. */
typedef struct fk_option_table {
    const fk_param_doc *docs;
    const char *prefix;
} fk_option_table;

/* Check every key of p against known, printing to out (stderr) one line per problem as
 * "PROG: ORIGIN: ..." (ORIGIN NULL: command-line flags, shown as --KEY): an unknown key
 * with the nearest known one; with warn_old, an old spelling as a warning. Returns 2 when
 * a key is unknown, else 0. */
int fk_options_check(const fk_params *p, const fk_option_table *known, const char *prog,
                     const char *origin, int warn_old, FILE *out);

/* The one-line warning for an old spelling, if key is one: "PROG: [ORIGIN: ]warning: ..." */
void fk_options_warn_old(const char *key, const char *prog, const char *origin, FILE *out);

#endif
