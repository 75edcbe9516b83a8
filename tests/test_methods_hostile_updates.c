/* Every job type's check_update against hostile updates (issue 33, rows 3 and 6), through
 * fk_sim_run with a wrapped operations table:
 *  - an extra tensor is refused, by name (nothing unasked-for reaches a model);
 *  - 1e300 or NaN in any entry of any tensor is refused, naming the tensor
 *    (FK_UPDATE_MAX_ABS and finiteness, through the shared helpers);
 *  - no data value reaches a message or a log line: sentinel values planted in every tensor
 *    of client 0's uploads (checked alone, and aggregated when the check takes them) never
 *    show in a refusal, an aggregate's or a client's error, or anything logged on stderr.
 * sfl takes part in all three. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/data/synth_spec.h"
#include "common/methods/method.h"
#include "common/methods/sim.h"

enum { K = 4 };

/* The values planted: a huge one within FK_UPDATE_MAX_ABS, one in (0, 1) (passes weight
 * and probability checks), a negative one, an integer (passes count checks), one beyond
 * every bound. */
static const double sentinels[] = {7.2512e+77, 0.86420137, -31415.92, 8642013.0, 1.2345e+300};
enum { N_SENTINELS = sizeof sentinels / sizeof *sentinels };

/* What the wrapped table sees and collects. */
static const fk_method *real;
static void *cli0;     /* client 0's state: its uploads are the hostile ones */
static int plant = -1; /* local_step: tensor index (mod count) of client 0's upload to plant */
static double plant_value;
static int add_extra;          /* local_step: client 0's uploads carry an extra tensor 'zz_extra' */
static const char *scale_name; /* local_step: client 0's tensor of this name times scale_by */
static double scale_by;
static int probe;    /* check_update: probe client 0's updates (extra, 1e300, NaN, values) */
static int probed;   /* updates of client 0 probed */
static int problems; /* findings, each printed; a test fails when it has any */
static char *text;   /* every message seen, one a line */
static size_t text_len, text_cap;

#define PROBLEM(...)                                                                               \
    do {                                                                                           \
        print_message("PROBLEM: " __VA_ARGS__);                                                    \
        problems++;                                                                                \
    } while (0)

static void collect(const char *s)
{
    size_t l = strlen(s);
    if (text_len + l + 2 > text_cap) {
        text_cap = 2 * (text_len + l + 2);
        text = realloc(text, text_cap);
        assert_non_null(text);
    }
    memcpy(text + text_len, s, l);
    text_len += l;
    text[text_len++] = '\n';
    text[text_len] = '\0';
}

static int w_client_init(void **cli, const fk_params *p, const fk_dataset *d, int idx, int n,
                         uint64_t seed, fk_err *err)
{
    int rc = real->client_init(cli, p, d, idx, n, seed, err);
    if (rc == FK_OK && idx == 0)
        cli0 = *cli;
    return rc;
}

static int w_local_step(void *cli, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                        fk_err *err)
{
    int rc = real->local_step(cli, task, up, rep, err);
    if (rc) {
        collect(err->msg);
        return rc;
    }
    if (cli == cli0 && add_extra && fk_bundle_put_scalar(up, "zz_extra", 1.0))
        return fk_err_set(err, FK_ENOMEM, "test: out of memory");
    fk_tensor *sc = cli == cli0 && scale_name ? (fk_tensor *)fk_bundle_get(up, scale_name) : NULL;
    for (size_t i = 0; sc && i < sc->len; i++)
        sc->data[i] *= scale_by;
    if (cli == cli0 && plant >= 0 && up->count) {
        fk_tensor *t = &up->items[(size_t)plant % up->count];
        if (t->len) {
            t->data[0] = plant_value;
            t->data[t->len - 1] = plant_value;
        }
    }
    return rc;
}

static int real_check(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    return real->check_update ? real->check_update(srv, round, phase, up, err) : FK_OK;
}

/* up with tensor i's entry at `at` set to v (i < 0: with an extra tensor 'zz_extra'). */
static int check_changed(void *srv, int round, int phase, const fk_update *up, int i, size_t at,
                         double v, fk_err *err)
{
    fk_update u = *up;
    assert_int_equal(fk_bundle_copy(&u.msg, &up->msg), FK_OK);
    if (i < 0)
        assert_int_equal(fk_bundle_put_scalar(&u.msg, "zz_extra", 1.0), FK_OK);
    else
        u.msg.items[i].data[at] = v;
    int rc = real_check(srv, round, phase, &u, err);
    fk_bundle_close(&u.msg);
    return rc;
}

static void probe_update(void *srv, int round, int phase, const fk_update *up)
{
    fk_err err;
    if (check_changed(srv, round, phase, up, -1, 0, 0, &err) == FK_OK)
        PROBLEM("%s round %d phase %d: an extra tensor 'zz_extra' was taken\n", real->name, round,
                phase);
    else if (!strstr(err.msg, "zz_extra"))
        PROBLEM("%s: the refusal of an extra tensor does not name it: %s\n", real->name, err.msg);
    collect(err.msg);
    for (size_t i = 0; i < up->msg.count; i++) {
        const fk_tensor *t = &up->msg.items[i];
        for (size_t at = 0; at<t->len; at += t->len> 1 ? t->len - 1 : 1) {
            for (int bad = 0; bad < 2; bad++) {
                if (check_changed(srv, round, phase, up, (int)i, at, bad ? NAN : 1e300, &err) ==
                    FK_OK)
                    PROBLEM("%s round %d phase %d: %s in tensor '%s' at %zu was taken\n",
                            real->name, round, phase, bad ? "NaN" : "1e300", t->name, at);
                else if (!strstr(err.msg, t->name))
                    PROBLEM("%s: the refusal of %s in '%s' does not name the tensor: %s\n",
                            real->name, bad ? "NaN" : "1e300", t->name, err.msg);
                collect(err.msg);
            }
            for (int s = 0; s < N_SENTINELS; s++)
                if (check_changed(srv, round, phase, up, (int)i, at, sentinels[s], &err))
                    collect(err.msg);
        }
    }
}

static int w_check(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    if (probe && up->client == 0) {
        probe_update(srv, round, phase, up);
        probed++;
    }
    int rc = real_check(srv, round, phase, up, err);
    if (rc)
        collect(err->msg);
    return rc;
}

static int w_aggregate(void *srv, int round, int phase, const fk_update *ups, int n, int *done,
                       fk_err *err)
{
    int rc = real->aggregate(srv, round, phase, ups, n, done, err);
    if (rc)
        collect(err->msg);
    return rc;
}

/* One job type with its data: params and K clients. */
typedef struct job {
    const char *method;
    const char *keys; /* INI text */
    const char *data; /* synthetic spec with %d for the client, or NULL: the method's sim_data */
    int rounds;
} job;

static const job jobs[] = {
    {"fedrf-tca", "N = 10\nm = 3\nhidden = 8\nbatch = 16\ntc = 1\nclasses = 3\n",
     "synthetic/shift:client=%d,sources=3,samples=30,dims=4,classes=3", 2},
    {"fedgrem", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"fedem", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"local-em", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"local-grem", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"tgmm", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"pooled-grem", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 2},
    {"pooled-em", "R = 2\nrestarts = 2\n", "synthetic/gmm:client=%d,tasks=4,samples=40", 3},
    {"fedgrem-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"fedem-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"local-em-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"local-grem-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"pooled-grem-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"pooled-em-mor", "R = 2\nrestarts = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 3},
    {"fedgmm-mor", "R = 2\nrestarts = 2\nfedgmm_R1 = 2\n",
     "synthetic/mor:client=%d,tasks=4,samples=40,dims=2,components=2", 2},
    {"kahm", "classes = 4\n", NULL, 1},
    {"kahm", "classes = 4\nupload_models = 1\nlocal.allow_model_upload = 1\n", NULL, 1},
    {"dica", "R = 20\nholdout = last\n", NULL, 1},
    {"udica", "R = 20\nholdout = last\n", NULL, 1},
    {"sfl", "raw_sample_upload = acknowledged\nlocal.allow_raw_upload = 1\nsim_n = 30\n", NULL, 1},
};
enum { N_JOBS = sizeof jobs / sizeof *jobs };

static void setup_job(const job *j, fk_params *p, fk_dataset *ds)
{
    fk_err err;
    real = fk_method_find(j->method, &err);
    assert_non_null(real);
    fk_params_init(p);
    assert_int_equal(fk_params_parse_ini(p, j->keys, "job", &err), FK_OK);
    memset(ds, 0, K * sizeof *ds);
    for (int c = 0; c < K && j->data; c++) {
        char spec[160];
        snprintf(spec, sizeof spec, j->data, c);
        if (fk_synth_spec_load(&ds[c], spec, &err))
            fail_msg("%s: %s", spec, err.msg);
    }
    if (!j->data && real->sim_data(p, K, 1, ds, NULL, &err))
        fail_msg("%s: %s", j->method, err.msg);
}

static void close_job(fk_params *p, fk_dataset *ds)
{
    for (int c = 0; c < K; c++)
        fk_dataset_close(&ds[c]);
    fk_params_close(p);
}

/* Run the job through the wrapped table; the run's own error (if any) is collected. Returns
 * the last round's summary; with add_extra, a model holding the extra tensor is a problem. */
static fk_sim_round run(const job *j, const fk_params *p, const fk_dataset *ds)
{
    fk_method w = *real;
    w.client_init = w_client_init;
    w.local_step = w_local_step;
    w.check_update = w_check;
    w.aggregate = w_aggregate;
    cli0 = NULL;
    fk_sim_opts o = {.rounds = j->rounds, .seed = 1};
    fk_sim_round last = {0};
    fk_bundle model;
    fk_bundle_init(&model);
    fk_err err;
    if (fk_sim_run(&w, p, ds, K, &o, &model, &last, &err))
        collect(err.msg);
    for (size_t i = 0; add_extra && i < model.count; i++)
        if (strstr(model.items[i].name, "zz_extra"))
            PROBLEM("%s: the extra tensor reached the model as '%s'\n", j->method,
                    model.items[i].name);
    fk_bundle_close(&model);
    return last;
}

/* Rows 6: extra tensors, 1e300 and NaN refused by every job type, naming the tensor. */
static void bounds_and_extra_tensors_refused(void **state)
{
    (void)state;
    for (int i = 0; i < N_JOBS; i++) {
        fk_params p;
        fk_dataset ds[K];
        setup_job(&jobs[i], &p, ds);
        probe = 1;
        probed = 0;
        plant = -1;
        run(&jobs[i], &p, ds);
        probe = 0;
        add_extra = 1; /* and all the way: never in a model */
        run(&jobs[i], &p, ds);
        add_extra = 0;
        if (probed == 0)
            PROBLEM("%s: no update of client 0 was checked: %s\n", jobs[i].method,
                    text ? text : "");
        close_job(&p, ds);
        text_len = 0;
    }
    assert_int_equal(problems, 0);
}

/* The textual forms a value could take in a message. */
static int shows(const char *hay, double v, char *form, size_t cap)
{
    static const char *const fmts[] = {"%g",    "%.3g",  "%.4g",  "%.5g", "%.6g", "%.8g", "%.10g",
                                       "%.12g", "%.15g", "%.17g", "%e",   "%.3e", "%f",   "%.2f"};
    for (size_t f = 0; f < sizeof fmts / sizeof *fmts; f++) {
        snprintf(form, cap, fmts[f], v);
        if (strlen(form) >= 6 && strstr(hay, form))
            return 1;
    }
    return 0;
}

/* Row 3: no planted value in any message or log line, for every job type. */
static void no_values_in_messages_or_logs(void **state)
{
    (void)state;
    fflush(stderr);
    char path[] = "/tmp/fk_hostile_log_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    int level = fk_log_level();
    fk_log_set_level(FK_LOG_DEBUG);
    int runs = 0;
    for (int i = 0; i < N_JOBS; i++) {
        fk_params p;
        fk_dataset ds[K];
        setup_job(&jobs[i], &p, ds);
        probe = 1; /* the sentinels checked alone, entry by entry */
        plant = -1;
        run(&jobs[i], &p, ds);
        probe = 0;
        for (int t = 0; t < 8; t++) /* and planted: checked, and aggregated if taken */
            for (int s = 0; s < N_SENTINELS; s++) {
                plant = t;
                plant_value = sentinels[s];
                run(&jobs[i], &p, ds);
                runs++;
            }
        plant = -1;
        close_job(&p, ds);
    }
    fk_log_set_level(level);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    while (fgets(line, sizeof line, f))
        collect(line);
    fclose(f);
    unlink(path);
    assert_true(runs > 0 && text_len > 0);
    /* every line that shows a planted value, once */
    problems = 0;
    char form[64];
    for (char *ln = text, *end; *ln; ln = end + 1) {
        end = strchr(ln, '\n');
        *end = '\0';
        int hit = strstr(ln, "1e+300") != NULL;
        for (int s = 0; s < N_SENTINELS && !hit; s++)
            hit = shows(ln, sentinels[s], form, sizeof form);
        if (hit)
            PROBLEM("a planted value shows in: %.300s\n", ln);
        *end = '\n';
    }
    assert_int_equal(problems, 0);
}

/* Row 6, dica's own plausibility: statistics scaled by s stay inside FK_UPDATE_MAX_ABS
 * (x 1e90) or even look ordinary (x 1.01), yet no data of the client's count gives them:
 * refused, so the client is a dropout and the model is the one without it. */
static void dica_statistics_scale_refused(void **state)
{
    (void)state;
    static const job dica = {"dica", "R = 20\nholdout = last\n", NULL, 1};
    static const char *const names[] = {"S_phiphi_c", "dom_sum",    "C_phipsi_c",
                                        "C_phipsi",   "S_psipsi_c", "s_psi"};
    static const double scales[] = {1e90, 1.01};
    fk_params p;
    fk_dataset ds[K];
    setup_job(&dica, &p, ds);
    fk_sim_round honest = run(&dica, &p, ds);
    /* the same clients without client 0's statistics: what a refusal must give */
    scale_name = "S_phiphi_c";
    scale_by = NAN;
    fk_sim_round without = run(&dica, &p, ds);
    print_message("dica: accuracy %.3f honest, %.3f without client 0 (%d refused)\n",
                  honest.accuracy, without.accuracy, without.refused);
    assert_int_equal(honest.refused, 0);
    assert_int_equal(without.refused, 1);
    for (size_t n = 0; n < sizeof names / sizeof *names; n++)
        for (size_t k = 0; k < sizeof scales / sizeof *scales; k++) {
            scale_name = names[n];
            scale_by = scales[k];
            fk_sim_round r = run(&dica, &p, ds);
            print_message("dica: %s x %g: accuracy %.3f, %d refused\n", names[n], scales[k],
                          r.accuracy, r.refused);
            if (r.refused != 1 || r.accuracy != without.accuracy)
                PROBLEM("dica: %s x %g was taken (accuracy %.3f, %d refused)\n", names[n],
                        scales[k], r.accuracy, r.refused);
        }
    scale_name = NULL;
    close_job(&p, ds);
    assert_int_equal(problems, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bounds_and_extra_tensors_refused),
        cmocka_unit_test(no_values_in_messages_or_logs),
        cmocka_unit_test(dica_statistics_scale_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(text);
    return rc;
}
