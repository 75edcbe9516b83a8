/* kahm server: one round with one phase. It asks every client for its class list (and,
 * in mode A, its KAHMs), checks each update before commit, and keeps what arrived:
 * the holders table (client x class -> samples) and, in mode A, the models. */
#include "common/methods/kahm/kahm_int.h"
#include "common/methods/update_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"

typedef struct ksrv {
    fk_kahm_job j;
    int K;
    int done;
    int p;            /* dimension agreed by the updates, 0 before any */
    double *holders;  /* K x C samples per (client, class); -1 for a client with no update */
    double *left;     /* K x C: 1 where the client left the class block out (one sample,
                       * identical rows), 0 elsewhere; in the model as "left_out" when any */
    fk_bundle models; /* mode A: every client's update under "cK." */
} ksrv;

int fk__kahm_srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    ksrv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory");
    int rc = fk__kahm_job_parse(&s->j, p, seed, err);
    if (!rc && (!(s->holders = malloc((size_t)n_clients * (size_t)s->j.C * sizeof(double))) ||
                !(s->left = calloc((size_t)n_clients * (size_t)s->j.C, sizeof(double)))))
        rc = fk_err_set(err, FK_ENOMEM, "kahm server: out of memory for %d clients", n_clients);
    if (rc) {
        fk__kahm_job_close(&s->j);
        free(s->holders);
        free(s->left);
        free(s);
        return rc;
    }
    for (size_t i = 0; i < (size_t)n_clients * (size_t)s->j.C; i++)
        s->holders[i] = -1;
    s->K = n_clients;
    fk_bundle_init(&s->models);
    *out = s;
    return FK_OK;
}

void fk__kahm_srv_close(void *v)
{
    ksrv *s = v;
    if (!s)
        return;
    free(s->holders);
    free(s->left);
    fk_bundle_close(&s->models);
    fk__kahm_job_close(&s->j);
    free(s);
}

int fk__kahm_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    fk_plan_every_client(((ksrv *)v)->K, chosen, n_chosen);
    return FK_OK;
}

int fk__kahm_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    ksrv *s = v;
    (void)client;
    if (round != 1 || phase != 0)
        return fk_err_set(err, FK_ESTATE, "kahm has one round with one phase (asked for round %d "
                          "phase %d)", round, phase);
    if (fk_bundle_put_scalar(out, "upload", s->j.upload) ||
        fk_bundle_put_scalar(out, "classes", s->j.C))
        return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory");
    return FK_OK;
}

/* After fk__kahm_decode took the update: it holds the class list (and 'allowed' with
 * models), the class blocks it left out ('left_out', optional), in mode A every part's six
 * arrays, and nothing else (an extra tensor would be copied into the model by keep_models). */
FK_CHECKRETURN static int check_names(const fk_bundle *b, int models, int client, fk_err *err)
{
    static const char *const list[] = {"dim", "held", "counts", "parts", "allowed"};
    static const char *const arrays[] = {"meta", "P", "L", "Xw", "M", "b"};
    const fk_tensor *held = fk_bundle_get(b, "held"), *parts = fk_bundle_get(b, "parts");
    int left = fk_bundle_get(b, "left_out") != NULL;
    size_t n = 4 + (size_t)models + (size_t)left;
    for (size_t a = 0; models && a < held->len; a++)
        n += 6 * (size_t)parts->data[a];
    if (b->count > n) /* decode found every expected tensor: more is an extra one */
        n = b->count;
    char(*names)[FK_TENSOR_NAME_MAX] = calloc(n, sizeof *names);
    const char **ptr = calloc(n, sizeof *ptr);
    if (!names || !ptr) {
        free(names);
        free(ptr);
        return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory checking an update");
    }
    size_t k = 0;
    for (size_t i = 0; i < 4 + (size_t)models; i++)
        snprintf(names[k++], FK_TENSOR_NAME_MAX, "%s", list[i]);
    if (left)
        snprintf(names[k++], FK_TENSOR_NAME_MAX, "left_out");
    for (size_t a = 0; models && a < held->len; a++)
        for (int q = 0; q < (int)parts->data[a]; q++)
            for (size_t w = 0; w < 6 && k < n; w++)
                snprintf(names[k++], FK_TENSOR_NAME_MAX, "m%zu.%d.%s", a, q, arrays[w]);
    for (size_t i = 0; i < k; i++)
        ptr[i] = names[i];
    int rc = fk_update_check_names(b, ptr, (int)k, client, err);
    free(names);
    free(ptr);
    return rc;
}

int fk__kahm_check_update(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    ksrv *s = v;
    if (round != 1 || phase != 0)
        return fk_err_set(err, FK_EINVAL, "kahm: update for round %d phase %d, the job has only "
                          "round 1", round, phase);
    if (up->client < 0 || up->client >= s->K)
        return fk_err_set(err, FK_EINVAL, "kahm: update from client %d of %d", up->client, s->K);
    int p = 0;
    int rc = fk__kahm_decode(&up->msg, "", s->j.C, s->j.dim, s->j.upload, NULL, &p, err);
    if (rc)
        return fk_err_prefix(err, rc, "client %d: ", up->client);
    if ((rc = check_names(&up->msg, s->j.upload, up->client, err)))
        return rc;
    if (s->j.upload) {
        const fk_tensor *a = fk_bundle_get(&up->msg, "allowed");
        if (!a || a->len != 1 || a->data[0] != 1.0)
            return fk_err_set(err, FK_EINVAL,
                              "client %d: models uploaded without the client's consent flag "
                              "'allowed' = 1; refused",
                              up->client);
    }
    if (s->p && p != s->p)
        return fk_err_set(err, FK_EINVAL, "client %d: data dimension %d differs from %d of the "
                          "updates already committed", up->client, p, s->p);
    /* the class blocks left out: ascending class ids the client does not declare as held */
    const fk_tensor *lo = fk_bundle_get(&up->msg, "left_out"), *h = fk_bundle_get(&up->msg, "held");
    for (size_t a = 0; lo && a < lo->len; a++) {
        double c = lo->data[a];
        int held = 0;
        for (size_t b = 0; b < h->len; b++)
            held |= h->data[b] == c;
        if (lo->ndim != 1 || !(c >= 0 && c < s->j.C && c == floor(c)) ||
            (a && !(c > lo->data[a - 1])) || held)
            return fk_err_set(err, FK_EINVAL, "client %d: 'left_out'[%zu] is not an ascending "
                              "class id below %d that the client does not hold",
                              up->client, a, s->j.C);
    }
    return FK_OK;
}

/* Copy every tensor of one update under the prefix "cK.". */
FK_CHECKRETURN static int keep_models(ksrv *s, const fk_update *u, fk_err *err)
{
    for (size_t i = 0; i < u->msg.count; i++) {
        const fk_tensor *t = &u->msg.items[i];
        char nm[FK_TENSOR_NAME_MAX];
        int w = snprintf(nm, sizeof nm, "c%d.%s", u->client, t->name);
        if (w < 0 || (size_t)w >= sizeof nm)
            return fk_err_set(err, FK_ELIMIT, "kahm: tensor name 'c%d.%s' too long", u->client,
                              t->name);
        if (fk_bundle_put(&s->models, nm, t->ndim, t->shape, t->data))
            return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory keeping '%s'", nm);
    }
    return FK_OK;
}

/* A client's class blocks that could not be modelled (its update's "left_out" ids): logged,
 * so the operator sees which classes that client does not serve. */
static void log_left_out(const fk_update *u, size_t C)
{
    const fk_tensor *t = fk_bundle_get(&u->msg, "left_out");
    if (!t || t->ndim != 1)
        return;
    char ids[256] = "";
    size_t at = 0;
    for (size_t a = 0; a < t->len && at + 24 < sizeof ids; a++)
        if (t->data[a] >= 0 && t->data[a] < (double)C && t->data[a] == floor(t->data[a]))
            at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%.0f", at ? "," : "",
                                   t->data[a]);
    if (at)
        fk_log(FK_LOG_WARN, "kahm_class_left_out",
               "client=%d classes=%s msg=\"the client could not model these class blocks (one "
               "sample or identical rows) and left them out of its answer\"",
               u->client, ids);
}

int fk__kahm_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                       int *round_done, fk_err *err)
{
    ksrv *s = v;
    (void)round;
    (void)phase;
    size_t C = (size_t)s->j.C;
    for (int i = 0; i < n; i++) {
        const fk_update *u = &ups[i];
        /* The updates of one phase are checked one by one against the committed state,
         * so two first updates could disagree on p: the first one here wins. */
        int p = 0;
        if (fk__kahm_decode(&u->msg, "", s->j.C, s->j.dim, s->j.upload, NULL, &p, NULL) ||
            (s->p && p != s->p))
            continue;
        s->p = p;
        const fk_tensor *h = fk_bundle_get(&u->msg, "held"), *c = fk_bundle_get(&u->msg, "counts");
        double *row = s->holders + (size_t)u->client * C;
        for (size_t k = 0; k < C; k++)
            row[k] = 0;
        for (size_t a = 0; a < h->len; a++)
            row[(size_t)h->data[a]] = c->data[a];
        log_left_out(u, C);
        const fk_tensor *lo = fk_bundle_get(&u->msg, "left_out");
        for (size_t k = 0; k < C; k++)
            s->left[(size_t)u->client * C + k] = 0;
        for (size_t a = 0; lo && a < lo->len; a++)
            s->left[(size_t)u->client * C + (size_t)lo->data[a]] = 1;
        if (s->j.upload) {
            int rc = keep_models(s, u, err);
            if (rc)
                return rc;
        }
    }
    s->done = 1;
    *round_done = 1;
    return FK_OK;
}

int fk__kahm_finished(void *v)
{
    return ((ksrv *)v)->done;
}

/* The holders table, the mode, the dimension, and in mode A every client's models. */
int fk__kahm_model(void *v, fk_bundle *out, fk_err *err)
{
    ksrv *s = v;
    uint64_t sh[2] = {(uint64_t)s->K, (uint64_t)s->j.C};
    if (fk_bundle_put(out, "holders", 2, sh, s->holders) ||
        fk_bundle_put_scalar(out, "upload", s->j.upload) ||
        fk_bundle_put_scalar(out, "dim", s->p) || fk_bundle_put_scalar(out, "done", s->done) ||
        fk_bundle_put_vec(out, "prep", 2, (double[]){s->j.tanh, s->j.scale}) ||
        (s->j.values && fk_bundle_put_vec(out, "class_values", (size_t)s->j.C, s->j.values)))
        return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory");
    int any = 0;
    for (size_t i = 0; i < (size_t)s->K * (size_t)s->j.C; i++)
        any |= s->left[i] != 0;
    if (any && fk_bundle_put(out, "left_out", 2, sh, s->left))
        return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory");
    for (size_t i = 0; i < s->models.count; i++) {
        const fk_tensor *t = &s->models.items[i];
        if (fk_bundle_put(out, t->name, t->ndim, t->shape, t->data))
            return fk_err_set(err, FK_ENOMEM, "kahm server: out of memory");
    }
    return FK_OK;
}

int fk__kahm_save(void *v, fk_bundle *out, fk_err *err)
{
    return fk__kahm_model(v, out, err);
}

/* Everything is checked before the state changes: the table's shape and values, and in
 * mode A each listed client's models decode. */
int fk__kahm_load(void *v, const fk_bundle *in, fk_err *err)
{
    ksrv *s = v;
    size_t C = (size_t)s->j.C;
    const fk_tensor *h = fk_bundle_get(in, "holders"), *up = fk_bundle_get(in, "upload"),
                    *dim = fk_bundle_get(in, "dim"), *dn = fk_bundle_get(in, "done");
    if (!h || h->ndim != 2 || h->shape[0] != (uint64_t)s->K || h->shape[1] != C || !up ||
        up->len != 1 || up->data[0] != s->j.upload || !dim || dim->len != 1 ||
        !(dim->data[0] >= 0 && dim->data[0] <= FK_KAHM_MAX_DIM) || !dn || dn->len != 1 ||
        !(dn->data[0] == 0 || dn->data[0] == 1))
        return fk_err_set(err, FK_EFORMAT,
                          "kahm checkpoint: 'holders' (%d x %zu), 'upload' (%d), 'dim' or 'done' "
                          "missing or different from this job",
                          s->K, C, s->j.upload);
    for (size_t i = 0; i < h->len; i++)
        if (!(h->data[i] == -1 || (h->data[i] >= 0 && h->data[i] <= FK_KAHM_MAX_COUNT)))
            return fk_err_set(err, FK_EFORMAT,
                              "kahm checkpoint: holders entry %zu is not -1 or a count in [0, %d]",
                              i, FK_KAHM_MAX_COUNT);
    const fk_tensor *lo = fk_bundle_get(in, "left_out"); /* absent: nothing was left out */
    if (lo && (lo->ndim != 2 || lo->shape[0] != (uint64_t)s->K || lo->shape[1] != C))
        return fk_err_set(err, FK_EFORMAT, "kahm checkpoint: 'left_out' is not %d x %zu", s->K,
                          C);
    for (size_t i = 0; lo && i < lo->len; i++)
        if (!(lo->data[i] == 0 || (lo->data[i] == 1 && h->data[i] == 0)))
            return fk_err_set(err, FK_EFORMAT,
                              "kahm checkpoint: left_out entry %zu is not 0, or 1 for a class the "
                              "client does not hold",
                              i);
    fk_bundle models;
    fk_bundle_init(&models);
    int rc = FK_OK;
    for (int k = 0; k < s->K && !rc && s->j.upload; k++) {
        if (h->data[(size_t)k * C] < 0)
            continue;
        char pre[32];
        snprintf(pre, sizeof pre, "c%d.", k);
        rc = fk__kahm_decode(in, pre, s->j.C, (int)dim->data[0], 1, NULL, NULL, err);
        if (rc)
            fk_err_prefix(err, rc, "kahm checkpoint: ");
        size_t pl = strlen(pre);
        for (size_t i = 0; !rc && i < in->count; i++) {
            const fk_tensor *t = &in->items[i];
            if (!strncmp(t->name, pre, pl) &&
                fk_bundle_put(&models, t->name, t->ndim, t->shape, t->data))
                rc = fk_err_set(err, FK_ENOMEM, "kahm checkpoint: out of memory");
        }
    }
    if (rc) {
        fk_bundle_close(&models);
        return rc;
    }
    memcpy(s->holders, h->data, h->len * sizeof(double));
    for (size_t i = 0; i < h->len; i++)
        s->left[i] = lo ? lo->data[i] : 0;
    s->p = (int)dim->data[0];
    s->done = (int)dn->data[0];
    fk_bundle_close(&s->models);
    s->models = models;
    return FK_OK;
}
