#include "common/methods/jobkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fk_param_doc fk_jobkeys_generic[] = {
    {"method NAME", "the job type (required)"},
    {"dataset NAME", "the data set the clients hold under this name (required)"},
    {"clients ID,ID,...", "certificate identities taking part, in client order; site[0-9] "
                          "ranges (required)"},
    {"name TEXT", "label for humans (the method)"},
    {"rounds N", "communication rounds (the method's budget, 10 for most)"},
    {"seed S", "seed of every random choice (1)"},
    {"quorum F", "fraction of a phase's planned clients needed at the deadline (0.5)"},
    {"deadline SECONDS", "how long a phase waits for its clients (60)"},
    {"retries N", "new samples tried for a round that misses its quorum (3)"},
    {"max_refusals N", "refused updates after which a client is left out of the job (3; 0 = "
                       "never)"},
    {NULL, NULL},
};

static int known(const fk_param_doc *docs, const char *key)
{
    return docs && fk_param_docs_has(docs, NULL, key, NULL);
}

/* Append "'key' (did you mean 'x'?)" for one unknown key. */
static void describe(char *buf, size_t cap, size_t *off, const char *key, const fk_method *m,
                     const fk_param_doc *extra)
{
    fk_param_near n;
    fk_param_near_init(&n);
    fk_param_docs_near(fk_jobkeys_generic, NULL, key, &n);
    if (m->keys)
        fk_param_docs_near(m->keys, NULL, key, &n);
    if (extra)
        fk_param_docs_near(extra, NULL, key, &n);
    int w = *n.best ? snprintf(buf + *off, cap - *off, "%s'%s' (did you mean '%s'?)",
                               *off ? ", " : "", key, n.best)
                    : snprintf(buf + *off, cap - *off, "%s'%s'", *off ? ", " : "", key);
    if (w > 0 && (size_t)w < cap - *off)
        *off += (size_t)w;
}

/* A job type with one round (max_rounds 1: kahm, dica, udica, sfl) and `rounds` above 1
 * would run its one round and report "round 1 of N": refused instead. */
FK_CHECKRETURN static int check_rounds(const fk_params *p, const fk_method *m, fk_err *err)
{
    const char *r = fk_params_get(p, "rounds");
    char *end = NULL;
    double v = r ? strtod(r, &end) : 1;
    if (!m->max_rounds || m->max_rounds(p) != 1 || !(v > 1) || (end && *end))
        return FK_OK; /* not a number: the engine's own parse says so */
    return fk_err_set(err, FK_EINVAL,
                      "job type %s runs in one round, but the job sets 'rounds = %s'; remove the "
                      "key (or set rounds = 1)",
                      m->name, r);
}

int fk_jobkeys_check(const fk_params *p, const fk_method *m, const fk_param_doc *extra,
                     int flags, fk_err *err)
{
    char list[900];
    size_t off = 0;
    int bad = 0;
    for (int i = 0; i < p->count; i++) {
        const char *key = p->items[i].key;
        if (!strncmp(key, "local.", 6) && !(flags & FK_JOBKEYS_LOCAL))
            return fk_err_set(err, FK_EINVAL,
                              "job key '%s': local.* keys are each client's own consents and "
                              "caps, set in its config's [local] section, never by a job; "
                              "remove it from the job file",
                              key);
        if (known(fk_jobkeys_generic, key) || known(m->keys, key) || known(extra, key))
            continue;
        if (!strncmp(key, "server.", 7))
            continue; /* set by the engine after its own refusal of any in the job file */
        bad++;
        describe(list, sizeof list, &off, key, m, extra);
    }
    if (!bad)
        return check_rounds(p, m, err);
    return fk_err_set(err, FK_EINVAL,
                      "unknown job key%s %s for job type %s; `fedkern job keys %s` lists "
                      "the keys it takes",
                      bad > 1 ? "s" : "", list, m->name, m->name);
}
