/* kahm client: preprocess the local data, keep a per-class holdout, fit the KAHMs of
 * the classes held (once), answer with the class list (mode B) or the models too
 * (mode A, only if this client allows it), and score models on the holdout. */
#include "common/methods/kahm/kahm_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/la/rng.h"
#include "common/methods/classes.h"

static const uint64_t HOLDOUT_STREAM = 0x6b686f6c00000000ULL; /* "khol" */

typedef struct kcli {
    fk_kahm_job j;
    int allowed, client;
    size_t p, ntr, nte;
    double *Xtr, *Xte; /* preprocessed rows, p columns */
    int *ytr, *yte;    /* class ids in [0, C) */
    int label_rc;      /* a label outside the job's classes: every task is refused */
    char label_msg[512];
    int fitted;
    fk_kahm_set set;
    double *left_out; /* class ids whose block could not be modelled (n_left of them) */
    int n_left;
} kcli;

void fk__kahm_cli_close(void *v)
{
    kcli *c = v;
    if (!c)
        return;
    free(c->Xtr);
    free(c->Xte);
    free(c->ytr);
    free(c->yte);
    fk__kahm_job_close(&c->j);
    fk_kahm_set_close(&c->set);
    free(c->left_out);
    free(c);
}

/* id (n, malloc'ed): each row's class id, its label's position in the job's class list
 * (classes.h). A label outside the list is kept as the refusal of every task (in label_msg)
 * and the ids are then all 0. */
FK_CHECKRETURN static int class_ids(kcli *c, const fk_params *p, const fk_dataset *d, int **id,
                                    fk_err *err)
{
    fk_classes cls;
    fk_err why = {0};
    char who[48];
    snprintf(who, sizeof who, "kahm client %d", c->client);
    int rc = fk_classes_parse(&cls, p, 10, 100000, FK_CLASSES_COUNT_RANGE, err);
    if (rc)
        return rc;
    rc = fk_classes_index(&cls, d, who, id, &why);
    fk_classes_close(&cls);
    if (rc == FK_EINVAL) {
        c->label_rc = FK_EINVAL;
        snprintf(c->label_msg, sizeof c->label_msg, "%.480s: refusing the task", why.msg);
        *id = calloc(d->X.rows ? d->X.rows : 1, sizeof **id);
        rc = *id ? FK_OK : FK_ENOMEM;
    }
    return rc ? fk_err_set(err, rc, "kahm client: out of memory for the labels") : FK_OK;
}

/* tanh(scale x) is flat beyond |scale x| = 3 (tanh 3 = 0.995). Past WARN_SHARE of the values
 * there the client warns; past REFUSE_SHARE the features the KAHMs see are mostly +-1
 * (pen-digits raw 0..100 with scale = 1: 85 % of the values, 94.8 % -> 59.5 %, issue 32). */
#define WARN_SHARE 0.25
#define REFUSE_SHARE 0.5

/* The data's scale against the job's `scale`, with tanh: refuse when most values saturate and
 * `scale` is the default (the job did not choose it), warn otherwise. Returns FK_OK or
 * FK_EINVAL with the message in c->label_msg. */
FK_CHECKRETURN static int check_scale(kcli *c, const fk_params *p, const fk_dataset *d)
{
    size_t n = d->X.rows, P = d->X.cols, sat = 0;
    double big = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) {
            double v = fabs(d->X.data[i * d->X.ld + j]);
            big = v > big ? v : big;
            sat += c->j.scale * v > 3;
        }
    double share = n && P ? (double)sat / (double)(n * P) : 0;
    if (!c->j.tanh || !(share > WARN_SHARE))
        return FK_OK;
    int refuse = share > REFUSE_SHARE && !fk_params_get(p, "scale");
    snprintf(c->label_msg, sizeof c->label_msg,
             "'%s': %.1f %% of the values have |scale x| > 3 (largest |x| = %.6g, scale = %g), "
             "where tanh is flat: the class models would see nearly constant features; set the "
             "job's scale to about %.3g (1 / largest |x|) or rescale the data",
             d->name, 100 * share, big, c->j.scale, 1 / big);
    if (refuse)
        return FK_EINVAL;
    fk_log(FK_LOG_WARN, "kahm_scale", "client=%d msg=\"%s\"", c->client, c->label_msg);
    c->label_msg[0] = '\0';
    return FK_OK;
}

static double prep(const kcli *c, double x)
{
    x *= c->j.scale;
    return c->j.tanh ? tanh(x) : x;
}

int fk__kahm_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                      int n_clients, uint64_t seed, fk_err *err)
{
    (void)n_clients;
    kcli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    int rc = fk__kahm_job_parse(&c->j, p, seed, err);
    /* The client's own consent, written by the client daemon from its config. */
    if (!rc)
        rc = fk_params_bool(p, "local.allow_model_upload", 0, &c->allowed, err);
    if (!rc && !data->y)
        rc = fk_err_set(err, FK_EINVAL, "kahm: data set '%s' has no labels; KAHM fits one model "
                        "per class", data->name);
    size_t n = data->X.rows, P = data->X.cols;
    int *id = NULL;
    c->client = client;
    if (!rc)
        rc = class_ids(c, p, data, &id, err);
    if (rc) {
        fk__kahm_job_close(&c->j);
        free(c);
        return rc;
    }
    if (!c->label_rc && check_scale(c, p, data))
        c->label_rc = FK_EINVAL; /* refused at the task, like a label outside the classes */
    /* Holdout: floor(holdout * n_c) samples of each class, chosen by the client's stream. */
    int *perm = malloc((n ? n : 1) * sizeof(int));
    unsigned char *out_mask = calloc(n ? n : 1, 1);
    c->Xtr = malloc((n ? n : 1) * P * sizeof(double));
    c->Xte = malloc((n ? n : 1) * P * sizeof(double));
    c->ytr = malloc((n ? n : 1) * sizeof(int));
    c->yte = malloc((n ? n : 1) * sizeof(int));
    if (!perm || !out_mask || !c->Xtr || !c->Xte || !c->ytr || !c->yte) {
        free(perm);
        free(out_mask);
        free(id);
        fk__kahm_cli_close(c);
        return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory for %zu samples", n);
    }
    if (!c->label_rc && c->j.holdout > 0) {
        fk_rng r;
        fk_rng_init(&r, seed, HOLDOUT_STREAM + (uint64_t)client);
        for (int k = 0; k < c->j.C; k++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (id[i] == k)
                    perm[m++] = (int)i;
            fk_rng_shuffle(&r, perm, m);
            size_t h = (size_t)floor(c->j.holdout * (double)m);
            for (size_t t = 0; t < h; t++)
                out_mask[perm[t]] = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        double *dst = out_mask[i] ? c->Xte + c->nte * P : c->Xtr + c->ntr * P;
        for (size_t j = 0; j < P; j++)
            dst[j] = prep(c, data->X.data[i * data->X.ld + j]);
        if (out_mask[i])
            c->yte[c->nte++] = c->label_rc ? 0 : id[i];
        else
            c->ytr[c->ntr++] = c->label_rc ? 0 : id[i];
    }
    c->p = P;
    free(perm);
    free(out_mask);
    free(id);
    *out = c;
    return FK_OK;
}

static double max_model_err(const fk_kahm_set *s)
{
    double e = 0;
    for (int a = 0; a < s->n; a++)
        for (int q = 0; q < s->cls[a].n_parts; q++)
            e = s->cls[a].parts[q].model_err > e ? s->cls[a].parts[q].model_err : e;
    return e;
}

/* Accuracy (in [0, 1]) on the holdout of the labels argmin_c D; NaN without a holdout. */
static double holdout_acc(const kcli *c, const double *D)
{
    if (!c->nte)
        return NAN;
    int *lab = malloc(c->nte * sizeof(int));
    if (!lab)
        return NAN;
    fk_kahm_argmin(D, c->nte, c->j.C, lab, NULL);
    size_t hit = 0;
    for (size_t i = 0; i < c->nte; i++)
        hit += lab[i] == c->yte[i];
    free(lab);
    return (double)hit / (double)c->nte;
}

FK_CHECKRETURN static int local_acc(const kcli *c, double *acc, fk_err *err)
{
    *acc = NAN;
    if (!c->nte)
        return FK_OK;
    double *D = malloc(c->nte * (size_t)c->j.C * sizeof(double));
    if (!D)
        return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    int rc = fk_kahm_set_dist(&c->set, c->Xte, c->nte, c->p, D, 0, err);
    if (!rc)
        *acc = holdout_acc(c, D);
    free(D);
    return rc;
}

/* A class block the KAHM cannot model (one sample, identical rows): served by the other
 * clients that hold the class, or by none; the rest of this client's classes are served. */
static void left_out(void *ud, int cls, size_t n, const fk_err *why)
{
    kcli *c = ud;
    c->left_out[c->n_left++] = cls;
    fk_log(FK_LOG_WARN, "kahm_class_left_out",
           "client=%d class=%d samples=%zu msg=\"this class's block cannot be modelled and is left "
           "out of this client's answer; its other classes are served: %s\"",
           c->client, cls, n, why->msg);
}

int fk__kahm_local_step(void *v, const fk_bundle *task, fk_bundle *update, fk_report *rep,
                        fk_err *err)
{
    kcli *c = v;
    const fk_tensor *u = fk_bundle_get(task, "upload");
    if (!u || u->len != 1 || !(u->data[0] == 0 || u->data[0] == 1))
        return fk_err_set(err, FK_EFORMAT, "kahm task: no 'upload' flag 0 or 1");
    int upload = u->data[0] == 1;
    if (c->label_rc)
        return fk_err_set(err, c->label_rc, "%s", c->label_msg);
    if (upload && !c->allowed)
        return fk_err_set(err, FK_EINVAL,
                          "refusing the task: the job asks for upload_models = 1 (mode A), which "
                          "sends this client's KAHMs to the server, and a KAHM contains the "
                          "client's training samples in recoverable form; this client does not "
                          "allow it (set allow_model_upload = true in the [local] section of "
                          "this client's config to consent, or run the job with "
                          "upload_models = 0)");
    if (c->j.dim > 0 && c->p != (size_t)c->j.dim)
        return fk_err_set(err, FK_EINVAL, "kahm: this client's data have %zu columns, the job's "
                          "dim is %d", c->p, c->j.dim);
    int rc = FK_OK;
    /* bad data refuse the task; only a class block that cannot be modelled is left out */
    for (size_t i = 0; !c->fitted && i < c->ntr * c->p; i++)
        if (!isfinite(c->Xtr[i]))
            return fk_err_set(err, FK_EINVAL, "kahm client %d: training value (%zu, %zu) is %g; "
                              "KAHM data must be finite (clean or drop the sample)",
                              c->client, i / c->p, i % c->p, c->Xtr[i]);
    if (!c->fitted) {
        free(c->left_out);
        c->n_left = 0;
        c->left_out = malloc((size_t)c->j.C * sizeof *c->left_out);
        if (!c->left_out)
            return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
        rc = fk_kahm_set_fit_partial(&c->set, c->Xtr, c->ntr, c->p, c->p, c->ytr, c->j.C,
                                     &c->j.ko, left_out, c, err);
        if (rc)
            return fk_err_prefix(err, rc, "kahm client %d: ", c->client);
        c->fitted = 1;
    }
    rc = fk__kahm_encode(&c->set, (int)c->p, "", upload, update, err);
    /* The classes left out travel by id so the server can log and report them. */
    if (!rc && c->n_left &&
        fk_bundle_put_vec(update, "left_out", (size_t)c->n_left, c->left_out))
        rc = fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    if (!rc && upload && fk_bundle_put_scalar(update, "allowed", 1))
        rc = fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    if (rc)
        return rc;
    size_t nk = 0;
    for (int a = 0; a < c->set.n; a++)
        nk += (size_t)c->set.cls[a].n_parts;
    double mb = 8e-6 * (double)fk_bundle_values(update);
    if (upload)
        fk_log(FK_LOG_WARN, "kahm_upload",
               "client=%d sending %zu KAHM models of %d classes (%.3f MB): whitened encodings and "
               "(K+lambda I)^-1 Y of all %zu training samples; the server can reconstruct these "
               "samples exactly",
               c->client, nk, c->set.n, mb, c->ntr);
    else
        fk_log(FK_LOG_INFO, "kahm_class_list",
               "client=%d sending only class ids and sample counts of %d classes (%.6f MB); the "
               "%zu KAHM models stay on this client",
               c->client, c->set.n, mb, nk);
    rep->n_samples = (double)c->ntr;
    rep->model_error = max_model_err(&c->set);
    return local_acc(c, &rep->accuracy, err);
}

/* Mode A: the global classifier (63) over every uploaded model; mode B: this client's
 * local classifier (64) (the server holds no model it could score). */
int fk__kahm_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    kcli *c = v;
    const fk_tensor *up = fk_bundle_get(model, "upload"), *h = fk_bundle_get(model, "holders");
    if (!up || up->len != 1 || !h || h->ndim != 2 || h->shape[1] != (uint64_t)c->j.C)
        return fk_err_set(err, FK_EFORMAT, "kahm model: 'upload' or 'holders' missing");
    rep->n_samples = (double)c->ntr;
    if (!c->fitted)
        return FK_OK;
    rep->model_error = max_model_err(&c->set);
    if (up->data[0] != 1)
        return local_acc(c, &rep->accuracy, err);
    if (!c->nte)
        return FK_OK;
    size_t C = (size_t)c->j.C;
    double *D = malloc(c->nte * C * sizeof(double));
    if (!D)
        return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    for (size_t i = 0; i < c->nte * C; i++)
        D[i] = INFINITY;
    int rc = FK_OK;
    for (uint64_t k = 0; !rc && k < h->shape[0]; k++) {
        if (h->data[k * C] < 0)
            continue; /* no update from client k: +inf for its classes (Remark 11) */
        char pre[32];
        snprintf(pre, sizeof pre, "c%llu.", (unsigned long long)k);
        fk_kahm_set s;
        rc = fk__kahm_decode(model, pre, c->j.C, (int)c->p, 1, &s, NULL, err);
        if (!rc)
            rc = fk_kahm_set_dist(&s, c->Xte, c->nte, c->p, D, 1, err);
        if (!rc)
            fk_kahm_set_close(&s);
    }
    if (!rc)
        rep->accuracy = holdout_acc(c, D);
    free(D);
    return rc;
}

int fk__kahm_cli_save(void *v, fk_bundle *out, fk_err *err)
{
    kcli *c = v;
    if (fk_bundle_put_scalar(out, "fitted", c->fitted))
        return fk_err_set(err, FK_ENOMEM, "kahm client: out of memory");
    return c->fitted ? fk__kahm_encode(&c->set, (int)c->p, "", 1, out, err) : FK_OK;
}

int fk__kahm_cli_load(void *v, const fk_bundle *in, fk_err *err)
{
    kcli *c = v;
    const fk_tensor *f = fk_bundle_get(in, "fitted");
    if (!f || f->len != 1 || !(f->data[0] == 0 || f->data[0] == 1))
        return fk_err_set(err, FK_EFORMAT, "kahm client checkpoint: no 'fitted' flag 0 or 1");
    if (f->data[0] == 0)
        return FK_OK;
    fk_kahm_set s;
    int rc = fk__kahm_decode(in, "", c->j.C, (int)c->p, 1, &s, NULL, err);
    if (rc)
        return fk_err_prefix(err, rc, "kahm client checkpoint: ");
    fk_kahm_set_close(&c->set);
    c->set = s;
    c->fitted = 1;
    return FK_OK;
}

/* Mode-B serving, the client's part: the distances of a query batch to each class this
 * client holds (the min over its k-means parts), on the queries preprocessed as its own
 * data were. The server takes the minimum over the clients' answers (eq. 63). */
int fk__kahm_client_predict(void *v, const fk_bundle *queries, fk_bundle *answer, fk_err *err)
{
    kcli *c = v;
    if (!c->fitted)
        return fk_err_set(err, FK_ESTATE, "kahm client %d: no fitted models for this job (round "
                          "1 did not run here, or its state was lost): cannot score queries",
                          c->client);
    const fk_tensor *X = fk_bundle_get(queries, "X");
    if (!X || X->ndim != 2 || X->shape[1] != (uint64_t)c->p)
        return fk_err_set(err, FK_EINVAL, "kahm queries: need tensor 'X' of n x %zu values (this "
                          "client's data dimension); got %s", c->p,
                          !X ? "none" : X->ndim != 2 ? "not a matrix" : "another width");
    size_t nt = X->shape[0], p = c->p, C = (size_t)c->j.C, m = (size_t)c->set.n;
    if (nt > FK_KAHM_MAX_QUERIES)
        return fk_err_set(err, FK_ELIMIT, "kahm queries: %zu rows, at most %d per batch; split "
                          "the query file", nt, (int)FK_KAHM_MAX_QUERIES);
    for (size_t i = 0; i < X->len; i++)
        if (!isfinite(X->data[i]))
            return fk_err_set(err, FK_EINVAL, "kahm queries: row %zu column %zu is %g (must be "
                              "finite)", i / p, i % p, X->data[i]);
    double *T = malloc((nt ? nt : 1) * p * sizeof(double));
    double *D = malloc((nt ? nt : 1) * C * sizeof(double));
    double *held = fk_bundle_add(answer, "held", 1, (uint64_t[]){m});
    double *A = fk_bundle_add(answer, "D", 2, (uint64_t[]){nt, m});
    int rc = FK_OK;
    if (!T || !D || (m && !held) || (nt && m && !A))
        rc = fk_err_set(err, FK_ENOMEM, "kahm client: out of memory for %zu queries", nt);
    for (size_t i = 0; !rc && i < nt * p; i++)
        T[i] = prep(c, X->data[i]);
    if (!rc)
        rc = fk_kahm_set_dist(&c->set, T, nt, p, D, 0, err);
    /* Only the held classes' columns leave: the class list is already the server's. */
    for (size_t a = 0; !rc && a < m; a++) {
        size_t k = (size_t)c->set.cls[a].cls;
        held[a] = (double)k;
        for (size_t i = 0; i < nt; i++)
            A[i * m + a] = D[i * C + k];
    }
    free(T);
    free(D);
    return rc;
}
