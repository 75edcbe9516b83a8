/* Fuzz target: hostile updates on the server's aggregate path, for every job type. A small
 * job runs through the real round engine (in-memory store, wire codec) with in-process
 * clients; client 1's update at one (round, phase) is replaced by a hostile one, and the job
 * must still end done: the update is refused before commit (a dropout), or its aggregation
 * error excludes the client, or the round is retried. A job that fails because of it aborts.
 *
 * Input: byte 0 picks the job type (fk_methods order), byte 1 the strike (round 1 + b % 3,
 * phase b / 3 % 3), byte 2 the hostility: 0 = the rest of the input decoded as a Bundle (an
 * undecodable one is a lost update), 1 NaN, 2 a tensor one row longer, 3 a tensor left out,
 * 4 an extra tensor, 5 +1e300, 6 -1e300, 7 +Inf, 8 everything scaled by 1e90, 9 no tensors,
 * 10 all zeros, 11 negated, 12 a NaN loss in the report, 13 every tensor a 4-vector of NaN,
 * 14 every tensor reshaped and salted from the input (each dim -1, 0 or +1; values replaced by
 * NaN, +-Inf, +-1e300, 1e99, 0 or kept); for 1-13 the following bytes pick which tensor and
 * value. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/data/synth_gmm.h"
#include "common/data/synth_mor.h"
#include "common/data/synth_shift.h"
#include "common/net/codec.h"
#include "server/engine.h"

enum { K = 4 };

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

/* The job keys of a family; data: 0 GMM, 1 MoR, 2 domain shift, 3 and up the job type's own
 * built-in data (sim_data, made from the same keys). */
static const char *family(const char *name, int *data)
{
    if (!strcmp(name, "dica") || !strcmp(name, "udica")) {
        *data = !strcmp(name, "dica") ? 3 : 4;
        return "R = 20\nclasses = 3\n";
    }
    if (!strcmp(name, "kahm")) {
        *data = 5;
        return "classes = 10\nholdout = 0.2\n";
    }
    if (!strcmp(name, "sfl")) {
        *data = 6;
        /* the clients' consent (local.allow_raw_upload) is added as their daemons would */
        return "raw_sample_upload = acknowledged\n";
    }
    if (!strcmp(name, "fedrf-tca")) {
        *data = 2;
        return "N = 20\nm = 4\nhidden = 8\nbatch = 16\ntc = 1\nclasses = 3\nrounds = 3\n"
               "participation = all\n";
    }
    *data = strstr(name, "mor") ? 1 : 0;
    if (!strcmp(name, "fedgmm-mor"))
        return "R = 2\nrestarts = 2\nalign_B = 3\nfedgmm_R1 = 2\nrounds = 3\n";
    if (strstr(name, "pooled-em"))
        return "R = 2\nrestarts = 2\nrounds = 8\n";
    return "R = 2\nrestarts = 2\nalign_B = 3\nrounds = 3\n";
}

enum { N_DATA = 7 };
static fk_dataset data[N_DATA][K];

/* data[d]: the built-in clients of job type name, from its keys (family). */
static void builtin_data(const char *name)
{
    int d;
    const char *keys = family(name, &d);
    const fk_method *m = NULL;
    for (int i = 0; fk_methods[i] && !m; i++)
        m = strcmp(fk_methods[i]->name, name) ? NULL : fk_methods[i];
    fk_params p;
    fk_params_init(&p);
    fk_err err;
    if (!m || !m->sim_data || fk_params_parse_ini(&p, keys, "fuzz keys", &err) ||
        m->sim_data(&p, K, 5, data[d], NULL, &err))
        abort();
    fk_params_close(&p);
}

static void make_data(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    fk_err err;
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.K = K, o.R = 2, o.p = 3, o.n = 40, o.n_outlier = 0;
    double theta[K * 2 * 3], w[K * 2];
    fk_mor_data md;
    fk_synth_opts so;
    fk_synth_defaults(&so);
    so.n_sources = K - 1, so.n_per_domain = 40, so.d = 6, so.n_classes = 3, so.seed = 5;
    if (fk_synth_gmm_make(&o, 5, data[0], theta, w, &err) ||
        fk_mor_make(K, 2, 2, 60, 0, 0.0, -3.0, 5, &md, &err) || fk_synth_shift(&so, data[2], &err))
        abort();
    for (int c = 0; c < K; c++)
        if (fk_mor_task_dataset(&md, c, &data[1][c], &err))
            abort();
    fk_mor_data_close(&md);
    builtin_data("dica");
    builtin_data("udica");
    builtin_data("kahm");
    builtin_data("sfl");
}

typedef struct run {
    const uint8_t *in;
    size_t len;
    const fk_method *m;
    int round, phase, kind;
    int d;
    fk_engine *e;
    fk_jobconf conf;
    int have_conf;
    void *cli[K];
    char lost[K][96]; /* per client: the task it gave up or answered (not done twice) */
    double now;
} run;

static uint8_t byte(const run *r, size_t i)
{
    return i < r->len ? r->in[i] : 0;
}

/* Every tensor of up with a shape and values drawn from the input after byte 2. */
static void salt(run *r, fk_bundle *up)
{
    static const double special[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 1e99, 0.0};
    size_t at = 3;
    fk_bundle out;
    fk_bundle_init(&out);
    for (size_t i = 0; i < up->count; i++) {
        const fk_tensor *s = &up->items[i];
        uint64_t shape[FK_TENSOR_MAX_DIMS];
        memcpy(shape, s->shape, sizeof shape);
        for (int d = 0; d < s->ndim; d++) {
            int delta = byte(r, at++) % 3 - 1;
            if (delta < 0 && shape[d] > 1)
                shape[d]--;
            else if (delta > 0)
                shape[d]++;
        }
        double *d = fk_bundle_add(&out, s->name, s->ndim, shape);
        if (!d)
            abort();
        size_t n = 1;
        for (int k = 0; k < s->ndim; k++)
            n *= shape[k];
        for (size_t k = 0; k < n; k++) {
            uint8_t b = byte(r, at + k % 64);
            d[k] = b < 16 ? special[b % 7] : k < s->len ? s->data[k] : (double)b;
        }
        at += 64;
    }
    fk_bundle_close(up);
    *up = out;
}

/* Client 1's update made hostile as byte 2 says (bundle and report in place). */
static void spoil(run *r, fk_bundle *up, fk_report *rep)
{
    int kind = r->kind;
    if (kind == 0) {
        fk_bundle_clear(up);
        fk_err err;
        if (r->len > 3 && codec.decode(r->in + 3, r->len - 3, up, &err))
            fk_bundle_clear(up); /* half-decoded: send nothing rather than a half */
        return;
    }
    if (kind == 12) {
        rep->loss = NAN;
        return;
    }
    if (kind == 14) {
        salt(r, up);
        return;
    }
    if (kind == 9 || !up->count) {
        fk_bundle_clear(up);
        return;
    }
    size_t ti = byte(r, 3) % up->count;
    fk_tensor *t = &up->items[ti];
    size_t vi = t->len ? byte(r, 4) % t->len : 0;
    fk_bundle out;
    fk_bundle_init(&out);
    for (size_t i = 0; i < up->count; i++) {
        const fk_tensor *s = &up->items[i];
        if (kind == 3 && i == ti)
            continue;
        if (kind == 13) {
            const double x[4] = {NAN, NAN, NAN, NAN};
            if (fk_bundle_put_vec(&out, s->name, 4, x) != FK_OK)
                abort(); /* out of memory: not what this target looks for */
            continue;
        }
        uint64_t shape[FK_TENSOR_MAX_DIMS];
        memcpy(shape, s->shape, sizeof shape);
        int nd = s->ndim;
        if (kind == 2 && i == ti) {
            if (!nd)
                nd = 1, shape[0] = 2;
            else
                shape[0]++;
        }
        double *d = fk_bundle_add(&out, s->name, nd, shape);
        if (!d)
            abort();
        memcpy(d, s->data, s->len * sizeof *d);
        for (size_t k = 0; k < s->len; k++)
            d[k] = kind == 8 ? d[k] * 1e90 : kind == 10 ? 0.0 : kind == 11 ? -d[k] : d[k];
    }
    if (kind == 4) {
        const double x[4] = {NAN, NAN, NAN, NAN};
        if (fk_bundle_put_vec(&out, "x", 4, x) != FK_OK)
            abort();
    }
    fk_tensor *o = (fk_tensor *)fk_bundle_get(&out, t->name);
    if (o && o->len && vi < o->len)
        o->data[vi] = kind == 1 ? NAN : kind == 5 ? 1e300 : kind == 6 ? -1e300
                    : kind == 7 ? INFINITY : o->data[vi];
    fk_bundle_close(up);
    *up = out;
}

/* Client c answers its waiting task: 1 if it did something. */
static int answer(run *r, int c)
{
    char id[8];
    snprintf(id, sizeof id, "c%d", c);
    fk_task_ref t;
    fk_err err;
    if (fk_engine_pull(r->e, id, r->now, &t, &err) != FK_OK || !strcmp(t.idem, r->lost[c]))
        return 0;
    if (!r->have_conf) {
        if (fk_jobconf_parse(&r->conf, t.config, "task", &err))
            abort();
        r->have_conf = 1;
        /* a client daemon copies its own [local] consents in (a job cannot set them) */
        if (!strcmp(r->m->name, "sfl") &&
            fk_params_set(&r->conf.params, "local.allow_raw_upload", "true"))
            abort();
    }
    if (!r->cli[c] && r->m->client_init(&r->cli[c], &r->conf.params, &data[r->d][c], t.client,
                                         t.n_clients, t.seed, &err))
        abort(); /* honest data: every client starts */
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    fk_report rep;
    fk_report_init(&rep);
    int rc = codec.decode(t.task, t.task_len, &task, &err);
    if (!rc)
        rc = r->m->local_step(r->cli[c], &task, &up, &rep, &err);
    fk_push p = {.job = t.job, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                 .identity = id, .idem = t.idem};
    snprintf(r->lost[c], sizeof r->lost[c], "%s", t.idem);
    if (rc) { /* a client that cannot step reports it, as the daemon's client does */
        if (fk_engine_fail(r->e, &p, err.msg, r->now, &err) != FK_OK) {
            /* refused or not, go on: the job's fate is what this target checks */
        }
    } else {
        if (c == 1 && t.round == r->round && t.phase == r->phase && t.attempt == 0)
            spoil(r, &up, &rep);
        uint8_t *blob = NULL;
        size_t len = 0;
        if (codec.encode(&up, &blob, &len, &err) == FK_OK) {
            p.blob = blob, p.len = len, p.report = rep;
            int dup;
            if (fk_engine_push(r->e, &p, r->now, &dup, &err) != FK_OK) {
                /* refused or not, go on: the job's fate is what this target checks */
            }
        }
        free(blob);
    }
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    fk_log_set_level(-1);
    make_data();
    int n_methods = 0;
    while (fk_methods[n_methods])
        n_methods++;
    run r = {.in = in, .len = len, .now = 1000.0};
    r.m = fk_methods[byte(&r, 0) % n_methods];
    r.round = 1 + byte(&r, 1) % 3;
    r.phase = byte(&r, 1) / 3 % 3;
    r.kind = byte(&r, 2) % 15;
    char text[1024];
    const char *keys = family(r.m->name, &r.d);
    snprintf(text, sizeof text,
             "method = %s\ndataset = synth\nclients = c0, c1, c2, c3\nseed = 3\ndeadline = 30\n"
             "quorum = 0.5\n%s",
             r.m->name, keys);
    fk_store *st;
    fk_err err;
    if (fk_store_open(&st, ":memory:", &err))
        abort();
    fk_engine_opts o = {.store = st, .codec = codec};
    int64_t id;
    if (fk_engine_open(&r.e, &o, r.now, &err) || fk_engine_submit(r.e, text, r.now, &id, &err)) {
        fprintf(stderr, "%s: the job cannot start: %s\n", r.m->name, err.msg);
        abort();
    }
    for (int guard = 0; fk_engine_running(r.e) > 0; guard++) {
        if (guard > 5000)
            abort(); /* a job that never ends */
        int progress = 0;
        for (int k = 0; k < K; k++)
            progress += answer(&r, (k + 1) % K);
        r.now += 0.5;
        double next;
        if (fk_engine_tick(r.e, r.now, &next, &err) != FK_OK)
            next = NAN; /* a failed tick shows in the job's state below */
        if (!progress && isfinite(next) && next > r.now)
            r.now = next;
    }
    fk_job_status s;
    if (fk_engine_status(r.e, id, &s, &err))
        abort();
    if (s.state != FK_JOB_DONE) {
        fprintf(stderr, "%s, client 1 hostile (kind %d) at round %d phase %d: job %s: %s\n",
                r.m->name, r.kind, r.round, r.phase, fk_job_state_name(s.state), s.failure);
        abort();
    }
    for (int c = 0; c < K; c++)
        if (r.cli[c])
            r.m->client_close(r.cli[c]);
    if (r.have_conf)
        fk_jobconf_close(&r.conf);
    fk_engine_close(r.e);
    fk_store_close(st);
    return 0;
}
