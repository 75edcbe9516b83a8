#include "common/base/options.h"

#include <string.h>

/* 1 when key is in one of the tables (see fk_param_docs_has); *under as there. */
static int options_known(const fk_option_table *known, const char *key, int *under)
{
    for (const fk_option_table *t = known; t->docs; t++)
        if (fk_param_docs_has(t->docs, t->prefix, key, under))
            return 1;
    return 0;
}

/* "PROG: " or "PROG: ORIGIN: " */
static void lead(FILE *out, const char *prog, const char *origin)
{
    fprintf(out, "%s: ", prog);
    if (origin)
        fprintf(out, "%s: ", origin);
}

void fk_options_warn_old(const char *key, const char *prog, const char *origin, FILE *out)
{
    char now[256];
    const char *dash = origin ? "" : "--";
    if (!fk_params_old_spelling(key, now, sizeof now))
        return;
    lead(out, prog, origin);
    fprintf(out, "warning: '%s%s' is the old spelling of '%s%s' (accepted until fedkern 0.2)\n",
            dash, key, dash, now);
}

int fk_options_check(const fk_params *p, const fk_option_table *known, const char *prog,
                     const char *origin, int warn_old, FILE *out)
{
    const char *dash = origin ? "" : "--";
    int rc = 0;
    for (int i = 0; i < p->count; i++) {
        const char *key = p->items[i].key;
        int under = 0;
        if (!options_known(known, key, &under)) {
            fk_param_near n;
            fk_param_near_init(&n);
            for (const fk_option_table *t = known; t->docs; t++)
                fk_param_docs_near(t->docs, t->prefix, key, &n);
            lead(out, prog, origin);
            fprintf(out, "unknown %s '%s%s'", origin ? "key" : "option", dash, key);
            if (*n.best)
                fprintf(out, "; did you mean '%s%s'?", dash, n.best);
            fprintf(out, " (see %s --help)\n", prog);
            rc = 2;
            continue;
        }
        /* under a placeholder (data.DATASET) the rest is a name, spelt as its owner likes */
        if (warn_old && !under)
            fk_options_warn_old(key, prog, origin, out);
    }
    return rc;
}
