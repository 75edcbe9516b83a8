#include "server/roster.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *id;
    int listed;
    int n;
    fk_roster_set *sets;
} entry;

struct fk_roster {
    entry *e; /* by identity, ascending */
    int n, cap;
};

enum { NAMES_SHOWN = 5 };

int fk_roster_new(fk_roster **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? FK_OK : FK_ENOMEM;
}

/* The sets and their own copies of the affine maps (shift and scale in one block). */
static void free_sets(fk_roster_set *sets, int n)
{
    for (int i = 0; sets && i < n; i++)
        free((void *)sets[i].prep.shift);
    free(sets);
}

void fk_roster_free(fk_roster *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        free(r->e[i].id);
        free_sets(r->e[i].sets, r->e[i].n);
    }
    free(r->e);
    free(r);
}

/* Index of identity, or -(insertion point) - 1. */
static int find(const fk_roster *r, const char *id)
{
    int lo = 0, hi = r->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, d = strcmp(r->e[mid].id, id);
        if (d == 0)
            return mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -lo - 1;
}

int fk_roster_join(fk_roster *r, const char *identity, int listed, const fk_roster_set *sets,
                   int n)
{
    fk_roster_set *copy = NULL;
    if (listed && n > 0) {
        if (!(copy = malloc((size_t)n * sizeof *copy)))
            return FK_ENOMEM;
        memcpy(copy, sets, (size_t)n * sizeof *copy);
        int failed = 0;
        for (int i = 0; i < n; i++) {
            fk_prep_record *p = &copy[i].prep;
            if (!p->known || !p->d || failed) {
                p->d = 0;
                p->shift = p->scale = NULL;
                continue;
            }
            double *map = malloc(2 * p->d * sizeof *map);
            if (!map) {
                p->shift = p->scale = NULL;
                failed = 1;
                continue;
            }
            memcpy(map, p->shift, p->d * sizeof *map);
            memcpy(map + p->d, p->scale, p->d * sizeof *map);
            p->shift = map;
            p->scale = map + p->d;
        }
        if (failed) {
            free_sets(copy, n);
            return FK_ENOMEM;
        }
    }
    int at = find(r, identity);
    if (at < 0) { /* a new client: make room at the insertion point */
        at = -at - 1;
        char *id = strdup(identity);
        if (id && r->n == r->cap) {
            int cap = r->cap ? 2 * r->cap : 16;
            entry *g = realloc(r->e, (size_t)cap * sizeof *g);
            if (g) {
                r->e = g;
                r->cap = cap;
            } else {
                free(id);
                id = NULL;
            }
        }
        if (!id) {
            free_sets(copy, listed ? n : 0);
            return FK_ENOMEM;
        }
        memmove(&r->e[at + 1], &r->e[at], (size_t)(r->n - at) * sizeof *r->e);
        r->e[at] = (entry){.id = id};
        r->n++;
    }
    entry *e = &r->e[at];
    free_sets(e->sets, e->n);
    e->sets = copy;
    e->listed = listed != 0;
    e->n = listed ? n : 0;
    return FK_OK;
}

int fk_roster_seen(const fk_roster *r, const char *identity)
{
    return find(r, identity) >= 0;
}

int fk_roster_same(const fk_roster *r, const char *identity, int listed, const fk_roster_set *sets,
                   int n)
{
    int at = find(r, identity);
    if (at < 0)
        return 0;
    const entry *e = &r->e[at];
    if (e->listed != (listed != 0))
        return 0;
    if (!listed)
        return 1;
    if (e->n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(e->sets[i].name, sets[i].name) || e->sets[i].rows != sets[i].rows ||
            e->sets[i].cols != sets[i].cols || e->sets[i].classes != sets[i].classes)
            return 0;
    return 1;
}

static const fk_roster_set *holding(const entry *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->sets[i].name, name))
            return &e->sets[i];
    return NULL;
}

/* Appends to a bounded message; a full buffer silently truncates. */
typedef struct text {
    char buf[2048];
    size_t len;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    if (t->len >= sizeof t->buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < sizeof t->buf ? t->len + (size_t)n : sizeof t->buf - 1;
}

/* "a, b, c, and 4 more" for the clients of the job with mark[i] set. */
static void add_names(text *t, const fk_jobconf *job, const unsigned char *mark, int count)
{
    int shown = 0;
    for (int i = 0; i < job->n_clients && shown < NAMES_SHOWN; i++)
        if (mark[i])
            add(t, "%s%s", shown++ ? ", " : "", job->clients[i]);
    if (count > shown)
        add(t, ", and %d more", count - shown);
}

int fk_roster_check(const fk_roster *r, const fk_jobconf *job, fk_roster_known_fn known,
                    void *ud, fk_err *err)
{
    int n = job->n_clients;
    unsigned char *unknown = calloc((size_t)n, 1), *lacks = calloc((size_t)n, 1);
    uint64_t *cols = calloc((size_t)n, sizeof *cols); /* 0: not a listed holder */
    if (!unknown || !lacks || !cols) {
        free(unknown);
        free(lacks);
        free(cols);
        return fk_err_set(err, FK_ENOMEM, "out of memory checking the job's clients");
    }
    int n_unknown = 0, n_lacks = 0, n_holders = 0, first_lack = -1;
    for (int i = 0; i < n; i++) {
        int at = find(r, job->clients[i]);
        if (at < 0) {
            if (!known || !known(ud, job->clients[i]))
                unknown[i] = 1, n_unknown++;
            continue;
        }
        const entry *e = &r->e[at];
        if (!e->listed)
            continue; /* an old client: its holdings are unknown */
        const fk_roster_set *s = holding(e, job->dataset);
        if (!s) {
            lacks[i] = 1;
            if (first_lack < 0)
                first_lack = i;
            n_lacks++;
        } else {
            cols[i] = s->cols;
            n_holders++;
        }
    }
    /* the column count most holders agree on; the others are named */
    uint64_t mode = 0;
    int mode_n = 0, n_odd = 0;
    for (int i = 0; i < n; i++) {
        if (!cols[i] || cols[i] == mode)
            continue;
        int c = 0;
        for (int j = 0; j < n; j++)
            c += cols[j] == cols[i];
        if (c > mode_n || (c == mode_n && cols[i] < mode))
            mode = cols[i], mode_n = c;
        if (mode_n * 2 > n_holders)
            break;
    }
    for (int i = 0; i < n; i++)
        n_odd += cols[i] && cols[i] != mode;
    int rc = FK_OK;
    if (n_unknown || n_lacks || n_odd) {
        text t = {.len = 0};
        add(&t, "job refused: ");
        const char *sep = "";
        if (n_unknown) {
            add(&t, "%s", n_unknown == 1 ? "client " : "clients ");
            add_names(&t, job, unknown, n_unknown);
            add(&t, " %s never joined this server (start %s, or check the names against "
                    "the certificates)",
                n_unknown == 1 ? "has" : "have", n_unknown == 1 ? "it" : "them");
            sep = "; ";
        }
        if (n_lacks == 1) {
            const entry *e = &r->e[find(r, job->clients[first_lack])];
            add(&t, "%sclient %s holds no data set '%s' (it holds: ", sep, job->clients[first_lack],
                job->dataset);
            for (int k = 0; k < e->n && k < 8; k++)
                add(&t, "%s%s", k ? ", " : "", e->sets[k].name);
            add(&t, "%s)", e->n ? "" : "none");
            sep = "; ";
        } else if (n_lacks) {
            add(&t, "%sclients ", sep);
            add_names(&t, job, lacks, n_lacks);
            add(&t, " hold no data set '%s'", job->dataset);
            sep = "; ";
        }
        if (n_odd) {
            unsigned char *odd = lacks; /* reused: the lacking clients are reported above */
            memset(odd, 0, (size_t)n);
            int shown = 0;
            add(&t, "%sdata set '%s' has %llu columns on %d client%s but ", sep, job->dataset,
                (unsigned long long)mode, mode_n, mode_n == 1 ? "" : "s");
            for (int i = 0; i < n && shown < NAMES_SHOWN; i++)
                if (cols[i] && cols[i] != mode)
                    add(&t, "%s%llu on %s", shown++ ? ", " : "", (unsigned long long)cols[i],
                        job->clients[i]);
            if (n_odd > shown)
                add(&t, ", and %d more", n_odd - shown);
        }
        add(&t, " (fedkern job submit --skip_client_check accepts it anyway)");
        rc = fk_err_set(err, FK_EINVAL, "%s", t.buf);
    }
    free(unknown);
    free(lacks);
    free(cols);
    return rc;
}

int fk_roster_model_prep(const fk_roster *r, const fk_jobconf *job, fk_bundle *m,
                         const char **unknown, fk_err *err)
{
    if (unknown)
        *unknown = "";
    int n = job->n_clients;
    if (n <= 0)
        return FK_OK;
    fk_prep_record *rec = calloc((size_t)n, sizeof *rec);
    if (!rec)
        return fk_err_set(err, FK_ENOMEM, "out of memory recording the clients' preprocessing");
    for (int i = 0; i < n; i++) {
        int at = find(r, job->clients[i]);
        const fk_roster_set *s = at < 0 || !r->e[at].listed ? NULL : holding(&r->e[at], job->dataset);
        if (s)
            rec[i] = s->prep;
    }
    int first = -1;
    int rc = fk_prep_model_put(m, rec, n, &first, err);
    if (!rc && first >= 0 && unknown)
        *unknown = job->clients[first];
    free(rec);
    return rc;
}
