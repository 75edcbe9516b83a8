#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/la/hungarian.h"
#include "common/methods/dica/dica_job.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/method.h"
#include "common/methods/mixture/fedgmm_mor.h"
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/methods/sfl/sfl.h"

/* One line per job type; each method file exports its table. */
const fk_method *const fk_methods[] = {
    &fk_method_fedrf_tca,
    &fk_method_fedgrem,
    &fk_method_fedem,
    &fk_method_local_em,
    &fk_method_local_grem,
    &fk_method_tgmm,
    &fk_method_pooled_grem,
    &fk_method_pooled_em,
    &fk_method_fedgrem_mor,
    &fk_method_fedem_mor,
    &fk_method_local_em_mor,
    &fk_method_local_grem_mor,
    &fk_method_pooled_grem_mor,
    &fk_method_pooled_em_mor,
    &fk_method_fedgmm_mor,
    &fk_method_sfl,
    &fk_method_kahm,
    &fk_method_dica,
    &fk_method_udica,
    NULL,
};

void fk_report_init(fk_report *r)
{
    r->n_samples = 0.0;
    r->loss = NAN;
    r->accuracy = NAN;
    r->error = NAN;
    r->misclust = NAN;
    r->ari = NAN;
    r->rmse = NAN;
    r->model_error = NAN;
}

const fk_report_field fk_report_fields[FK_REPORT_N_FIELDS] = {
    {"loss", offsetof(fk_report, loss), "local objective after the step (lower is better)"},
    {"accuracy", offsetof(fk_report, accuracy), "share of correctly labelled rows, [0,1]"},
    {"error", offsetof(fk_report, error), "the method's own error measure (see its page)"},
    {"misclust", offsetof(fk_report, misclust),
     "mis-clustering rate after the best label alignment, [0,1]"},
    {"ari", offsetof(fk_report, ari), "adjusted Rand index against the true classes, [-1,1]"},
    {"rmse", offsetof(fk_report, rmse), "root mean squared error of the predictions"},
    {"model_error", offsetof(fk_report, model_error),
     "largest modelling error of the client's class models (kahm; not 1 - accuracy)"},
};

double fk_report_get(const fk_report *r, const char *name)
{
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++)
        if (!strcmp(fk_report_fields[i].name, name))
            return *(const double *)((const char *)r + fk_report_fields[i].offset);
    return NAN;
}

void fk_report_set(fk_report *r, const char *name, double v)
{
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++)
        if (!strcmp(fk_report_fields[i].name, name))
            *(double *)((char *)r + fk_report_fields[i].offset) = v;
}

int fk_report_score_clusters(fk_report *r, const int *y, const int *pred, size_t n,
                             int n_classes, int n_clusters, fk_err *err)
{
    double rate = NAN, ari = NAN;
    int rc = fk_misclustering_rate(y, pred, n, n_classes, n_clusters, &rate, err);
    if (!rc)
        rc = fk_adjusted_rand_index(y, pred, n, n_classes, n_clusters, &ari, err);
    if (rc)
        return rc;
    r->misclust = r->error = rate;
    r->accuracy = 1.0 - rate;
    r->ari = ari;
    return FK_OK;
}

void fk_report_argmax(const double *gamma, size_t n, int R, int component_major, int *pred)
{
    size_t si = component_major ? 1 : (size_t)R, sr = component_major ? n : 1;
    for (size_t i = 0; i < n; i++) {
        const double *g = gamma + i * si;
        int best = 0;
        for (int r = 1; r < R; r++)
            if (g[(size_t)r * sr] > g[(size_t)best * sr])
                best = r;
        pred[i] = best;
    }
}

double fk_report_mean(const fk_update *ups, int n, size_t field)
{
    double sum = 0.0, w = 0.0;
    for (int i = 0; i < n; i++) {
        double v = *(const double *)((const char *)&ups[i].report + field);
        double wi = ups[i].report.n_samples > 0 ? ups[i].report.n_samples : 1.0;
        if (!isnan(v)) {
            sum += wi * v;
            w += wi;
        }
    }
    return w > 0 ? sum / w : NAN;
}

void fk_plan_every_client(int K, int *chosen, int *n_chosen)
{
    for (int k = 0; k < K; k++)
        chosen[k] = k;
    *n_chosen = K;
}

int fk_method_default_rounds(const fk_method *m, const fk_params *p)
{
    return m->max_rounds ? m->max_rounds(p) : FK_DEFAULT_ROUNDS;
}

int fk_method_folds(const fk_method *m)
{
    return m->fold_begin && m->fold && m->fold_end;
}

int fk_method_aggregate(const fk_method *m, void *srv, int round, int phase, const fk_update *ups,
                        int n, int *round_done, fk_err *err)
{
    if (!fk_method_folds(m))
        return m->aggregate(srv, round, phase, ups, n, round_done, err);
    int rc = m->fold_begin(srv, round, phase, err);
    for (int k = 0; k < n && !rc; k++)
        rc = m->fold(srv, round, phase, &ups[k], err);
    return rc ? rc : m->fold_end(srv, round, phase, round_done, err);
}

const fk_method *fk_method_find(const char *name, fk_err *err)
{
    char known[512] = "";
    size_t off = 0;
    for (int i = 0; fk_methods[i]; i++) {
        if (strcmp(fk_methods[i]->name, name) == 0)
            return fk_methods[i];
        int w = snprintf(known + off, sizeof known - off, "%s%s", i ? ", " : "",
                         fk_methods[i]->name);
        if (w > 0 && (size_t)w < sizeof known - off)
            off += (size_t)w;
    }
    fk_err_set(err, FK_ENOTFOUND, "unknown method '%s' (known: %s)", name, *known ? known : "none");
    return NULL;
}
