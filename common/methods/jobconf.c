#include "common/methods/jobconf.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fk_identity_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 127)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._@:-", id[i]))
            return 0;
    return 1;
}

FK_CHECKRETURN static int copy_name(char *dst, size_t cap, const char *v, const char *key, const char *origin,
                     fk_err *err)
{
    if (!fk_identity_valid(v) || strlen(v) >= cap)
        return fk_err_set(err, FK_EINVAL,
                          "%s: %s = '%s' must be 1..%zu characters of letters, digits and ._@:-",
                          origin, key, v, cap - 1);
    snprintf(dst, cap, "%s", v);
    return FK_OK;
}

FK_CHECKRETURN static int add_client(fk_jobconf *c, const char *id, size_t len, const char *origin, fk_err *err)
{
    char buf[128];
    if (len == 0 || len >= sizeof buf)
        return fk_err_set(err, FK_EINVAL, "%s: clients: entry %d is empty or longer than 127 characters",
                          origin, c->n_clients + 1);
    memcpy(buf, id, len);
    buf[len] = '\0';
    if (!fk_identity_valid(buf))
        return fk_err_set(err, FK_EINVAL,
                          "%s: clients: '%s' is not a certificate identity (letters, digits, ._@:-)",
                          origin, buf);
    if (c->n_clients >= FK_JOBCONF_MAX_CLIENTS)
        return fk_err_set(err, FK_ELIMIT,
                          "%s: clients: more than %d clients in one job; split the federation "
                          "into several jobs",
                          origin, FK_JOBCONF_MAX_CLIENTS);
    if (c->n_clients == c->cap_clients) { /* doubling keeps a long list linear */
        int cap = c->cap_clients ? 2 * c->cap_clients : 16;
        if (cap > FK_JOBCONF_MAX_CLIENTS)
            cap = FK_JOBCONF_MAX_CLIENTS;
        char **g = realloc(c->clients, (size_t)cap * sizeof *g);
        if (!g)
            return fk_err_set(err, FK_ENOMEM, "%s: out of memory", origin);
        c->clients = g;
        c->cap_clients = cap;
    }
    if (!(c->clients[c->n_clients] = strdup(buf)))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", origin);
    c->n_clients++;
    return FK_OK;
}

/* Digits at *s as a non-negative number below 10^9 (longer ones are no range bound). */
static int range_bound(const char **s, const char *end, long *v)
{
    const char *p = *s;
    long x = 0;
    while (p < end && isdigit((unsigned char)*p) && p - *s < 9)
        x = 10 * x + (*p++ - '0');
    if (p == *s || (p < end && isdigit((unsigned char)*p)))
        return 0;
    *s = p;
    *v = x;
    return 1;
}

/* "site[0-99]" -> site0 .. site99 (config lines are limited, federations are not).
 * Anything else with brackets is taken as one identity (and refused by its charset). */
FK_CHECKRETURN static int add_range(fk_jobconf *c, const char *s, size_t len, const char *origin, fk_err *err)
{
    const char *open = memchr(s, '[', len), *end = s + len - 1, *q;
    char name[160];
    long lo, hi;
    if (!open || *end != ']' || len >= sizeof name || !(q = open + 1, range_bound(&q, end, &lo)) ||
        q >= end || *q++ != '-' || !range_bound(&q, end, &hi) || q != end)
        return add_client(c, s, len, origin, err);
    if (hi < lo)
        return fk_err_set(err, FK_EINVAL, "%s: clients: range '%.*s' runs backwards (write [%ld-%ld])",
                          origin, (int)len, s, hi, lo);
    if (hi - lo + 1 > (long)(FK_JOBCONF_MAX_CLIENTS - c->n_clients))
        return fk_err_set(err, FK_ELIMIT,
                          "%s: clients: range '%.*s' names %ld clients after %d others; a job holds "
                          "at most %d clients (split the federation into several jobs)",
                          origin, (int)len, s, hi - lo + 1, c->n_clients, FK_JOBCONF_MAX_CLIENTS);
    for (long i = lo; i <= hi; i++) {
        int n = snprintf(name, sizeof name, "%.*s%ld", (int)(open - s), s, i);
        int rc = add_client(c, name, (size_t)n, origin, err);
        if (rc)
            return rc;
    }
    return FK_OK;
}

/* One identity of the sorted index. */
struct fk_jobconf_slot {
    const char *id;
    int index;
};

static int by_name(const void *a, const void *b)
{
    const struct fk_jobconf_slot *x = a, *y = b;
    int d = strcmp(x->id, y->id);
    return d ? d : (x->index > y->index) - (x->index < y->index);
}

/* Sorted index of the identities: duplicates in O(n log n), lookups by bisection. */
FK_CHECKRETURN static int index_clients(fk_jobconf *c, const char *origin, fk_err *err)
{
    if (c->n_clients == 0)
        return FK_OK;
    c->sorted = malloc((size_t)c->n_clients * sizeof *c->sorted);
    if (!c->sorted)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", origin);
    for (int i = 0; i < c->n_clients; i++)
        c->sorted[i] = (struct fk_jobconf_slot){c->clients[i], i};
    qsort(c->sorted, (size_t)c->n_clients, sizeof *c->sorted, by_name);
    for (int i = 1; i < c->n_clients; i++)
        if (!strcmp(c->sorted[i - 1].id, c->sorted[i].id))
            return fk_err_set(err, FK_EINVAL, "%s: clients: '%s' is listed twice (entries %d and %d)",
                              origin, c->sorted[i].id, c->sorted[i - 1].index + 1,
                              c->sorted[i].index + 1);
    return FK_OK;
}

/* "a, b ,c, site[0-9]" -> identities in order. */
FK_CHECKRETURN static int parse_clients(fk_jobconf *c, const char *list, const char *origin, fk_err *err)
{
    const char *s = list;
    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        const char *e = strchr(s, ',');
        const char *end = e ? e : s + strlen(s);
        const char *t = end;
        while (t > s && isspace((unsigned char)t[-1]))
            t--;
        int rc = t > s ? add_range(c, s, (size_t)(t - s), origin, err)
                       : add_client(c, s, 0, origin, err);
        if (rc)
            return rc;
        if (!e)
            return index_clients(c, origin, err);
        s = e + 1;
    }
}

FK_CHECKRETURN static int read_numbers(fk_jobconf *c, const char *origin, fk_err *err)
{
    const fk_params *p = &c->params;
    long rounds, retries, refusals;
    int rc = fk_params_int(p, "rounds", FK_DEFAULT_ROUNDS, 1, 1000000, &rounds, err);
    if (!rc)
        rc = fk_params_u64(p, "seed", 1, &c->seed, err);
    if (!rc)
        rc = fk_params_double(p, "quorum", 0.5, 1e-9, 1.0, &c->quorum, err);
    if (!rc)
        rc = fk_params_double(p, "deadline", 60.0, 1e-3, 7 * 86400.0, &c->deadline, err);
    if (!rc)
        rc = fk_params_int(p, "retries", 3, 0, 1000, &retries, err);
    if (!rc)
        rc = fk_params_int(p, "max_refusals", 3, 0, 1000000, &refusals, err);
    if (rc) {
        fk_err_prefix(err, rc, "%s: ", origin);
        return rc;
    }
    c->rounds = (int)rounds;
    c->retries = (int)retries;
    c->max_refusals = (int)refusals;
    return FK_OK;
}

int fk_jobconf_parse(fk_jobconf *c, const char *text, const char *origin, fk_err *err)
{
    memset(c, 0, sizeof *c);
    fk_params_init(&c->params);
    int rc = fk_params_parse_ini(&c->params, text, origin, err);
    if (rc)
        return rc;
    const char *method = fk_params_get(&c->params, "method");
    const char *dataset = fk_params_get(&c->params, "dataset");
    const char *clients = fk_params_get(&c->params, "clients");
    if (!method)
        return fk_err_set(err, FK_EINVAL, "%s: missing 'method = NAME' (the job type)", origin);
    if (!dataset)
        return fk_err_set(err, FK_EINVAL,
                          "%s: missing 'dataset = NAME' (the data set the clients hold)", origin);
    if (!clients)
        return fk_err_set(err, FK_EINVAL,
                          "%s: missing 'clients = id1, id2, ...' (certificate identities taking part)",
                          origin);
    if ((rc = copy_name(c->method, sizeof c->method, method, "method", origin, err)) ||
        (rc = copy_name(c->dataset, sizeof c->dataset, dataset, "dataset", origin, err)) ||
        (rc = copy_name(c->name, sizeof c->name, fk_params_str(&c->params, "name", method), "name",
                        origin, err)))
        return rc;
    if ((rc = parse_clients(c, clients, origin, err)))
        return rc;
    return read_numbers(c, origin, err);
}

int fk_jobconf_parse_clients(fk_jobconf *c, const char *list, const char *origin, fk_err *err)
{
    return parse_clients(c, list, origin, err);
}

void fk_jobconf_set_method(fk_jobconf *c, const fk_method *m)
{
    if (!fk_params_get(&c->params, "rounds"))
        c->rounds = fk_method_default_rounds(m, &c->params);
}

void fk_jobconf_close(fk_jobconf *c)
{
    for (int i = 0; i < c->n_clients; i++)
        free(c->clients[i]);
    free(c->clients);
    free(c->sorted);
    fk_params_close(&c->params);
    memset(c, 0, sizeof *c);
}

int fk_jobconf_quorum(const fk_jobconf *c, int planned)
{
    int q = (int)ceil(c->quorum * planned - 1e-9);
    return q < 1 ? 1 : q > planned ? planned : q;
}

int fk_jobconf_client_index(const fk_jobconf *c, const char *identity)
{
    if (!c->sorted) { /* a list not built by fk_jobconf_parse */
        for (int i = 0; i < c->n_clients; i++)
            if (!strcmp(c->clients[i], identity))
                return i;
        return -1;
    }
    int lo = 0, hi = c->n_clients;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, d = strcmp(c->sorted[mid].id, identity);
        if (d == 0)
            return c->sorted[mid].index;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}
