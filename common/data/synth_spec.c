#include "common/data/synth_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/params.h"

#define PREFIX "synthetic/"

int fk_synth_spec_is(const char *src)
{
    return src && !strncmp(src, PREFIX, strlen(PREFIX));
}

/* "k=v,k=v" into p; every item needs a key and '='. */
FK_CHECKRETURN static int split_opts(const char *spec, const char *opts, fk_params *p, fk_err *err)
{
    const char *s = opts;
    while (*s) {
        size_t len = strcspn(s, ",");
        const char *eq = memchr(s, '=', len);
        if (!eq || eq == s || len > 200)
            return fk_err_set(err, FK_EINVAL,
                              "data set '%s': '%.*s' is not KEY=VALUE (options are "
                              "comma-separated)", spec, (int)(len > 60 ? 60 : len), s);
        char key[64], val[160];
        snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
        snprintf(val, sizeof val, "%.*s", (int)(len - (size_t)(eq - s) - 1), eq + 1);
        if (fk_params_get(p, key))
            return fk_err_set(err, FK_EINVAL, "data set '%s': option '%s' given twice", spec, key);
        if (fk_params_set(p, key, val))
            return fk_err_set(err, FK_ENOMEM, "out of memory");
        s += len;
        if (*s == ',')
            s++;
    }
    return FK_OK;
}

FK_CHECKRETURN static int parse_shift(const fk_params *p, fk_synth_spec *o, fk_err *err)
{
    long sources, samples, dims, classes, client;
    int rc;
    fk_synth_defaults(&o->shift);
    if ((rc = fk_params_int(p, "sources", 3, 1, 64, &sources, err)) ||
        (rc = fk_params_int(p, "samples", 200, 10, 100000, &samples, err)) ||
        (rc = fk_params_int(p, "dims", 32, 2, 4096, &dims, err)) ||
        (rc = fk_params_int(p, "classes", 5, 2, 64, &classes, err)) ||
        (rc = fk_params_int(p, "client", -1, 0, sources, &client, err)))
        return rc;
    o->shift.n_sources = (int)sources;
    o->shift.n_per_domain = (size_t)samples;
    o->shift.d = (size_t)dims;
    o->shift.n_classes = (int)classes;
    o->shift.seed = o->seed;
    o->client = (int)client;
    return FK_OK;
}

FK_CHECKRETURN static int parse_gmm(const fk_params *p, fk_synth_spec *o, fk_err *err)
{
    long tasks, outliers, samples, client;
    int rc;
    fk_synth_gmm_defaults(&o->gmm);
    if ((rc = fk_params_int(p, "tasks", 10, 2, 1000, &tasks, err)) ||
        (rc = fk_params_int(p, "outliers", 1, 0, tasks - 1, &outliers, err)) ||
        (rc = fk_params_int(p, "samples", 150, 10, 100000, &samples, err)) ||
        (rc = fk_params_int(p, "client", -1, 0, tasks - 1, &client, err)))
        return rc;
    o->gmm.K = (int)tasks;
    o->gmm.n_outlier = (int)outliers;
    o->gmm.n = (int)samples;
    o->client = (int)client;
    return FK_OK;
}

FK_CHECKRETURN static int parse_mor(const fk_params *p, fk_synth_spec *o, fk_err *err)
{
    long tasks, outliers, samples, comps, dims, client;
    int rc;
    fk_synth_mor *m = &o->mor;
    fk_synth_mor_defaults(m);
    if ((rc = fk_params_int(p, "tasks", 10, 2, 1000, &tasks, err)) ||
        (rc = fk_params_int(p, "outliers", 1, 0, tasks - 1, &outliers, err)) ||
        (rc = fk_params_int(p, "components", 5, 1, 100, &comps, err)) ||
        (rc = fk_params_int(p, "dims", 10, 1, 1000, &dims, err)) ||
        (rc = fk_params_int(p, "samples", 200, dims + 1, 100000, &samples, err)) ||
        (rc = fk_params_double(p, "h", 0.0, 0.0, 1e6, &m->h, err)) ||
        (rc = fk_params_double(p, "out_coef", -3.0, -1e6, 1e6, &m->out_coef, err)) ||
        (rc = fk_params_int(p, "client", -1, 0, tasks - 1, &client, err)))
        return rc;
    m->K = (int)tasks;
    m->n_outlier = (int)outliers;
    m->R = (int)comps;
    m->p = (int)dims;
    m->n = (int)samples;
    o->client = (int)client;
    return FK_OK;
}

int fk_synth_spec_parse(const char *spec, fk_synth_spec *out, fk_err *err)
{
    memset(out, 0, sizeof *out);
    if (!fk_synth_spec_is(spec))
        return fk_err_set(err, FK_EINVAL, "data set '%.80s' does not start with '" PREFIX "'", spec);
    const char *kind = spec + strlen(PREFIX);
    size_t klen = strcspn(kind, ":");
    if (klen == 5 && !strncmp(kind, "shift", 5))
        out->kind = FK_SYNTH_SHIFT;
    else if (klen == 3 && !strncmp(kind, "gmm", 3))
        out->kind = FK_SYNTH_GMM;
    else if (klen == 3 && !strncmp(kind, "mor", 3))
        out->kind = FK_SYNTH_MOR;
    else
        return fk_err_set(err, FK_EINVAL,
                          "data set '%.80s': unknown synthetic kind '%.*s' (use " PREFIX
                          "shift:client=I, " PREFIX "gmm:client=I or " PREFIX "mor:client=I)",
                          spec, (int)(klen > 40 ? 40 : klen), kind);
    fk_params p;
    fk_params_init(&p);
    int rc = kind[klen] == ':' ? split_opts(spec, kind + klen + 1, &p, err) : FK_OK;
    if (!rc && !fk_params_get(&p, "client"))
        rc = fk_err_set(err, FK_EINVAL, "data set '%.80s': needs client=I (this client's index)",
                        spec);
    if (!rc)
        rc = fk_params_u64(&p, "seed", 1, &out->seed, err);
    if (!rc)
        rc = out->kind == FK_SYNTH_SHIFT ? parse_shift(&p, out, err)
             : out->kind == FK_SYNTH_GMM ? parse_gmm(&p, out, err)
                                         : parse_mor(&p, out, err);
    if (rc && rc != FK_ENOMEM && strncmp(err->msg, "data set", 8))
        fk_err_prefix(err, rc, "data set '%.80s': ", spec);
    const char *unused = rc ? NULL : fk_params_unused(&p);
    if (unused)
        rc = fk_err_set(err, FK_EINVAL, "data set '%.80s': unknown option '%s'", spec, unused);
    fk_params_close(&p);
    return rc;
}

/* One client's data set made alone: each generator draws a task's or domain's data from
 * its own streams, so it is bit for bit the client's part of the whole federation's. */
FK_CHECKRETURN static int load_shift(fk_dataset *ds, const fk_synth_spec *s, fk_err *err)
{
    return fk_synth_shift_domain(&s->shift, s->client, ds, err);
}

FK_CHECKRETURN static int load_gmm(fk_dataset *ds, const fk_synth_spec *s, fk_err *err)
{
    const fk_synth_gmm *g = &s->gmm;
    double *theta = malloc((size_t)g->R * (size_t)g->p * sizeof *theta);
    double *w = malloc((size_t)g->R * sizeof *w);
    int rc = (!theta || !w) ? fk_err_set(err, FK_ENOMEM, "synthetic data: out of memory")
                            : fk_synth_gmm_task(g, s->seed, s->client, ds, theta, w, err);
    free(theta);
    free(w);
    return rc;
}

FK_CHECKRETURN static int load_mor(fk_dataset *ds, const fk_synth_spec *s, fk_err *err)
{
    const fk_synth_mor *m = &s->mor;
    return fk_mor_task_make(m->K, m->R, m->p, m->n, m->n_outlier, m->h, m->out_coef, s->seed,
                            s->client, ds, err);
}

int fk_synth_spec_name(fk_dataset *ds, const char *spec, fk_err *err)
{
    memset(ds, 0, sizeof *ds);
    fk_synth_spec s;
    int rc = fk_synth_spec_parse(spec, &s, err);
    if (rc)
        return rc;
    if (s.kind == FK_SYNTH_SHIFT)
        fk_synth_shift_name(&s.shift, s.client, ds->name, sizeof ds->name);
    else if (s.kind == FK_SYNTH_GMM)
        fk_synth_gmm_task_name(&s.gmm, s.client, ds->name, sizeof ds->name);
    else
        snprintf(ds->name, sizeof ds->name, "mor-task%d", s.client);
    return FK_OK;
}

int fk_synth_spec_load(fk_dataset *ds, const char *spec, fk_err *err)
{
    memset(ds, 0, sizeof *ds);
    fk_synth_spec s;
    int rc = fk_synth_spec_parse(spec, &s, err);
    if (rc)
        return rc;
    return s.kind == FK_SYNTH_SHIFT ? load_shift(ds, &s, err)
           : s.kind == FK_SYNTH_GMM ? load_gmm(ds, &s, err)
                                    : load_mor(ds, &s, err);
}
