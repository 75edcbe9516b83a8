/* Pending prediction requests served by the clients (fanout.h). */
#include "server/fanout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ASK_NO = 0, ASK_WAIT, ASK_SENT, ASK_DONE };

typedef struct by_id {
    const char *id;
    int idx;
} by_id;

typedef struct request {
    uint64_t id;
    int64_t job;
    const fk_method *m;
    char *config;
    fk_bundle model, queries;
    uint8_t *qblob; /* encoded once, at the first pull */
    size_t qlen;
    int n;            /* clients of the job */
    char **ident;     /* n identities */
    unsigned char *st; /* n: ASK_* */
    struct by_id *sorted; /* n: the identities in strcmp order, for a binary search */
    int left;          /* clients asked that have not answered yet (ASK_WAIT or ASK_SENT) */
    fk_update *ans;   /* answers taken, n_ans of them */
    int n_ans, asked, done;
    double deadline;
    void *ud;
    struct request *next;
} request;

struct fk_fanout {
    request *head; /* oldest first */
    int n;
    uint64_t next_id, gen;
};

int fk_fanout_open(fk_fanout **out, fk_err *err)
{
    fk_fanout *f = calloc(1, sizeof *f);
    if (!f)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    f->next_id = 1;
    *out = f;
    return FK_OK;
}

static void request_free(request *r)
{
    if (!r)
        return;
    free(r->config);
    fk_bundle_close(&r->model);
    fk_bundle_close(&r->queries);
    free(r->qblob);
    for (int i = 0; r->ident && i < r->n; i++)
        free(r->ident[i]);
    free(r->ident);
    free(r->sorted);
    free(r->st);
    for (int i = 0; i < r->n_ans; i++)
        fk_bundle_close(&r->ans[i].msg);
    free(r->ans);
    free(r);
}

void fk_fanout_close(fk_fanout *f)
{
    if (!f)
        return;
    while (f->head) {
        request *r = f->head;
        f->head = r->next;
        request_free(r);
    }
    free(f);
}

static int by_id_cmp(const void *a, const void *b)
{
    return strcmp(((const by_id *)a)->id, ((const by_id *)b)->id);
}

int fk_fanout_start(fk_fanout *f, const fk_fanout_spec *s, uint64_t *id, fk_err *err)
{
    if (f->n >= FK_FANOUT_MAX_PENDING)
        return fk_err_set(err, FK_ELIMIT, "%d prediction requests are already waiting for their "
                          "clients (the most at once); retry when one has answered",
                          (int)FK_FANOUT_MAX_PENDING);
    if (!s->m->check_answer || !s->m->combine_answers || s->n_clients < 1)
        return fk_err_set(err, FK_EINVAL, "job type %s serves no predictions through its clients",
                          s->m->name);
    request *r = calloc(1, sizeof *r);
    if (!r)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    fk_bundle_init(&r->model);
    fk_bundle_init(&r->queries);
    r->n = s->n_clients;
    r->config = strdup(s->config ? s->config : "");
    r->ident = calloc((size_t)r->n, sizeof *r->ident);
    r->st = calloc((size_t)r->n, 1);
    r->ans = calloc((size_t)r->n, sizeof *r->ans);
    r->sorted = calloc((size_t)r->n, sizeof *r->sorted);
    int rc = !r->config || !r->ident || !r->st || !r->ans || !r->sorted ||
             fk_bundle_copy(&r->model, s->model) || fk_bundle_copy(&r->queries, s->queries);
    for (int i = 0; !rc && i < r->n; i++) {
        rc = !(r->ident[i] = strdup(s->identities[i]));
        r->st[i] = s->ask[i] ? ASK_WAIT : ASK_NO;
        r->asked += s->ask[i] != 0;
        r->sorted[i] = (by_id){r->ident[i], i};
    }
    if (!rc)
        qsort(r->sorted, (size_t)r->n, sizeof *r->sorted, by_id_cmp);
    r->left = r->asked;
    if (rc) {
        request_free(r);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    r->id = f->next_id++;
    r->job = s->job;
    r->m = s->m;
    r->deadline = s->deadline;
    r->ud = s->ud;
    r->done = r->asked == 0; /* nobody to ask: complete at once */
    request **p = &f->head;
    while (*p)
        p = &(*p)->next;
    *p = r;
    f->n++;
    f->gen++;
    *id = r->id;
    return FK_OK;
}

static request *find(fk_fanout *f, uint64_t id)
{
    for (request *r = f->head; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/* A binary search: every pull and answer of a request to K clients costs O(log K), not the
 * O(K) of a scan (O(K^2) for the request). */
static int client_of(const request *r, const char *identity)
{
    int lo = 0, hi = r->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, d = strcmp(r->sorted[mid].id, identity);
        if (!d)
            return r->sorted[mid].idx;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int fk_fanout_pull(fk_fanout *f, const char *identity,
                   int (*enc)(const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err),
                   fk_fanout_task *t, fk_err *err)
{
    for (request *r = f->head; r; r = r->next) {
        int k = client_of(r, identity);
        if (k < 0 || r->st[k] != ASK_WAIT)
            continue;
        if (!r->qblob) {
            int rc = enc(&r->queries, &r->qblob, &r->qlen, err);
            if (rc)
                return rc;
        }
        r->st[k] = ASK_SENT;
        *t = (fk_fanout_task){.id = r->id, .job = r->job, .client = k, .method = r->m->name,
                              .config = r->config, .queries = r->qblob, .queries_len = r->qlen};
        return FK_OK;
    }
    return FK_ENOTFOUND;
}

static void mark_done(request *r, int k)
{
    if (r->st[k] == ASK_WAIT || r->st[k] == ASK_SENT)
        r->left--;
    r->st[k] = ASK_DONE;
    r->done = r->left == 0;
}

int fk_fanout_answer(fk_fanout *f, uint64_t id, const char *identity, const fk_bundle *ans,
                     int *complete, fk_err *err)
{
    request *r = find(f, id);
    int k = r ? client_of(r, identity) : -1;
    *complete = 0;
    if (k < 0 || !(r->st[k] == ASK_SENT || r->st[k] == ASK_WAIT))
        return fk_err_set(err, FK_ESTATE, "no prediction request %llu waits for this client",
                          (unsigned long long)id);
    int rc = FK_OK;
    if (ans) {
        /* The method checks the answer before it is taken; a refused one is a silent client. */
        fk_update *u = &r->ans[r->n_ans];
        u->client = k;
        fk_report_init(&u->report);
        fk_bundle_init(&u->msg);
        rc = r->m->check_answer(&r->model, &r->queries, &(fk_update){.client = k, .msg = *ans},
                                err);
        if (!rc && fk_bundle_copy(&u->msg, ans))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        if (!rc)
            r->n_ans++;
        else
            fk_bundle_close(&u->msg);
    }
    mark_done(r, k);
    *complete = r->done;
    return rc;
}

int fk_fanout_due(fk_fanout *f, double now, uint64_t *id, double *next)
{
    *next = INFINITY;
    int found = 0;
    for (request *r = f->head; r; r = r->next) {
        if (!found && (r->done || r->deadline <= now)) {
            *id = r->id;
            found = 1;
        } else if (r->deadline < *next) {
            *next = r->deadline;
        }
    }
    return found ? FK_OK : FK_ENOTFOUND;
}

static request *unlink_req(fk_fanout *f, uint64_t id)
{
    for (request **p = &f->head; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            request *r = *p;
            *p = r->next;
            f->n--;
            return r;
        }
    return NULL;
}

int fk_fanout_finish(fk_fanout *f, uint64_t id, fk_bundle *out, void **ud, int64_t *job,
                     int *answered, int *asked, fk_err *err)
{
    request *r = unlink_req(f, id);
    *ud = NULL;
    *job = 0;
    *answered = *asked = 0;
    if (!r)
        return fk_err_set(err, FK_ENOTFOUND, "no prediction request %llu",
                          (unsigned long long)id);
    *ud = r->ud;
    *job = r->job;
    *answered = r->n_ans;
    *asked = r->asked;
    int rc = r->m->combine_answers(&r->model, &r->queries, r->ans, r->n_ans, out, err);
    request_free(r);
    return rc;
}

int fk_fanout_find_ud(const fk_fanout *f, const void *ud, uint64_t *id)
{
    for (const request *r = f->head; r; r = r->next)
        if (r->ud == ud) {
            *id = r->id;
            return FK_OK;
        }
    return FK_ENOTFOUND;
}

void fk_fanout_drop(fk_fanout *f, uint64_t id, void **ud)
{
    request *r = unlink_req(f, id);
    *ud = r ? r->ud : NULL;
    request_free(r);
}

uint64_t fk_fanout_generation(const fk_fanout *f)
{
    return f->gen;
}

int fk_fanout_pending(const fk_fanout *f)
{
    return f->n;
}
