/* Job configuration of the sfl job type (spec §6.2), the task's rows and atom sets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/sfl/sfl_int.h"

const fk_param_doc fk__sfl_keys[] = {
    {"raw_sample_upload acknowledged", "must be 'acknowledged': clients upload raw rows (their critical "
                          "samples) to the server; the job refuses to start otherwise"},
    {"local.allow_raw_upload BOOL", "CLIENT-side consent (client config [local] section, or the "
                               "simulator): true lets this client upload raw rows; default false"},
    {"local.max_upload_fraction F", "client-side cap on the uploaded fraction of its rows (0, 1]; "
                                  "rows with the largest dual values are kept (default 1)"},
    {"max_upload_fraction F", "job cap on the fraction of a client's rows it may upload (default 1)"},
    {"mode classify|regress", "classify (margin classification, spec Ch. 3) or regress (eps-tube, Ch. 2)"},
    {"pos_label V", "raw label of the +1 class (default 1)"},
    {"neg_label V|rest", "raw label of the -1 class, or 'rest' (default rest)"},
    {"eps E", "margin slack (classify, default 0.5) or max squared error (regress, default 1e-3)"},
    {"gamma_client G", "sparsity weight of the clients' problems (default 0)"},
    {"gamma_server G", "sparsity weight of the server's problem (default 0)"},
    {"gamma_rel_client R", "relative sparsity in [0, 1) for the clients (overrides gamma_client)"},
    {"gamma_rel_server R", "relative sparsity in [0, 1) for the server (overrides gamma_server)"},
    {"resilient COST", "none, quadratic (default), huber or linear relaxation of the margins (Ch. 4)"},
    {"c C", "relaxation cost: quadratic c, Huber delta or linear C (default 100)"},
    {"T_client N", "iteration cap of a client solve (default 20000)"},
    {"T_server N", "iteration cap of the server solve (default 20000)"},
    {"atoms auto|grid|candidates|samples", "atom set shared by every party (spec §3.7): auto "
                                           "(default: grid for p <= 3, else candidates), grid "
                                           "(box_lo/box_hi or from the data's spread), candidates "
                                           "(k-means centres of every client, per class), "
                                           "samples (each party's own rows: K = 1 differs from "
                                           "the centralised fit)"},
    {"candidates_per_class M", "k-means centres per class and client for candidate atoms "
                               "(default 50)"},
    {"width_min W", "smallest kernel width (default: the rows' typical neighbour distance "
                    "sqrt(p) n_ref^(-1/p) times the rms feature spread, federated)"},
    {"width_max W", "largest kernel width (default: 5 width_min, at most 2 sqrt(p) spreads)"},
    {"n_widths Q", "number of widths (default 6)"},
    {"grid_h H", "grid spacing (default max(width_min / 2, box side / (2048^(1/p) - 1)))"},
    {"box_lo LIST", "grid box lower corner: one value or p comma-separated values (default "
                    "mean - 2 sd - width_max per feature, federated)"},
    {"box_hi LIST", "grid box upper corner: one value or p comma-separated values (default "
                    "mean + 2 sd + width_max)"},
    {"x_shift LIST", "preprocessing x <- (x - shift) / scale: one value or p values (default: "
                     "the federated per-feature mean when neither x_shift nor x_scale is set)"},
    {"x_scale LIST", "preprocessing scale: one value or p values, > 0 (default: the federated "
                     "per-feature standard deviation; x_scale = 1 keeps the raw units)"},
    {"server_init INIT", "concat (client duals, default), rescaled (by N_F/N_i) or zero"},
    {"model_form FORM", "atoms (support atoms, default) or peaks (one refit kernel per bump)"},
    {"crit_rule RULE", "tol (dual > 1e-8 max, and at gamma = 0 margin active; default) or strict "
                  "(dual > 0)"},
    {"multiclass none|ovo", "none (binary: pos_label vs neg_label, default) or ovo: one-vs-one "
                            "(spec A14), one problem per class pair, prediction by majority vote "
                            "(ties to the smallest class)"},
    {"classes LIST", "multiclass = ovo: the raw class labels, comma-separated, ascending (2 to 32)"},
    {"solver reduced|variant_a", "mode = regress only: reduced (the reduced dual, Variant B, "
                                 "default) or variant_a (the dissertation's (lambda, mu) dual "
                                 "ascent, Variant A, spec §3.6; slower, no momentum)"},
    {"mc_resample BOOL", "solver = variant_a with atoms = grid only: true runs Algorithm 1 "
                         "literally, mc_batch fresh uniform atoms on the box per iteration, "
                         "drawn from the job's seed (default false)"},
    {"mc_batch B", "mc_resample = true only: Monte-Carlo atoms per iteration (default 256)"},
    {"sim_n N", "fedkern sim only: rows per synthetic client (default 50)"},
    {NULL, NULL},
};

void fk__sfl_cfg_close(fk__sfl_cfg *c)
{
    free(c->box_lo);
    free(c->box_hi);
    free(c->shift);
    free(c->scale);
    free(c->cls);
    free(c->cand);
    free(c->cand_cls);
    memset(c, 0, sizeof *c);
}

/* "v" or "v1,v2,...": a list of finite doubles (NULL/0 when the key is absent). */
FK_CHECKRETURN static int parse_list(const fk_params *p, const char *key, double **out, int *n, fk_err *err)
{
    *out = NULL;
    *n = 0;
    const char *s = fk_params_get(p, key);
    if (!s)
        return FK_OK;
    int cap = 1;
    for (const char *q = s; *q; q++)
        cap += *q == ',';
    double *v = malloc((size_t)cap * sizeof *v);
    if (!v)
        return fk_err_set(err, FK_ENOMEM, "out of memory for '%s'", key);
    const char *q = s;
    for (int i = 0; i < cap; i++) {
        char *end;
        v[i] = strtod(q, &end);
        while (*end == ' ')
            end++;
        if (end == q || !isfinite(v[i]) || (*end != ',' && *end != '\0')) {
            free(v);
            return fk_err_set(err, FK_EINVAL,
                              "%s: '%s' is not a number or a comma-separated list of numbers", key,
                              s);
        }
        q = end + (*end == ',');
    }
    *out = v;
    *n = cap;
    return FK_OK;
}

FK_CHECKRETURN static int pick(const char *key, const char *v, const char *const *names, int *out, fk_err *err)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) {
            *out = i;
            return FK_OK;
        }
    return fk_err_set(err, FK_EINVAL, "%s = '%s' is not one of the allowed values (%s, %s, ...)",
                      key, v, names[0], names[1]);
}

int fk__sfl_cfg_parse(fk__sfl_cfg *c, const fk_params *p, fk_err *err)
{
    memset(c, 0, sizeof *c);
    const char *ack = fk_params_str(p, "raw_sample_upload", "");
    if (strcmp(ack, "acknowledged"))
        return fk_err_set(err, FK_EINVAL,
                          "sfl uploads raw training rows (each client's critical samples) to the "
                          "server; the job needs 'raw_sample_upload = acknowledged' to start "
                          "(see docs/sfl.md, 'What leaves the machine')");
    static const char *const modes[] = {"regress", "classify", NULL};
    static const char *const ress[] = {"none", "quadratic", "huber", "linear", NULL};
    static const char *const inits[] = {"concat", "rescaled", "zero", NULL};
    static const char *const atoms[] = {"samples", "grid", "auto", "candidates", NULL};
    static const char *const forms[] = {"atoms", "peaks", NULL};
    static const char *const crits[] = {"tol", "strict", NULL};
    int rc = pick("mode", fk_params_str(p, "mode", "classify"), modes, &c->mode, err);
    if (!rc)
        rc = pick("resilient", fk_params_str(p, "resilient", "quadratic"), ress, &c->res, err);
    if (!rc)
        rc = pick("server_init", fk_params_str(p, "server_init", "concat"), inits,
                  &c->server_init, err);
    if (!rc)
        rc = pick("atoms", fk_params_str(p, "atoms", "auto"), atoms, &c->atoms, err);
    c->grid = c->atoms == FK__SFL_AT_GRID;
    if (!rc)
        rc = pick("model_form", fk_params_str(p, "model_form", "atoms"), forms, &c->peaks, err);
    if (!rc)
        rc = pick("crit_rule", fk_params_str(p, "crit_rule", "tol"), crits, &c->strict, err);
    if (rc)
        return rc;
    int cls = c->mode == FK_SFL_CLASSIFY;
    long Q = 6;
    if (!rc)
        rc = fk_params_double(p, "eps", cls ? 0.5 : 1e-3, 0, cls ? 0.999999 : 1e12, &c->eps, err);
    if (!rc)
        rc = fk_params_double(p, "gamma_client", 0, 0, 1e12, &c->gamma_client, err);
    if (!rc)
        rc = fk_params_double(p, "gamma_server", 0, 0, 1e12, &c->gamma_server, err);
    if (!rc)
        rc = fk_params_double(p, "gamma_rel_client", 0, 0, 0.999999, &c->grel_client, err);
    if (!rc)
        rc = fk_params_double(p, "gamma_rel_server", 0, 0, 0.999999, &c->grel_server, err);
    if (!rc)
        rc = fk_params_double(p, "c", 100, 1e-12, 1e12, &c->c, err);
    if (!rc)
        rc = fk_params_int(p, "T_client", 20000, 1, 100000000, &c->T_client, err);
    if (!rc)
        rc = fk_params_int(p, "T_server", 20000, 1, 100000000, &c->T_server, err);
    if (!rc)
        rc = fk_params_double(p, "width_min", 0.5, 1e-12, 1e12, &c->wmin, err);
    if (!rc)
        rc = fk_params_double(p, "width_max", 3.0, c->wmin, 1e12, &c->wmax, err);
    if (!rc)
        rc = fk_params_int(p, "n_widths", 6, 1, 1000, &Q, err);
    if (!rc)
        rc = fk_params_int(p, "candidates_per_class", 50, 1, 100000, &c->cpc, err);
    /* unset widths, box, spacing and preprocessing follow the data (fk__sfl_resolve) */
    c->w_auto = !fk_params_get(p, "width_min") && !fk_params_get(p, "width_max");
    c->h_auto = !fk_params_get(p, "grid_h");
    c->box_auto = !fk_params_get(p, "box_lo") && !fk_params_get(p, "box_hi");
    c->pre_auto = !fk_params_get(p, "x_shift") && !fk_params_get(p, "x_scale");
    if (!rc && !c->w_auto && (!fk_params_get(p, "width_min") || !fk_params_get(p, "width_max")))
        rc = fk_err_set(err, FK_EINVAL, "set both width_min and width_max, or neither (then the "
                                        "widths follow the data's spread, federated)");
    if (!rc)
        rc = fk_params_double(p, "grid_h", c->wmin / 2, 1e-12, 1e12, &c->h, err);
    if (!rc)
        rc = fk_params_double(p, "pos_label", 1, -1e300, 1e300, &c->pos_label, err);
    if (!rc)
        rc = fk_params_double(p, "max_upload_fraction", 1, 1e-12, 1, &c->max_frac, err);
    if (rc)
        return rc;
    c->Q = (int)Q;
    const char *neg = fk_params_str(p, "neg_label", "rest");
    c->neg_rest = !strcmp(neg, "rest");
    if (!c->neg_rest) {
        char *end;
        c->neg_label = strtod(neg, &end);
        if (end == neg || *end || !isfinite(c->neg_label) || c->neg_label == c->pos_label)
            return fk_err_set(err, FK_EINVAL,
                              "neg_label = '%s' must be 'rest' or a raw label other than "
                              "pos_label",
                              neg);
    }
    int nlo = 0, nhi = 0, nsh = 0, nsc = 0;
    rc = parse_list(p, "box_lo", &c->box_lo, &nlo, err);
    if (!rc)
        rc = parse_list(p, "box_hi", &c->box_hi, &nhi, err);
    if (!rc)
        rc = parse_list(p, "x_shift", &c->shift, &nsh, err);
    if (!rc)
        rc = parse_list(p, "x_scale", &c->scale, &nsc, err);
    if (!rc && !c->box_auto && (!nlo || nlo != nhi))
        rc = fk_err_set(err, FK_EINVAL,
                        "box_lo and box_hi need the same number of values (or leave both unset: "
                        "the grid box then follows the data's federated mean and spread)");
    if (!rc && nsh && nsc && nsh != nsc && nsh != 1 && nsc != 1)
        rc = fk_err_set(err, FK_EINVAL, "x_shift has %d values but x_scale %d", nsh, nsc);
    for (int i = 0; !rc && i < nsc; i++)
        if (!(c->scale[i] > 0))
            rc = fk_err_set(err, FK_EINVAL, "x_scale value %d is %g (must be > 0)", i,
                            c->scale[i]);
    static const char *const mcs[] = {"none", "ovo", NULL};
    if (!rc)
        rc = pick("multiclass", fk_params_str(p, "multiclass", "none"), mcs, &c->ovo, err);
    if (!rc)
        rc = parse_list(p, "classes", &c->cls, &c->n_cls, err);
    if (!rc && c->ovo && (c->mode != FK_SFL_CLASSIFY || c->n_cls < 2 || c->n_cls > 32))
        rc = fk_err_set(err, FK_EINVAL,
                        "multiclass = ovo needs mode = classify and 'classes' listing 2 to 32 raw "
                        "labels (it has %d)",
                        c->n_cls);
    for (int i = 1; !rc && c->ovo && i < c->n_cls; i++)
        if (!(c->cls[i] > c->cls[i - 1]))
            rc = fk_err_set(err, FK_EINVAL, "classes: the labels must be distinct and ascending "
                                            "(value %d is %g after %g)",
                            i, c->cls[i], c->cls[i - 1]);
    if (!rc && !c->ovo && c->n_cls)
        rc = fk_err_set(err, FK_EINVAL, "'classes' is for multiclass = ovo only");
    static const char *const solvers[] = {"reduced", "variant_a", NULL};
    if (!rc)
        rc = pick("solver", fk_params_str(p, "solver", "reduced"), solvers, &c->solver, err);
    if (!rc)
        rc = fk_params_bool(p, "mc_resample", 0, &c->mc_resample, err);
    if (!rc)
        rc = fk_params_int(p, "mc_batch", 256, 1, 1000000, &c->mc_batch, err);
    /* the (lambda, mu) dual and its Monte-Carlo form exist for the regression cost (2.25) only;
     * Monte-Carlo atoms need the fixed centre box; B means nothing without them */
    if (!rc && c->solver == FK_SFL_SOLVER_VA && c->mode != FK_SFL_REGRESS)
        rc = fk_err_set(err, FK_EINVAL, "solver = variant_a is the regression (lambda, mu) dual "
                                        "(spec §3.6); it needs mode = regress (classification "
                                        "uses solver = reduced)");
    if (!rc && c->mc_resample && (c->solver != FK_SFL_SOLVER_VA || !c->grid))
        rc = fk_err_set(err, FK_EINVAL, "mc_resample = true (Algorithm 1 literally) needs solver "
                                        "= variant_a, mode = regress and atoms = grid (atoms are "
                                        "drawn uniformly on box_lo..box_hi)");
    if (!rc && !c->mc_resample && fk_params_get(p, "mc_batch"))
        rc = fk_err_set(err, FK_EINVAL, "mc_batch is the Monte-Carlo batch of mc_resample = true; "
                                        "set mc_resample = true or drop mc_batch");
    c->box_p = nlo;
    c->n_pre = nsh > nsc ? nsh : nsc;
    if (!rc && c->n_pre && (!c->shift || !c->scale)) { /* fill the missing one with 0 / 1 */
        double **miss = c->shift ? &c->scale : &c->shift, fill = c->shift ? 1.0 : 0.0;
        if (!(*miss = malloc((size_t)c->n_pre * sizeof **miss)))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        for (int i = 0; !rc && i < c->n_pre; i++)
            (*miss)[i] = fill;
    } else if (!rc && c->n_pre && nsh != nsc) { /* broadcast the single value */
        double **one = nsh == 1 ? &c->shift : &c->scale;
        double v = (*one)[0], *w = realloc(*one, (size_t)c->n_pre * sizeof *w);
        if (!w)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        else
            for (int i = 0; i < c->n_pre; i++)
                w[i] = v;
        if (w)
            *one = w;
    }
    if (rc)
        fk__sfl_cfg_close(c);
    return rc;
}

void fk__sfl_opts(const fk__sfl_cfg *c, int server, double n_ref, uint64_t seed, fk_sfl_opts *o)
{
    fk_sfl_opts_default(o, c->mode);
    o->eps = c->eps;
    o->gamma = server ? c->gamma_server : c->gamma_client;
    o->gamma_rel = server ? c->grel_server : c->grel_client;
    o->res = c->res;
    o->c = c->c;
    o->n_ref = n_ref;
    o->T = server ? c->T_server : c->T_client;
    o->seed = seed;
    o->solver = c->solver;
    o->mc_resample = c->mc_resample;
    o->mc_batch = c->mc_batch;
    /* a client's critical set is only right when its solve is tight: at tau_gap = 1e-4 the
     * activity test withheld rows whose dual the centralised solution keeps positive (one
     * client, E3.1 + 2 noise columns, candidate atoms: 318 of 343 sent, f 23 % off the
     * centralised fit; at 1e-6: 343 sent, f 2.4e-4 off, about 3x the client iterations) */
    if (!server && c->mode == FK_SFL_CLASSIFY)
        o->tau_gap = 1e-6;
    if (c->strict) { /* the dissertation's rule: every positive dual is critical */
        o->tau_crit = 0;
        o->tau_act = INFINITY;
    } else if (o->gamma > 0 || o->gamma_rel > 0 || c->mc_resample) {
        /* gamma > 0: the returned (kept) iterate of the thresholded problem does not meet
         * complementary slackness on a finite atom set (duality gap, spec §3.4), so the
         * activity test would drop rows with a positive dual that the server needs (E3.1
         * gamma_rel 0.3: federated 0.90 vs pooled 0.95 with it, 0.946 vs 0.947 without);
         * the dual threshold alone decides. mc_resample: the Monte-Carlo iterate's fit sits
         * at the tube's edge only up to its noise, so the activity test dropped most rows
         * with a large dual (6 of 90 uploaded against 14 by the exact solvers) */
        o->tau_act = INFINITY;
    }
}

int fk__sfl_task_rows(const fk__sfl_cfg *c, const fk_dataset *ds, double **X, double **y,
                      size_t *n, fk_err *err)
{
    *X = *y = NULL;
    *n = 0;
    size_t N = ds->X.rows, p = ds->X.cols;
    if (p < 1 || !ds->X.data)
        return fk_err_set(err, FK_EINVAL, "sfl: the data set '%s' has no feature columns",
                          ds->name);
    if (c->n_pre > 1 && (size_t)c->n_pre != p)
        return fk_err_set(err, FK_EINVAL,
                          "sfl: x_shift/x_scale give %d values but data set '%s' has %zu "
                          "features; the preprocessing map must match the data",
                          c->n_pre, ds->name, p);
    if (c->grid && c->box_p && (size_t)c->box_p != p && c->box_p != 1)
        return fk_err_set(err, FK_EINVAL,
                          "sfl: box_lo/box_hi give %d values but data set '%s' has %zu features",
                          c->box_p, ds->name, p);
    if (!ds->y_raw)
        return fk_err_set(err, FK_EINVAL, "sfl: data set '%s' has no labels or targets",
                          ds->name);
    double *Xo = malloc((N ? N : 1) * p * sizeof *Xo), *yo = malloc((N ? N : 1) * sizeof *yo);
    if (!Xo || !yo) {
        free(Xo);
        free(yo);
        return fk_err_set(err, FK_ENOMEM, "sfl: out of memory for %zu rows", N);
    }
    size_t m = 0;
    for (size_t i = 0; i < N; i++) {
        double t = ds->y_raw[i], target;
        if (c->ovo) {
            int j = 0;
            while (j < c->n_cls && c->cls[j] != t)
                j++;
            /* one class list per job, by raw label value: a label outside it is an error of
             * the data or of 'classes', never a silently dropped row */
            if (j == c->n_cls) {
                free(Xo);
                free(yo);
                return fk_err_set(err, FK_EINVAL,
                                  "sfl: data set '%s' row %zu has label %g, which is not in the "
                                  "job's 'classes' list; add it to 'classes' or remove the row",
                                  ds->name, i + 1, t);
            }
            target = j;
        } else if (c->mode == FK_SFL_CLASSIFY) {
            if (t == c->pos_label)
                target = 1;
            else if (c->neg_rest || t == c->neg_label)
                target = -1;
            else
                continue; /* a class outside the task */
        } else {
            target = t;
        }
        const double *x = ds->X.data + i * ds->X.ld;
        for (size_t k = 0; k < p; k++) {
            double v = x[k];
            if (c->n_pre)
                v = (v - c->shift[c->n_pre > 1 ? k : 0]) / c->scale[c->n_pre > 1 ? k : 0];
            if (!isfinite(v) || !isfinite(target)) {
                free(Xo);
                free(yo);
                return fk_err_set(err, FK_EINVAL,
                                  "sfl: data set '%s' row %zu has a NaN or infinite %s; clean the "
                                  "data before the run",
                                  ds->name, i, isfinite(target) ? "feature" : "target");
            }
            Xo[m * p + k] = v;
        }
        yo[m++] = target;
    }
    *X = Xo;
    *y = yo;
    *n = m;
    return FK_OK;
}

int fk__sfl_atoms_q(const fk__sfl_cfg *c, const double *X, size_t n, int p, int q,
                    fk_sfl_atoms *a, fk_err *err)
{
    /* closable whatever fails below: the callers close *a on every error */
    memset(a, 0, sizeof *a);
    double *w = malloc((size_t)c->Q * sizeof *w);
    if (!w)
        return fk_err_set(err, FK_ENOMEM, "sfl: out of memory");
    fk_sfl_widths(c->wmin, c->wmax, c->Q, w);
    int rc;
    if (c->grid) {
        double lo[FK_SFL_GRID_MAX_P], hi[FK_SFL_GRID_MAX_P];
        for (int k = 0; k < p && k < FK_SFL_GRID_MAX_P; k++) {
            lo[k] = c->box_lo[c->box_p > 1 ? k : 0];
            hi[k] = c->box_hi[c->box_p > 1 ? k : 0];
        }
        /* gamma > 0 needs the whole n x J kernel matrix; at gamma = 0 the solver computes
         * kernel rows on demand within its row budget (issue 36), whatever n */
        int whole = c->gamma_client > 0 || c->gamma_server > 0 || c->grel_client > 0 ||
                    c->grel_server > 0;
        rc = fk_sfl_atoms_grid(a, p, lo, hi, c->h, w, c->Q, n, whole ? (size_t)4 << 30 : 0, err);
    } else if (c->atoms == FK__SFL_AT_CAND) {
        /* the job's candidates (every client's k-means centres), the same for every party;
         * a pair problem takes the centres of its two classes */
        int ga = 0, gb = 0;
        if (q >= 0)
            fk__sfl_ovo_pair(c->n_cls, q, &ga, &gb);
        double *Z = malloc((c->M ? c->M : 1) * (size_t)p * sizeof *Z);
        size_t m = 0;
        for (size_t j = 0; Z && j < c->M; j++)
            if (q < 0 || c->cand_cls[j] == ga || c->cand_cls[j] == gb)
                memcpy(Z + m++ * (size_t)p, c->cand + j * (size_t)p, (size_t)p * sizeof *Z);
        rc = !Z   ? fk_err_set(err, FK_ENOMEM, "sfl: out of memory")
             : m  ? fk_sfl_atoms_candidates(a, Z, m, p, w, c->Q, err)
                  : fk_err_set(err, FK_EINVAL, "sfl: no candidate centres for this problem");
        /* each centre carries the mass of the rows it stands for (n_ref / M), so the atom
         * measure is the rows' counting measure whatever the number of centres: with the
         * spec's unit mass, one client's 100 pen-digits centres underfit (held-out 0.893)
         * where ten clients' 600 did not (0.977) */
        for (size_t j = 0; !rc && c->cand_mass > 0 && j < a->J; j++)
            a->v[j] *= c->cand_mass;
        free(Z);
    } else {
        rc = n ? fk_sfl_atoms_candidates(a, X, n, p, w, c->Q, err)
               : fk_err_set(err, FK_EINVAL, "sfl: no rows to place kernels on");
    }
    free(w);
    return rc;
}

int fk__sfl_atoms(const fk__sfl_cfg *c, const double *X, size_t n, int p, fk_sfl_atoms *a,
                  fk_err *err)
{
    return fk__sfl_atoms_q(c, X, n, p, -1, a, err);
}

/* p copies of v in a fresh array (NULL: out of memory) */
static double *fill(int p, double v)
{
    double *a = malloc((size_t)p * sizeof *a);
    for (int k = 0; a && k < p; k++)
        a[k] = v;
    return a;
}

int fk__sfl_resolve(fk__sfl_cfg *c, int p, double n_ref, const double *mean, const double *var,
                    fk_err *err)
{
    if (p < 1 || !(n_ref >= 1))
        return fk_err_set(err, FK_EINVAL, "sfl: no rows to take the data's scale from");
    double *m2 = malloc((size_t)p * sizeof *m2), *v2 = malloc((size_t)p * sizeof *v2);
    if (!m2 || !v2) {
        free(m2);
        free(v2);
        return fk_err_set(err, FK_ENOMEM, "sfl: out of memory");
    }
    int rc = FK_OK;
    if (c->pre_auto) { /* standardise by the federated mean and spread */
        free(c->shift);
        free(c->scale);
        c->shift = fill(p, 0);
        c->scale = fill(p, 1);
        c->n_pre = p;
        if (!c->shift || !c->scale)
            rc = fk_err_set(err, FK_ENOMEM, "sfl: out of memory");
        for (int k = 0; !rc && k < p; k++) {
            double sd = sqrt(var[k]);
            c->shift[k] = mean[k];
            /* a constant feature keeps scale 1 (it is 0 after the shift); a spread below
             * 1e-10 of the mean is rounding noise of float64 values, not a scale */
            if (sd > 0 && sd < 1e-10 * fabs(mean[k]))
                rc = fk_err_set(err, FK_EINVAL,
                                "sfl: feature %d has a spread of %.3g around a mean of %.3g over "
                                "the federation's %.0f rows (relative %.2g): too small to "
                                "standardise in float64; set x_shift and x_scale (or drop the "
                                "feature)",
                                k, sd, mean[k], n_ref, sd / fabs(mean[k]));
            else if (sd > 0)
                c->scale[k] = sd;
            m2[k] = 0;
            v2[k] = sd > 0 ? 1 : 0;
        }
    } else {
        for (int k = 0; k < p; k++) {
            m2[k] = mean[k];
            v2[k] = var[k];
        }
    }
    double rms = 0;
    for (int k = 0; k < p; k++)
        rms += v2[k] / p;
    rms = sqrt(rms);
    /* the rows' typical neighbour distance (N points filling a box of side ~ spread) and the
     * data's diameter, in the units the solver sees */
    double dnn = rms * sqrt((double)p) * pow(n_ref, -1.0 / p), diam = 4 * rms * sqrt((double)p);
    if (!rc && c->pre_auto && rms > 0) {
        /* solver units: standardised, then scaled so the typical neighbour distance is 0.5.
         * The grid's atom weights h^p dw (and so the complexity against the slack cost) are
         * not scale-free: they change by a^(p+1) when x changes by a; fixing the data's
         * neighbour distance makes the trade-off the same whatever the units of the input
         * (E3.1 in its own units has a neighbour distance of 0.57) */
        double f = 0.5 / dnn;
        for (int k = 0; k < p; k++) {
            if (v2[k] > 0)
                c->scale[k] /= f;
            v2[k] *= f * f;
        }
        rms *= f;
        dnn = 0.5;
        diam *= f;
    }
    if (!rc && !(rms > 0))
        rc = fk_err_set(err, FK_EINVAL, "sfl: every feature is constant over the federation's "
                                        "%.0f rows (zero spread); there is nothing to learn",
                        n_ref);
    if (!rc && c->w_auto) {
        c->wmin = dnn;
        c->wmax = fmax(dnn, fmin(5 * dnn, diam / 2));
    } else if (!rc && c->wmax < dnn / 20) {
        rc = fk_err_set(err, FK_EINVAL,
                        "sfl: width_max = %g is %.2g of the rows' typical neighbour distance %.3g "
                        "(rms feature spread %.3g after the preprocessing, p = %d, %.0f rows, "
                        "federated): every row would get its own kernel and the model would be "
                        "trivial; set width_min / width_max near %.3g (or unset them: widths "
                        "then follow the data), or x_scale",
                        c->wmax, c->wmax / dnn, dnn, rms, p, n_ref, dnn);
    } else if (!rc && c->wmin > 20 * diam) {
        rc = fk_err_set(err, FK_EINVAL,
                        "sfl: width_min = %g is %.2g times the data's diameter %.3g (rms feature "
                        "spread %.3g after the preprocessing, p = %d, federated): every kernel "
                        "would be flat over the data; set width_min / width_max near %.3g (or "
                        "unset them), or x_scale",
                        c->wmin, c->wmin / diam, diam, rms, p, dnn);
    }
    if (!rc && c->atoms == FK__SFL_AT_AUTO) {
        c->atoms = p <= FK_SFL_GRID_MAX_P ? FK__SFL_AT_GRID : FK__SFL_AT_CAND;
        c->grid = c->atoms == FK__SFL_AT_GRID;
    }
    if (!rc && c->grid && p > FK_SFL_GRID_MAX_P)
        rc = fk_err_set(err, FK_EINVAL, "sfl: atoms = grid needs p <= %d features (the data have "
                                        "%d); use atoms = candidates or auto",
                        FK_SFL_GRID_MAX_P, p);
    if (!rc && c->grid && c->box_auto) { /* mean +- 2 sd, widened by the widest kernel */
        free(c->box_lo);
        free(c->box_hi);
        c->box_lo = malloc((size_t)p * sizeof *c->box_lo);
        c->box_hi = malloc((size_t)p * sizeof *c->box_hi);
        if (!c->box_lo || !c->box_hi)
            rc = fk_err_set(err, FK_ENOMEM, "sfl: out of memory");
        for (int k = 0; !rc && k < p; k++) {
            c->box_lo[k] = m2[k] - 2 * sqrt(v2[k]) - c->wmax;
            c->box_hi[k] = m2[k] + 2 * sqrt(v2[k]) + c->wmax;
        }
        c->box_p = p;
    }
    if (!rc && c->grid && c->h_auto) { /* h = w_min / 2, coarser when the grid would exceed
                                        * 2048 centres */
        double side = 0, nside = floor(pow(2048.0, 1.0 / p) + 1e-9);
        for (int k = 0; k < p; k++)
            side = fmax(side, c->box_hi[c->box_p > 1 ? k : 0] - c->box_lo[c->box_p > 1 ? k : 0]);
        c->h = fmax(c->wmin / 2, side / (nside - 1));
    }
    free(m2);
    free(v2);
    return rc;
}

int fk__sfl_solve(const double *X, const double *y, size_t n, int p, const fk_sfl_atoms *a,
                  const fk_sfl_opts *o, const double *lam0, fk_sfl_fit *fit, fk_err *err)
{
    if (!lam0 || (o->gamma <= 0 && o->gamma_rel <= 0))
        return fk_sfl_solve(X, y, n, p, a, o, lam0, fit, err);
    fk_sfl_opts o0 = *o; /* warm start: gamma = 0 pass from lam0, then gamma from it */
    o0.gamma = 0;
    o0.gamma_rel = 0;
    fk_sfl_fit f0;
    int rc = fk_sfl_solve(X, y, n, p, a, &o0, lam0, &f0, err);
    if (rc || f0.status == FK_SFL_INFEASIBLE) {
        if (!rc)
            *fit = f0;
        return rc;
    }
    rc = fk_sfl_solve(X, y, n, p, a, o, f0.lambda, fit, err);
    if (!rc)
        fit->iters += f0.iters;
    fk_sfl_fit_close(&f0);
    return rc;
}
