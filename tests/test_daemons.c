/* Multi-process integration on 127.0.0.1 with the real programs: one
 * fedkern-server, six fedkern-client daemons, jobs submitted and fetched with
 * `fedkern job`, FedGrEM on generated mixture data (CSV files, one per client).
 * Checks: the daemon run gives bit for bit the model of the in-process
 * simulator; kill -9 of the server mid-job and a restart give the same model;
 * a client killed mid-job is a dropout at the deadline and the job completes.
 * Usage (meson passes these): test_daemons SERVER CLIENT FEDKERN */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/params.h"
#include "common/data/load.h"
#include "common/data/prep_model.h"
#include "common/data/synth_spec.h"
#include "common/la/blas_core.h"
#include "common/la/rng.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/la/blas_threads.h"
#include "common/methods/sim.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "tests/bundle_assert.h"

enum { K = 6 };

static const char *server_bin, *client_bin, *fedkern_bin;

typedef struct env {
    char dir[64];
    char pki[96];
    char db[128];
    char port[16];
    char metrics_port[16];
    pid_t server;
    pid_t clients[K];
    int state_dirs;           /* clients keep their state in DIR/cs<c> (--state_dir) */
    const char *server_extra; /* one more "--key=value" option for the server, or NULL */
} env;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Run to completion; stdout into out (may be NULL). Returns the exit status. */
static int run_cmd(char *const argv[], char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    char sink[256];
    while ((r = read(fds[0], out && len + 1 < cap ? out + len : sink,
                     out && len + 1 < cap ? cap - len - 1 : sizeof sink)) > 0)
        if (out && len + 1 < cap)
            len += (size_t)r;
    close(fds[0]);
    if (out)
        out[len] = '\0';
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run to completion with stdout and stderr into out. Returns the exit status. */
static int run_cmd_all(char *const argv[], char *out, size_t cap)
{
    char path[] = "/tmp/fk-daemons-out-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Wait until the file contains `needle`; copy the rest of that line to tail. */
static int wait_log(const char *path, const char *needle, double seconds, char *tail, size_t cap)
{
    double until = now_s() + seconds;
    char buf[1 << 16];
    while (now_s() < until) {
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            char *hit = strstr(buf, needle);
            if (hit) {
                if (tail) {
                    hit += strlen(needle);
                    size_t l = strcspn(hit, " \n");
                    snprintf(tail, cap, "%.*s", (int)l, hit);
                }
                return 1;
            }
        }
        usleep(20000);
    }
    return 0;
}

/* Value of `key` (up to a space) on the first line of path containing `event`. */
static int line_value(const char *path, const char *event, const char *key, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *k = strstr(line, event) ? strstr(line, key) : NULL;
        if (k) {
            k += strlen(key);
            snprintf(out, cap, "%.*s", (int)strcspn(k, " \n"), k);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* GET /metrics from the server's metrics listener into out. */
static int scrape(const char *port, char *out, size_t cap)
{
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import sys,urllib.request;"
                    "sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:'+sys.argv[1]+"
                    "'/metrics',timeout=5).read().decode())",
                    (char *)port, NULL};
    return run_cmd(argv, out, cap);
}

/* GET /healthz from the server's metrics listener: "CODE BODY" into out. */
static int healthz(const char *port, char *out, size_t cap)
{
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import sys,urllib.request,urllib.error\n"
                    "try:\n"
                    " r=urllib.request.urlopen('http://127.0.0.1:'+sys.argv[1]+'/healthz',timeout=5)\n"
                    " sys.stdout.write(str(r.status)+' '+r.read().decode())\n"
                    "except urllib.error.HTTPError as e:\n"
                    " sys.stdout.write(str(e.code)+' '+e.read().decode())\n",
                    (char *)port, NULL};
    return run_cmd(argv, out, cap);
}

static void write_data(env *e)
{
    fk_rng r;
    fk_rng_init(&r, 99, 0);
    static const double centers[3][3] = {{0, 0, 0}, {4, 4, 0}, {0, 4, 4}};
    for (int c = 0; c < K; c++) {
        char path[160];
        snprintf(path, sizeof path, "%s/c%d.csv", e->dir, c);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < 50 + 7 * c; i++) {
            int k = (int)fk_rng_below(&r, 3);
            fprintf(f, "%d", k + 1);
            for (int j = 0; j < 3; j++)
                fprintf(f, ",%.6f", centers[k][j] + fk_rng_normal(&r) + 0.05 * c);
            fprintf(f, "\n");
        }
        fclose(f);
    }
}

/* Domain shift for FedRF-TCA: two classes in 4 dims, every client's domain
 * moved and scaled a little; the last client is the target. */
static void write_shift_data(env *e)
{
    fk_rng r;
    fk_rng_init(&r, 7, 1);
    for (int c = 0; c < K; c++) {
        char path[160];
        snprintf(path, sizeof path, "%s/d%d.csv", e->dir, c);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < 80; i++) {
            int k = (int)fk_rng_below(&r, 2);
            fprintf(f, "%d", k + 1);
            for (int j = 0; j < 4; j++)
                fprintf(f, ",%.6f",
                        (k ? 1.5 : -1.5) * (j < 2) + (0.8 + 0.1 * c) * fk_rng_normal(&r) + 0.3 * c);
            fprintf(f, "\n");
        }
        fclose(f);
    }
}

/* kahm serving: client c holds class c (its own) and class 6 (every client's), 3 dims. */
static void write_kahm_data(env *e)
{
    fk_rng r;
    fk_rng_init(&r, 5, 2);
    for (int c = 0; c < K; c++) {
        char path[160];
        snprintf(path, sizeof path, "%s/k%d.csv", e->dir, c);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < 60; i++) {
            int k = i % 2 ? 6 : c;
            fprintf(f, "%d", k);
            for (int j = 0; j < 3; j++)
                fprintf(f, ",%.6f", 0.25 * ((k >> j) & 1) + 0.08 * (k == 6) +
                                        0.06 * fk_rng_normal(&r));
            fprintf(f, "\n");
        }
        fclose(f);
    }
}

/* One class list per job (issue 32): raw labels 1, 2, 3 in 4 dims, small values (tanh's
 * range); client 1 lacks class 2 and client 2 holds a single row of class 0. */
static void write_lack_data(env *e)
{
    fk_rng r;
    fk_rng_init(&r, 13, 3);
    for (int c = 0; c < K; c++) {
        char path[160];
        snprintf(path, sizeof path, "%s/l%d.csv", e->dir, c);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < 72; i++) {
            int k = 1 + i % 3;
            if (c == 1 && k == 2)
                k = 3;
            if (c == 2 && i == 71)
                k = 0;
            fprintf(f, "%d", k);
            for (int j = 0; j < 4; j++)
                fprintf(f, ",%.6f",
                        0.3 * k * (j % 2 ? 1 : -1) + 0.1 * fk_rng_normal(&r) + 0.02 * c);
            fprintf(f, "\n");
        }
        fclose(f);
    }
}

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/fk-daemons-XXXXXX");
    if (!e || !mkdtemp(e->dir))
        return -1;
    snprintf(e->pki, sizeof e->pki, "%s/pki", e->dir);
    snprintf(e->db, sizeof e->db, "%s/state.db", e->dir);
    fk_err err;
    fk_cert_opts so = {.ips = "127.0.0.1"};
    if (fk_certs_init_ca(e->pki, NULL, NULL, &err) ||
        fk_certs_issue(e->pki, FK_ROLE_SERVER, "server", &so, &err) ||
        fk_certs_issue(e->pki, FK_ROLE_ADMIN, "op", NULL, &err))
        return -1;
    for (int c = 0; c < K; c++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", c);
        if (fk_certs_issue(e->pki, FK_ROLE_CLIENT, name, NULL, &err))
            return -1;
    }
    write_data(e);
    write_shift_data(e);
    write_kahm_data(e);
    write_lack_data(e);
    *state = e;
    return 0;
}

static void stop(pid_t *pid, int sig)
{
    if (*pid > 0) {
        kill(*pid, sig);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

static int teardown(void **state)
{
    env *e = *state;
    for (int c = 0; c < K; c++)
        stop(&e->clients[c], SIGTERM);
    stop(&e->server, SIGTERM);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
    if (getenv("FK_TEST_KEEP")) /* keep the daemons' logs (e.g. sanitizer reports) */
        fprintf(stderr, "kept %s\n", e->dir);
    else if (system(cmd))
        fprintf(stderr, "could not remove %s\n", e->dir);
    free(e);
    return 0;
}

static void start_server(env *e, const char *listen)
{
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    unlink(log);
    char *argv[] = {(char *)server_bin, "--listen", (char *)listen, "--tls_dir", e->pki,
                    "--state", e->db, "--heartbeat_ms", "500", "--drain_ms", "200",
                    "--metrics_listen", "127.0.0.1:0", (char *)e->server_extra, NULL};
    e->server = spawn(argv, log);
    char line[256];
    if (!wait_log(log, "event=server_ready ", 20, line, sizeof line))
        fail_msg("fedkern-server did not start; see %s", log);
    char port[16], mport[16];
    assert_true(wait_log(log, "event=server_ready listen=127.0.0.1:", 1, NULL, 0));
    assert_true(line_value(log, "event=server_ready", "port=", port, sizeof port));
    snprintf(e->port, sizeof e->port, "%s", port);
    assert_true(line_value(log, "event=metrics_listening", "port=", mport, sizeof mport));
    snprintf(e->metrics_port, sizeof e->metrics_port, "%s", mport);
}

/* Mixture-of-regressions clients hold built-in synthetic data (client index c). */
#define MOR_SPEC "synthetic/mor:client=%d,tasks=6,outliers=1,components=2,dims=3,samples=200,seed=5"

static void start_client(env *e, int c)
{
    char log[160], server[64], name[16], data[160];
    snprintf(log, sizeof log, "%s/client%d.log", e->dir, c);
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    snprintf(name, sizeof name, "c%d", c);
    snprintf(data, sizeof data, "%s/c%d.csv", e->dir, c);
    char shift[160], mor[160], kc[160], lack[160];
    snprintf(shift, sizeof shift, "%s/d%d.csv", e->dir, c);
    snprintf(kc, sizeof kc, "%s/k%d.csv", e->dir, c);
    snprintf(lack, sizeof lack, "%s/l%d.csv", e->dir, c);
    snprintf(mor, sizeof mor, MOR_SPEC, c);
    char sdir[160];
    snprintf(sdir, sizeof sdir, "%s/cs%d", e->dir, c);
    char *argv[32] = {(char *)client_bin, "--server", server, "--server_name", "server",
                      "--tls_dir", e->pki, "--name", name, "--data.gmm", data,
                      "--data.shift", shift, "--data.mor", mor, "--data.kc", kc,
                      "--data.lack", lack,
                      "--backoff_max_ms", "500",
                      /* even clients consent to model uploads (kahm mode A), odd ones do not */
                      "--local.allow_model_upload", c % 2 ? "0" : "1", NULL};
    int n = 0;
    while (argv[n])
        n++;
    if (!c) { /* client 0 serves metrics (off by default: the others do not) */
        argv[n++] = "--metrics_listen";
        argv[n++] = "127.0.0.1:0";
    }
    if (e->state_dirs) {
        argv[n++] = "--state_dir";
        argv[n++] = sdir;
    }
    argv[n] = NULL;
    e->clients[c] = spawn(argv, log);
}

static void wait_joined(env *e);

/* The server on a free port and the K clients, joined: the server refuses jobs naming clients
 * it has never seen. */
static void start_fleet(env *e)
{
    start_server(e, "127.0.0.1:0");
    for (int c = 0; c < K; c++)
        start_client(e, c);
    wait_joined(e);
}

static void wait_joined(env *e)
{
    for (int c = 0; c < K; c++) {
        char log[160];
        snprintf(log, sizeof log, "%s/client%d.log", e->dir, c);
        if (!wait_log(log, "event=joined ", 30, NULL, 0))
            fail_msg("client c%d did not join; see %s", c, log);
    }
}

static const char *job_text(const char *extra)
{
    static char text[512];
    snprintf(text, sizeof text,
             "method = fedgrem\ndataset = gmm\nclients = c0, c1, c2, c3, c4, c5\nseed = 11\n"
             "R = 3\n%s",
             extra);
    return text;
}

/* fedkern job ARGS... against the running server; stdout into out. */
/* ... with up to 4 more options (NULL-terminated list). */
static int job_cmd_v(env *e, const char *sub, const char *arg, const char *const *extra,
                     char *out, size_t cap)
{
    char server[64];
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    char *argv[18] = {(char *)fedkern_bin, "job", (char *)sub, (char *)arg, "--server", server,
                      "--server_name", "server", "--tls_dir", e->pki, "--name", "op"};
    int n = 12;
    for (int i = 0; extra && extra[i] && i < 4; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return run_cmd(argv, out, cap);
}

static int job_cmd(env *e, const char *sub, const char *arg, const char *extra1,
                   const char *extra2, char *out, size_t cap)
{
    const char *extra[3] = {extra1 ? extra1 : extra2, extra1 ? extra2 : NULL, NULL};
    return job_cmd_v(e, sub, arg, extra, out, cap);
}

static void submit(env *e, const char *text, char *id, size_t cap)
{
    char path[160];
    snprintf(path, sizeof path, "%s/job.conf", e->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(job_cmd(e, "submit", path, NULL, NULL, id, cap), 0);
    id[strcspn(id, "\n")] = '\0';
    assert_true(id[0] != '\0');
}

static void fetch_model(env *e, const char *id, fk_bundle *model)
{
    char out[160];
    snprintf(out, sizeof out, "%s/model-%s.bin", e->dir, id);
    char *argv_out = out;
    char text[4096];
    char outflag[200];
    snprintf(outflag, sizeof outflag, "--out=%s", argv_out);
    if (job_cmd(e, "result", id, outflag, "--wait=90", text, sizeof text))
        fail_msg("job result failed: %s", text);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    fk_err err;
    fk_bundle_init(model);
    if (fk_codec_bundle_decode(buf, n, model, &err))
        fail_msg("model file: %s", err.msg);
}

static fk_sim_round sim_last; /* the last round of the latest sim_model run */

static void sim_model(env *e, const char *text, fk_bundle *model)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err;
    assert_int_equal(fk_params_parse_ini(&p, text, "job", &err), FK_OK);
    fk_dataset data[K];
    int shift = !strcmp(fk_params_str(&p, "dataset", ""), "shift");
    int mor = !strcmp(fk_params_str(&p, "dataset", ""), "mor");
    int kc = !strcmp(fk_params_str(&p, "dataset", ""), "kc");
    int lack = !strcmp(fk_params_str(&p, "dataset", ""), "lack");
    for (int c = 0; c < K; c++) {
        char path[160];
        if (mor)
            snprintf(path, sizeof path, MOR_SPEC, c);
        else
            snprintf(path, sizeof path, "%s/%c%d.csv", e->dir,
                     shift ? 'd' : kc ? 'k' : lack ? 'l' : 'c', c);
        if (mor ? fk_synth_spec_load(&data[c], path, &err) : fk_load(&data[c], path, NULL, &err))
            fail_msg("load: %s", err.msg);
    }
    long rounds;
    uint64_t seed;
    const fk_method *m = fk_method_find(fk_params_get(&p, "method"), &err);
    assert_non_null(m);
    assert_int_equal(fk_params_int(&p, "rounds", fk_method_default_rounds(m, &p), 1, 100000,
                                   &rounds, &err),
                     FK_OK);
    assert_int_equal(fk_params_u64(&p, "seed", 1, &seed, &err), FK_OK);
    fk_sim_opts o = {.rounds = (int)rounds, .seed = seed};
    if (fk_sim_run(m, &p, data, K, &o, model, &sim_last, &err))
        fail_msg("sim: %s", err.msg);
    for (int c = 0; c < K; c++)
        fk_dataset_close(&data[c]);
    fk_params_close(&p);
}

static void check_against_sim(env *e, const char *id, const char *text)
{
    fk_bundle daemon, sim;
    fetch_model(e, id, &daemon);
    sim_model(e, text, &sim);
    assert_true(daemon.count > 0);
    /* issue 34: the daemons' model also records what the clients did to their files (they
     * read raw files and synthetic specs: no steps, no map, every client alike) */
    const fk_tensor *dp = fk_bundle_get(&daemon, "data_prep");
    assert_non_null(dp);
    assert_true(dp->ndim == 2 && dp->shape[0] == 1);
    fk_prep_record none = {.known = 1};
    fk_err err = {0};
    assert_int_equal(fk_prep_model_put(&sim, &none, 1, NULL, &err), FK_OK);
    assert_bundles_equal(&daemon, &sim);
    fk_bundle_close(&daemon);
    fk_bundle_close(&sim);
}

/* Orthogonal frequencies here (the demo runs the default i.i.d. ones through the daemons):
 * every client must rebuild the same Omega from the job's parameters. select_holdout: the
 * sources' held-out counts travel in phase 2, in the last round for the tail average too
 * (avg_last), and the selected model (W_sel) matches too. */
static void fedrf_tca_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = fedrf-tca\ndataset = shift\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 3\nrounds = 8\nN = 64\nm = 8\nhidden = 16\nbatch = 32\ntc = 4\n"
                       "features = orthogonal\nselect_holdout = 0.25\navg_last = 3\nclasses = 2\n"
                       "deadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    /* the target's accuracy per round, as the simulation measured it */
    char status[4096];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    const char *acc = strstr(status, "\"accuracy\":");
    assert_non_null(acc);
    assert_true(strtod(acc + strlen("\"accuracy\":"), NULL) == sim_last.accuracy);
    /* ... measured by the target, listed apart under its name */
    const char *tg = strstr(status, "{\"client\":\"c5\",\"index\":5,\"role\":\"target\","),
               *tend = tg ? strchr(tg, '}') : NULL, *tacc = tg ? strstr(tg, "\"accuracy\":") : NULL;
    assert_true(tend && tacc && tacc < tend);
    assert_true(strtod(tacc + strlen("\"accuracy\":"), NULL) == sim_last.accuracy);
    /* the model keeps the selected round's model next to the last: model show says which,
     * and job result --selected points there */
    fk_bundle model;
    fetch_model(e, id, &model);
    const fk_tensor *sr = fk_bundle_get(&model, "sel_round");
    assert_non_null(sr);
    char path[160], want[160];
    snprintf(path, sizeof path, "%s/model-%s.bin", e->dir, id);
    char *argv[] = {(char *)fedkern_bin, "model", "show", path, NULL};
    static char shown[1 << 16];
    assert_int_equal(run_cmd(argv, shown, sizeof shown), 0);
    snprintf(want, sizeof want, "  selected round %.0f (held-out accuracy ", sr->data[0]);
    assert_non_null(strstr(shown, want));
    assert_non_null(strstr(shown, "the others are the model of round 8 (the last)"));
    fk_bundle_close(&model);
    snprintf(want, sizeof want, "--out=%s/sel.bin", e->dir);
    char server[64];
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    char *rargv[] = {(char *)fedkern_bin, "job", "result", id, want, "--selected", "--server",
                     server, "--server_name", "server", "--tls_dir", e->pki, "--name", "op",
                     NULL};
    assert_int_not_equal(run_cmd_all(rargv, status, sizeof status), 0);
    if (!strstr(status, "keeps it inside the model: see `fedkern model show`"))
        fail_msg("job result --selected on fedrf-tca: %s", status);
}

/* The dense extractor (trained by every client, never sent), the tail average, SGD on the
 * target's W and the closed-form warm start (its moments without the held-out rows of
 * select_holdout; issue 26): the daemons' model equals the simulation's bit for bit. */
static void fedrf_tca_dense_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = fedrf-tca\ndataset = shift\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 4\nrounds = 6\nN = 32\nm = 6\nhidden = 8\nbatch = 16\ntc = 2\n"
                       "extractor = dense\next_dim = 12\navg_last = 3\ntarget_opt = sgd\n"
                       "warm_start = 1\nselect_holdout = 0.25\n"
                       "classes = 2\ndeadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
}

/* select_holdout with voting: the sources' classifiers travel every round, the candidates are
 * each round's W with their vote and the tail average; W_sel and votes_sel match the simulation. */
static void fedrf_tca_voting_select_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = fedrf-tca\ndataset = shift\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 5\nrounds = 5\nN = 32\nm = 6\nhidden = 8\nbatch = 16\ntc = 2\n"
                       "voting = 1\nselect_holdout = 0.25\navg_last = 2\nclasses = 2\ndeadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
}

/* pooled-em ends itself once every restart has converged: the job is done long before its
 * round budget (by default as many rounds as the fit can need), "converged", and equal to the
 * simulation, which stops at the same round. */
static void pooled_em_daemons_end_early(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = pooled-em\ndataset = gmm\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 7\nR = 3\nrestarts = 3\ndeadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    char out[2048];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"state\":\"done\""));
    const char *rd = strstr(out, "\"rounds_done\":");
    assert_non_null(rd);
    int done = atoi(rd + strlen("\"rounds_done\":"));
    char budget[48];
    snprintf(budget, sizeof budget, "\"rounds\":%d,", fk_pooled_em_rounds(3));
    assert_non_null(strstr(out, budget)); /* no `rounds` key: the method's own budget */
    print_message("pooled-em finished after %d of %d rounds\n", done, fk_pooled_em_rounds(3));
    assert_true(done > 4 && done < 1000);
    fk_bundle m;
    fetch_model(e, id, &m);
    const fk_tensor *cv = fk_bundle_get(&m, "converged");
    assert_non_null(cv);
    assert_true(cv->data[0] == 1.0);
    fk_bundle_close(&m);
    /* the last round's clusters under the server's best restart, as the simulation scored them */
    const char *mc = strstr(out, "\"misclust\":"), *ari = strstr(out, "\"ari\":");
    assert_non_null(mc);
    assert_non_null(ari);
    assert_true(strtod(mc + strlen("\"misclust\":"), NULL) == sim_last.misclust);
    assert_true(strtod(ari + strlen("\"ari\":"), NULL) == sim_last.ari);
}

/* fedgrem-mor on built-in synthetic/mor client data: the daemons run the same ops. */
static void fedgrem_mor_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = fedgrem-mor\ndataset = mor\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 5\nrounds = 10\nR = 2\nrestarts = 3\nalign_B = 4\ndeadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    /* the last round's RMSE of the fitted regression, as the simulation measured it */
    char status[4096];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    const char *rm = strstr(status, "\"rmse\":");
    assert_non_null(rm);
    print_message("fedgrem-mor round 10: rmse %.17g\n", strtod(rm + strlen("\"rmse\":"), NULL));
    assert_true(strtod(rm + strlen("\"rmse\":"), NULL) == sim_last.rmse);
}

/* dica on the shift data (one domain per client, the last one held out): the one-round
 * statistics job gives the same model through the daemons as in simulation. */
static void dica_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = "method = dica\ndataset = shift\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 3\nR = 16\nholdout = 5\ndeadline = 30\n";
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    /* job status lists each client's accuracy under its name, the held-out domain apart as
     * "unseen"; the mean is the sample-weighted mean of the clients listed */
    static char status[1 << 14];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    const char *cq = strstr(status, "\"clients_quality\":[");
    assert_non_null(cq);
    double sum = 0, wsum = 0, unseen = NAN, tsum = 0, twsum = 0;
    for (int k = 0; k < 6; k++) {
        char who[64];
        snprintf(who, sizeof who, "{\"client\":\"c%d\",\"index\":%d,\"role\":\"%s\"", k, k,
                 k == 5 ? "unseen" : "train");
        const char *at = strstr(cq, who), *end = at ? strchr(at, '}') : NULL;
        assert_non_null(end);
        const char *acc = strstr(at, "\"accuracy\":"), *ns = strstr(at, "\"n_samples\":");
        assert_true(acc && acc < end);
        double a = strtod(acc + strlen("\"accuracy\":"), NULL);
        /* the mean's weight: n_samples, 1 where not positive (a test-only client) */
        double n = ns && ns < end ? strtod(ns + strlen("\"n_samples\":"), NULL) : 1;
        assert_true(a >= 0 && a <= 1 && n > 0);
        sum += a * n;
        wsum += n;
        if (k == 5) {
            unseen = a;
        } else {
            tsum += a * n;
            twsum += n;
        }
    }
    const char *mean = strstr(status, ",\"accuracy\":");
    assert_non_null(mean);
    assert_true(mean < cq);
    double m = strtod(mean + strlen(",\"accuracy\":"), NULL);
    print_message("dica: mean accuracy %.6g, unseen domain c5 %.6g\n", m, unseen);
    assert_true(fabs(m - sum / wsum) <= 1e-12 * fabs(m) + 1e-15);
    /* ... and the means apart: the unseen domain's own, the training clients' without it */
    const char *ua = strstr(status, ",\"unseen_accuracy\":"), *ta = strstr(status, ",\"train_accuracy\":");
    assert_true(ua && ua < cq && ta && ta < cq);
    assert_true(strtod(ua + strlen(",\"unseen_accuracy\":"), NULL) == unseen);
    double t = strtod(ta + strlen(",\"train_accuracy\":"), NULL);
    print_message("dica: training clients' accuracy %.6g\n", t);
    assert_true(fabs(t - tsum / twsum) <= 1e-12);
    /* the plain text names the unseen client apart too */
    assert_int_equal(job_cmd(e, "status", id, NULL, NULL, status, sizeof status), 0);
    assert_non_null(strstr(status, "  unseen c5 "));
    /* ... and /metrics: one gauge per client, labelled with its name and role */
    static char metrics[1 << 16];
    assert_int_equal(scrape(e->metrics_port, metrics, sizeof metrics), 0);
    char want[200];
    snprintf(want, sizeof want,
             "fedkern_job_client_accuracy{job=\"%s\",method=\"dica\",client=\"c5\","
             "role=\"unseen\"} ",
             id);
    const char *g = strstr(metrics, want);
    assert_non_null(g);
    assert_true(strtod(g + strlen(want), NULL) == unseen);
    snprintf(want, sizeof want,
             "fedkern_job_client_accuracy{job=\"%s\",method=\"dica\",client=\"c0\","
             "role=\"train\"} ",
             id);
    assert_non_null(strstr(metrics, want));
    /* ... and the means apart as job-level gauges, equal to job status's */
    snprintf(want, sizeof want, "fedkern_job_unseen_accuracy{job=\"%s\",method=\"dica\"} ", id);
    g = strstr(metrics, want);
    assert_non_null(g);
    assert_true(strtod(g + strlen(want), NULL) == unseen);
    snprintf(want, sizeof want, "fedkern_job_train_accuracy{job=\"%s\",method=\"dica\"} ", id);
    g = strstr(metrics, want);
    assert_non_null(g);
    assert_true(fabs(strtod(g + strlen(want), NULL) - t) <= 1e-12);
    /* ... and `job plot`: the rows list each client (--json), the SVG has a panel per client */
    char out[200];
    snprintf(out, sizeof out, "--out=%s/dica.svg", e->dir);
    assert_int_equal(job_cmd(e, "plot", id, out, "--json", status, sizeof status), 0);
    snprintf(want, sizeof want, "{\"client\":\"c5\",\"index\":5,\"role\":\"unseen\",");
    assert_non_null(strstr(status, want));
    FILE *f = fopen(out + strlen("--out="), "rb");
    assert_non_null(f);
    size_t got = fread(metrics, 1, sizeof metrics - 1, f);
    fclose(f);
    metrics[got] = '\0';
    assert_non_null(strstr(metrics, ">c5 (unseen)<"));
    assert_non_null(strstr(metrics, ">accuracy per client<"));
    /* the means apart: lines of their own, and in the --json rows */
    assert_non_null(strstr(metrics, ">unseen mean<"));
    assert_non_null(strstr(metrics, ">train mean<"));
    snprintf(want, sizeof want, ",\"unseen_accuracy\":%.9g,", unseen);
    assert_non_null(strstr(status, want));
}

/* One class list per job (issue 32), through the daemons: client 1 lacks class 2 and
 * client 2 holds one row of class 0. With `classes` listing the raw values, fedrf-tca and
 * dica equal the simulation bit for bit (test_methods_classes: the simulation equals the
 * aligned computation), dica without a list too (the union of the clients' labels); a count
 * that a client cannot hold is refused in the job status, naming the key; kahm leaves
 * client 2's singleton class block out (logged by the server), serves the rest, and its
 * mode-B model equals the simulation's. */
static void classes_daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *tca = "method = fedrf-tca\ndataset = lack\nclients = c0, c1, c2, c3, c4, c5\n"
                      "seed = 3\nrounds = 4\nN = 32\nm = 6\nhidden = 8\nbatch = 32\ntc = 2\n"
                      "classes = 0..3\ndeadline = 30\n";
    const char *dica = "method = dica\ndataset = lack\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 3\nR = 16\nholdout = 5\nmin_domain_size = 2\n"
                       "classes = 0,1,2,3\ndeadline = 30\n";
    const char *kahm = "method = kahm\ndataset = lack\nclients = c0, c1, c2, c3, c4, c5\n"
                       "seed = 3\nclasses = 0,1,2,3,9\nholdout = 0\ndeadline = 30\n";
    const char *jobs[] = {tca, dica, kahm};
    char kid[32];
    for (int i = 0; i < 3; i++) {
        submit(e, jobs[i], kid, sizeof kid);
        check_against_sim(e, kid, jobs[i]);
    }
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=kahm_class_left_out client=2 classes=0 ", 5, NULL, 0));
    /* ... and model show names it (check_against_sim wrote the kahm job's model file) */
    {
        char path[160];
        snprintf(path, sizeof path, "%s/model-%s.bin", e->dir, kid);
        char *argv[] = {(char *)fedkern_bin, "model", "show", path, NULL};
        static char shown[1 << 16];
        assert_int_equal(run_cmd(argv, shown, sizeof shown), 0);
        assert_non_null(strstr(shown, "  class blocks left out by client 2 (could not be "
                                      "modelled; it serves the others): 0\n"));
    }
    /* no list: the clients send their labels in phase 0 and index their rows by the union
     * (0, 1, 2, 3) the server sends back */
    const char *nolist = "method = dica\ndataset = lack\nclients = c0, c1, c2, c3, c4, c5\n"
                         "seed = 3\nR = 16\nholdout = 5\nmin_domain_size = 2\ndeadline = 30\n";
    char id[32];
    submit(e, nolist, id, sizeof id);
    check_against_sim(e, id, nolist);
    fk_bundle m;
    fetch_model(e, id, &m);
    const fk_tensor *cv = fk_bundle_get(&m, "class_values");
    assert_non_null(cv);
    assert_true(cv->len == 4 && cv->data[0] == 0 && cv->data[3] == 3);
    fk_bundle_close(&m);
    /* a count with a client lacking a class: its own indices would shift; it refuses, naming
     * the key, in the job status */
    char status[4096] = "";
    submit(e,
           "method = fedrf-tca\ndataset = lack\nclients = c0, c1, c2, c3, c4, c5\nseed = 3\n"
           "rounds = 2\nN = 32\nm = 6\nclasses = 4\ndeadline = 30\n",
           id, sizeof id);
    double until = now_s() + 60;
    while (now_s() < until && !strstr(status, "of the job's classes = 4")) {
        (void)job_cmd(e, "status", id, NULL, NULL, status, sizeof status);
        usleep(100000);
    }
    if (!strstr(status, "of the job's classes = 4") || !strstr(status, "classes = 1,2,3 or"))
        fail_msg("job status does not show the refusal: %s", status);
}

static void daemons_match_sim(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = job_text("rounds = 12\ndeadline = 30\n");
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    char status[4096];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    assert_non_null(strstr(status, "\"state\":\"done\""));
    assert_non_null(strstr(status, "\"dropouts_total\":0"));
    assert_non_null(strstr(status, ",\"round\":12,")); /* the last closed round */
    /* --round N: the metrics of that closed round */
    assert_int_equal(job_cmd(e, "status", id, "--round=5", "--json", status, sizeof status), 0);
    assert_non_null(strstr(status, ",\"round\":5,\"participants\":6,"));
    /* /healthz on the metrics listener: 200 and the sessions of the 6 clients */
    char health[1024];
    assert_int_equal(healthz(e->metrics_port, health, sizeof health), 0);
    static const char ok200[] = "200 {\"status\":\"serving\",";
    if (strncmp(health, ok200, sizeof ok200 - 1) || !strstr(health, "\"sessions\":6,"))
        fail_msg("/healthz: %s", health);
    static char metrics[1 << 16];
    assert_int_equal(scrape(e->metrics_port, metrics, sizeof metrics), 0);
    assert_non_null(strstr(metrics, "fedkern_rounds_closed_total 12\n"));
    assert_non_null(strstr(metrics, "fedkern_jobs_running 0\n"));
    assert_non_null(strstr(metrics, "# TYPE fedkern_jobs_stalled gauge\nfedkern_jobs_stalled 0\n"));
    assert_non_null(strstr(metrics, "# TYPE fedkern_updates_committed_total counter"));
    assert_non_null(strstr(metrics, "# TYPE fedkern_update_transactions_total counter"));
    assert_non_null(strstr(metrics, "fedkern_update_transactions_failed_total 0\n"));
    /* the per-round quality: stored, shown by job status and equal to the simulation's */
    assert_int_equal(job_cmd(e, "status", id, "--round=12", "--json", status, sizeof status), 0);
    const char *mc = strstr(status, "\"misclust\":"), *ari = strstr(status, "\"ari\":");
    assert_non_null(mc);
    assert_non_null(ari);
    print_message("round 12: misclust %s", mc);
    assert_true(strtod(mc + strlen("\"misclust\":"), NULL) == sim_last.misclust);
    assert_true(strtod(ari + strlen("\"ari\":"), NULL) == sim_last.ari);
    /* ... exported with job and method labels, next to the per-method histograms */
    char want[160];
    snprintf(want, sizeof want, "fedkern_job_misclust{job=\"%s\",method=\"fedgrem\"} ", id);
    assert_non_null(strstr(metrics, want));
    assert_non_null(strstr(metrics, "fedkern_round_duration_seconds_count{method=\"fedgrem\"} 12\n"));
    assert_non_null(strstr(metrics, "# TYPE fedkern_round_aggregation_seconds histogram\n"));
    assert_non_null(strstr(metrics, "fedkern_grpc_calls_answered_total{method=\"PushUpdate\",code=\"OK\"} "));
    assert_non_null(strstr(metrics, "fedkern_clients_connected 6\n"));
    /* ... in the server's round lines */
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=round_closed job=1 round=12 ", 1, NULL, 0));
    assert_true(wait_log(log, " method=fedgrem round_seconds=", 1, NULL, 0));
    assert_true(wait_log(log, " misclust=", 1, NULL, 0));
    /* the log lines carry timestamps (not under journald here) */
    assert_true(wait_log(log, "ts=20", 1, NULL, 0));
    /* a client with metrics-listen serves its own counters and its latest step's report */
    char clog[160], cport[16];
    snprintf(clog, sizeof clog, "%s/client0.log", e->dir);
    assert_true(line_value(clog, "event=metrics_listening", "port=", cport, sizeof cport));
    assert_int_equal(scrape(cport, metrics, sizeof metrics), 0);
    assert_non_null(strstr(metrics, "fedkern_client_joined 1\n"));
    assert_non_null(strstr(metrics, "# TYPE fedkern_client_steps_total counter\n"));
    snprintf(want, sizeof want, "fedkern_client_misclust{job=\"%s\",method=\"fedgrem\"} ", id);
    assert_non_null(strstr(metrics, want));
    snprintf(clog, sizeof clog, "%s/client1.log", e->dir);
    assert_false(wait_log(clog, "event=metrics_listening", 0.1, NULL, 0));
    /* ... and plotted, as SVG and PNG */
    char out[200];
    for (int k = 0; k < 2; k++) {
        snprintf(out, sizeof out, "--out=%s/plot.%s", e->dir, k ? "png" : "svg");
        if (job_cmd(e, "plot", id, out, NULL, status, sizeof status))
            fail_msg("job plot: %s", status);
        assert_non_null(strstr(status, "12 rounds plotted"));
        FILE *f = fopen(out + strlen("--out="), "rb");
        assert_non_null(f);
        char head[8] = {0};
        assert_true(fread(head, 1, 8, f) == 8);
        fclose(f);
        assert_true(k ? !memcmp(head, "\x89PNG\r\n\x1a\n", 8) : !memcmp(head, "<?xml", 5));
    }
}

/* Wait until the server log shows `needle` (a closed round). */
static void wait_round(env *e, const char *needle)
{
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    if (!wait_log(log, needle, 60, NULL, 0))
        fail_msg("server never logged '%s'", needle);
}

static void server_kill9_resumes_to_same_model(void **state)
{
    env *e = *state;
    start_server(e, "127.0.0.1:0");
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%s", e->port);
    for (int c = 0; c < K; c++)
        start_client(e, c);
    wait_joined(e);
    const char *text = job_text("rounds = 150\ndeadline = 30\n");
    char id[32];
    submit(e, text, id, sizeof id);
    wait_round(e, "event=round_closed job=1 round=20 ");
    stop(&e->server, SIGKILL);
    start_server(e, listen); /* same port: the clients reconnect by themselves */
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=job_resumed job=1", 5, NULL, 0));
    check_against_sim(e, id, text);
}

/* Issue 35: `job delete` of a running job is refused; once cancelled it is deleted, and the
 * delete survives a kill -9 of the server (acknowledged only once durable). The restarted
 * server checks only what was written since its last clean stop (state_check mode=crash),
 * keeps the other job's model and applied the retention to it (2 checkpoints). */
static void delete_survives_kill9(void **state)
{
    env *e = *state;
    start_server(e, "127.0.0.1:0");
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%s", e->port);
    for (int c = 0; c < K; c++)
        start_client(e, c);
    wait_joined(e);
    char done_id[32], id[32], out[4096];
    submit(e, job_text("rounds = 6\ndeadline = 30\n"), done_id, sizeof done_id);
    char mflag[200];
    snprintf(mflag, sizeof mflag, "--out=%s/done.bin", e->dir);
    if (job_cmd(e, "result", done_id, mflag, "--wait=120", out, sizeof out))
        fail_msg("job result: %s", out);
    submit(e, job_text("rounds = 100000\ndeadline = 30\n"), id, sizeof id);
    wait_round(e, "event=round_closed job=2 round=3 ");
    assert_int_not_equal(job_cmd(e, "delete", id, NULL, NULL, out, sizeof out), 0);
    assert_int_equal(job_cmd(e, "cancel", id, NULL, NULL, out, sizeof out), 0);
    assert_int_equal(job_cmd(e, "delete", id, NULL, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "deleted"));
    stop(&e->server, SIGKILL);
    start_server(e, listen);
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=state_check ", 1, NULL, 0));
    assert_true(wait_log(log, "mode=crash ", 1, NULL, 0));
    assert_int_not_equal(job_cmd(e, "status", id, NULL, NULL, out, sizeof out), 0);
    assert_int_equal(job_cmd(e, "status", done_id, "--json", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"state\":\"done\""));
    snprintf(mflag, sizeof mflag, "--out=%s/again.bin", e->dir);
    assert_int_equal(job_cmd(e, "result", done_id, mflag, NULL, out, sizeof out), 0);
    /* a clean stop, then the next start reads nothing */
    stop(&e->server, SIGTERM);
    start_server(e, listen);
    assert_true(wait_log(log, "mode=clean ", 5, NULL, 0));
    stop(&e->server, SIGTERM);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' state info '%s'", fedkern_bin, e->db);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "jobs 1,"));
    assert_non_null(strstr(out, "checkpoints 2,"));
    /* the last model, and fedgrem's selected one (select_by loss) when it is another */
    assert_true(strstr(out, "models 1,") || strstr(out, "models 2,"));
}

static void killed_client_is_a_dropout(void **state)
{
    env *e = *state;
    start_fleet(e);
    /* rounds take milliseconds: 30 of them leave the kill time to land mid-job */
    const char *text = job_text("rounds = 30\ndeadline = 0.3\nquorum = 0.8\n");
    char id[32];
    submit(e, text, id, sizeof id);
    wait_round(e, "event=round_closed job=1 round=2 ");
    stop(&e->clients[4], SIGKILL);
    char status[4096];
    char out[160];
    snprintf(out, sizeof out, "--out=%s/m.bin", e->dir);
    if (job_cmd(e, "result", id, out, "--wait=120", status, sizeof status))
        fail_msg("job result: %s", status);
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    assert_non_null(strstr(status, "\"state\":\"done\""));
    assert_null(strstr(status, "\"dropouts_total\":0,"));
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=dropout job=1", 1, NULL, 0));
    assert_true(wait_log(log, "client=c4", 1, NULL, 0));
}

/* kahm: mode B through the daemons equals the simulation bit for bit; mode A takes the
 * models of the clients that consent in their own config, the others refuse the task (a
 * dropout) and say why in their log. */
static void kahm_daemons_modes(void **state)
{
    env *e = *state;
    start_fleet(e);
    /* labels 1..3 of the gmm files are the class ids */
    const char *tb = "method = kahm\ndataset = gmm\nclients = c0, c1, c2, c3, c4, c5\nseed = 11\n"
                     "classes = 4\n";
    char id[32], idb[32], out[4096], dflag[200], oflag[200], pred[160];
    submit(e, tb, id, sizeof id);
    check_against_sim(e, id, tb);
    /* the clients' largest modelling error is reported as model_error, not as `error` (which
     * reads as 1 - accuracy), in the mean and per client */
    static char st[1 << 14];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, st, sizeof st), 0);
    const char *me = strstr(st, ",\"model_error\":");
    assert_non_null(me);
    assert_true(strtod(me + strlen(",\"model_error\":"), NULL) >= 0);
    assert_null(strstr(st, ",\"error\":"));
    assert_non_null(strstr(strstr(st, "\"clients_quality\":["), ",\"model_error\":"));
    snprintf(idb, sizeof idb, "%s", id);
    snprintf(dflag, sizeof dflag, "--data=%s/c0.csv", e->dir);
    snprintf(pred, sizeof pred, "%s/pred.csv", e->dir);
    snprintf(oflag, sizeof oflag, "--out=%s", pred);
    char ta[600];
    snprintf(ta, sizeof ta, "%supload_models = 1\ndeadline = 20\nquorum = 0.5\n", tb);
    submit(e, ta, id, sizeof id);
    fk_bundle model;
    fetch_model(e, id, &model);
    const fk_tensor *h = fk_bundle_get(&model, "holders");
    assert_non_null(h);
    for (int c = 0; c < K; c++) {
        char nm[32];
        snprintf(nm, sizeof nm, "c%d.m0.0.M", c);
        if (c % 2) {
            assert_null(fk_bundle_get(&model, nm));
            assert_true(h->data[c * 4] == -1);
        } else {
            assert_non_null(fk_bundle_get(&model, nm));
            assert_true(h->data[c * 4 + 1] > 0);
        }
    }
    /* job predict: the server's answer equals the predict op on the fetched model */
    assert_int_equal(job_cmd(e, "predict", id, dflag, oflag, out, sizeof out), 0);
    fk_dataset q;
    fk_err err;
    assert_int_equal(fk_load(&q, dflag + 7, NULL, &err), FK_OK);
    fk_bundle qb, res;
    fk_bundle_init(&qb);
    fk_bundle_init(&res);
    assert_int_equal(fk_bundle_put(&qb, "X", 2, (uint64_t[]){q.X.rows, q.X.cols}, q.X.data),
                     FK_OK);
    const fk_method *km = fk_method_find("kahm", &err);
    assert_non_null(km);
    assert_int_equal(km->predict(&model, &qb, &res, &err), FK_OK);
    const fk_tensor *lab = fk_bundle_get(&res, "labels"), *dist = fk_bundle_get(&res, "distances");
    FILE *f = fopen(pred, "r");
    assert_non_null(f);
    size_t rows = 0, hit = 0;
    double l, d;
    while (fscanf(f, "%lf,%lf", &l, &d) == 2) {
        assert_true(rows < q.X.rows);
        assert_true(l == lab->data[rows] && d == dist->data[rows]);
        hit += l == q.classes[q.y[rows]];
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, q.X.rows);
    assert_true(hit > 0.8 * rows);
    fk_bundle_close(&qb);
    fk_bundle_close(&res);
    fk_dataset_close(&q);
    /* mode B keeps the models on the clients: the server asks them */
    assert_int_equal(job_cmd(e, "predict", idb, dflag, oflag, out, sizeof out), 0);
    fk_bundle_close(&model);
    char log[160];
    snprintf(log, sizeof log, "%s/client1.log", e->dir);
    assert_true(wait_log(log, "does not allow it", 5, NULL, 0));
    snprintf(log, sizeof log, "%s/client0.log", e->dir);
    assert_true(wait_log(log, "event=kahm_upload", 5, NULL, 0));
    static char metrics[1 << 16]; /* one call served at the server (mode A), one by the clients */
    assert_int_equal(scrape(e->metrics_port, metrics, sizeof metrics), 0);
    assert_non_null(strstr(metrics, "\nfedkern_predict_calls_server_total 1\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_calls_clients_total 1\n"));
}

/* Rows of a "label,distance" CSV written by job predict --out, against labels and distances
 * computed in process; returns the rows read. */
static size_t compare_predictions_tol(const char *path, const fk_tensor *lab,
                                      const fk_tensor *dist, double rel)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t rows = 0;
    double l, d;
    while (fscanf(f, "%lf,%lf", &l, &d) == 2) {
        assert_true(rows < lab->len);
        if (!(l == lab->data[rows] &&
              (d == dist->data[rows] || fabs(d - dist->data[rows]) <= rel * fabs(dist->data[rows]))))
            fail_msg("row %zu: daemons %.17g %.17g, in process %.17g %.17g", rows, l, d,
                     lab->data[rows], dist->data[rows]);
        rows++;
    }
    fclose(f);
    return rows;
}

static size_t compare_predictions(const char *path, const fk_tensor *lab, const fk_tensor *dist)
{
    return compare_predictions_tol(path, lab, dist, 0);
}

/* kahm mode B served through the daemons: the holder clients answer their class distances,
 * the server takes the minimum (eq. 63); equal bit for bit to eq. 63 in process over all the
 * clients' models (mode A's predict on the same fits, uploaded in a simulation). A stopped
 * client contributes +inf for its classes and the answer names them and the client. */
static void kahm_daemons_predict_mode_b(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *tb = "method = kahm\ndataset = kc\nclients = c0, c1, c2, c3, c4, c5\nseed = 11\n"
                     "classes = 7\n";
    char id[32], out[4096], dflag[200], oflag[200], pred[160];
    submit(e, tb, id, sizeof id);
    check_against_sim(e, id, tb); /* done, and the class lists equal the simulation's */
    snprintf(dflag, sizeof dflag, "--data=%s/k3.csv", e->dir);
    snprintf(pred, sizeof pred, "%s/pred.csv", e->dir);
    snprintf(oflag, sizeof oflag, "--out=%s", pred);
    /* eq. (63) in process: every client's fitted models, uploaded in a simulation */
    char ta[400];
    snprintf(ta, sizeof ta, "%supload_models = 1\nlocal.allow_model_upload = 1\n", tb);
    fk_bundle all;
    sim_model(e, ta, &all);
    fk_dataset q;
    fk_err err;
    assert_int_equal(fk_load(&q, dflag + 7, NULL, &err), FK_OK);
    fk_bundle qb, res;
    fk_bundle_init(&qb);
    fk_bundle_init(&res);
    assert_int_equal(fk_bundle_put(&qb, "X", 2, (uint64_t[]){q.X.rows, q.X.cols}, q.X.data),
                     FK_OK);
    const fk_method *km = fk_method_find("kahm", &err);
    assert_non_null(km);
    assert_int_equal(km->predict(&all, &qb, &res, &err), FK_OK);
    /* all six clients answer */
    double t_all = now_s();
    if (job_cmd(e, "predict", id, dflag, oflag, out, sizeof out))
        fail_msg("job predict: %s", out);
    fprintf(stderr, "kahm mode-B job predict, %zu queries, 6 clients: %.3f s (CLI included)\n",
            q.X.rows, now_s() - t_all);
    size_t rows = compare_predictions(pred, fk_bundle_get(&res, "labels"),
                                      fk_bundle_get(&res, "distances"));
    assert_int_equal(rows, q.X.rows);
    size_t hit = 0;
    const fk_tensor *lab = fk_bundle_get(&res, "labels");
    for (size_t i = 0; i < rows; i++)
        hit += lab->data[i] == q.classes[q.y[i]];
    assert_true(hit > 0.9 * rows);
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=predict_answered request=1 clients_asked=6 answered=6 "
                              "missing=0", 5, NULL, 0));
    /* client c3 stopped: its class 3 scores +inf; eq. (63) without its models */
    stop(&e->clients[3], SIGKILL);
    fk_bundle_close(&res);
    fk_bundle_init(&res);
    fk_tensor *h = (fk_tensor *)fk_bundle_get(&all, "holders");
    for (uint64_t c = 0; c < h->shape[1]; c++)
        h->data[3 * h->shape[1] + c] = -1;
    assert_int_equal(km->predict(&all, &qb, &res, &err), FK_OK);
    char stderr_path[160], tflag[] = "--timeout=2";
    snprintf(stderr_path, sizeof stderr_path, "%s/predict.err", e->dir);
    /* run_cmd keeps stdout; the CLI names what could not be scored on stderr */
    char server[64];
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' job predict %s --server %s --server_name server --tls_dir '%s' "
             "--name op '%s' '%s' %s 2>'%s'", fedkern_bin, id, server, e->pki, dflag, oflag, tflag,
             stderr_path);
    double t0 = now_s();
    assert_int_equal(system(cmd), 0);
    double took = now_s() - t0;
    assert_true(took >= 1.5 && took < 30); /* waited for the silent client until the timeout */
    rows = compare_predictions(pred, fk_bundle_get(&res, "labels"),
                               fk_bundle_get(&res, "distances"));
    assert_int_equal(rows, q.X.rows);
    lab = fk_bundle_get(&res, "labels");
    for (size_t i = 0; i < rows; i++)
        assert_true(lab->data[i] != 3); /* nobody scores class 3 now */
    assert_true(wait_log(stderr_path, "1 class(es) could not be scored (+inf): 3", 1, NULL, 0));
    assert_true(wait_log(stderr_path, "gave no usable answer: 3 (client index in the job; none "
                                      "before the deadline, or one the server refused",
                         1, NULL, 0));
    assert_true(wait_log(log, "clients_asked=6 answered=5 missing=1", 1, NULL, 0));
    /* queries of another dimension (4 columns): refused at the server, no client asked */
    snprintf(dflag, sizeof dflag, "--data=%s/d0.csv", e->dir);
    assert_int_not_equal(job_cmd(e, "predict", id, dflag, oflag, out, sizeof out), 0);
    assert_true(wait_log(log, "request=2 clients_asked=6", 1, NULL, 0));
    assert_false(wait_log(log, "request=3", 0.5, NULL, 0));
    /* the prediction counters: two calls served by the clients (60 queries each), one refused,
     * one holder missing and its class unscored in the second */
    static char metrics[1 << 16];
    assert_int_equal(scrape(e->metrics_port, metrics, sizeof metrics), 0);
    assert_non_null(strstr(metrics, "\nfedkern_predict_calls_clients_total 2\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_calls_server_total 0\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_calls_failed_total 1\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_queries_total 120\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_missing_clients_total 1\n"));
    assert_non_null(strstr(metrics, "\nfedkern_predict_unscored_classes_total 1\n"));
    /* the one-shot job's report: the clients' holdout accuracy of their local classifiers */
    char status[4096];
    assert_int_equal(job_cmd(e, "status", id, "--json", NULL, status, sizeof status), 0);
    const char *acc = strstr(status, "\"accuracy\":");
    assert_non_null(acc);
    double a = strtod(acc + 11, NULL);
    fprintf(stderr, "kahm job report: accuracy %.4f\n", a);
    assert_true(a > 0.8 && a <= 1.0);
    fk_bundle_close(&qb);
    fk_bundle_close(&res);
    fk_bundle_close(&all);
    fk_dataset_close(&q);
}

/* Eq. (63) in process over every client's fitted models of the mode-B job text tb (uploaded
 * in a simulation) for the queries in file qpath: into res (initialised here). */
static void eq63_in_process(env *e, const char *tb, const char *qpath, fk_bundle *res)
{
    char ta[400];
    snprintf(ta, sizeof ta, "%supload_models = 1\nlocal.allow_model_upload = 1\n", tb);
    fk_bundle all, qb;
    sim_model(e, ta, &all);
    fk_dataset q;
    fk_err err;
    assert_int_equal(fk_load(&q, qpath, NULL, &err), FK_OK);
    fk_bundle_init(&qb);
    fk_bundle_init(res);
    assert_int_equal(fk_bundle_put(&qb, "X", 2, (uint64_t[]){q.X.rows, q.X.cols}, q.X.data),
                     FK_OK);
    const fk_method *km = fk_method_find("kahm", &err);
    assert_non_null(km);
    assert_int_equal(km->predict(&all, &qb, res, &err), FK_OK);
    fk_bundle_close(&qb);
    fk_bundle_close(&all);
    fk_dataset_close(&q);
}

/* A client restart keeps the models of an ended mode-B job: every client daemon is killed
 * (-9) after the job ended and started again; each rebuilds the job from its state dir
 * (event held_models_reloaded) and the next job predict is answered by all six, equal bit for
 * bit to eq. (63) in process, as before the restart. */
static void kahm_daemons_restart_keeps_models(void **state)
{
    env *e = *state;
    e->state_dirs = 1;
    start_fleet(e);
    const char *tb = "method = kahm\ndataset = kc\nclients = c0, c1, c2, c3, c4, c5\nseed = 11\n"
                     "classes = 7\n";
    char id[32], out[4096], dflag[200], oflag[200], pred[160], qpath[160];
    submit(e, tb, id, sizeof id);
    check_against_sim(e, id, tb);
    snprintf(qpath, sizeof qpath, "%s/k2.csv", e->dir);
    snprintf(dflag, sizeof dflag, "--data=%s", qpath);
    snprintf(pred, sizeof pred, "%s/pred.csv", e->dir);
    snprintf(oflag, sizeof oflag, "--out=%s", pred);
    fk_bundle res;
    eq63_in_process(e, tb, qpath, &res);
    const fk_tensor *lab = fk_bundle_get(&res, "labels"), *dist = fk_bundle_get(&res, "distances");
    if (job_cmd(e, "predict", id, dflag, oflag, out, sizeof out))
        fail_msg("job predict: %s", out);
    assert_int_equal(compare_predictions(pred, lab, dist), lab->len);
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "event=predict_answered request=1 clients_asked=6 answered=6 "
                              "missing=0", 5, NULL, 0));
    for (int c = 0; c < K; c++) {
        stop(&e->clients[c], SIGKILL);
        start_client(e, c);
    }
    for (int c = 0; c < K; c++) {
        char clog[160], needle[64];
        snprintf(clog, sizeof clog, "%s/client%d.log", e->dir, c);
        snprintf(needle, sizeof needle, "event=held_models_reloaded job=%s ", id);
        if (!wait_log(clog, needle, 20, NULL, 0))
            fail_msg("client %d did not reload the job's models; see %s", c, clog);
    }
    unlink(pred);
    if (job_cmd_v(e, "predict", id, (const char *[]){dflag, oflag, "--timeout=10", NULL}, out,
                  sizeof out))
        fail_msg("job predict after the restart: %s", out);
    assert_int_equal(compare_predictions(pred, lab, dist), lab->len);
    assert_true(wait_log(log, "event=predict_answered request=2 clients_asked=6 answered=6 "
                              "missing=0", 5, NULL, 0));
    fk_bundle_close(&res);
}

/* The server with its connections on two I/O threads (net.io_threads = 2): the job's model is
 * the simulation's, the metrics count the calls answered on the threads, and SIGTERM while
 * every client holds a long poll drains the threads and exits 0. */
static void io_threads_daemons_match_sim(void **state)
{
    env *e = *state;
    e->server_extra = "--net.io_threads=2";
    start_fleet(e);
    const char *text = job_text("rounds = 4\ndeadline = 30\n");
    char id[32];
    submit(e, text, id, sizeof id);
    check_against_sim(e, id, text);
    static char metrics[1 << 16];
    assert_int_equal(scrape(e->metrics_port, metrics, sizeof metrics), 0);
    assert_non_null(strstr(metrics, "fedkern_rounds_closed_total 4\n"));
    assert_non_null(strstr(metrics, "fedkern_clients_connected 6\n"));
    assert_non_null(strstr(metrics, "fedkern_grpc_calls_answered_total{method=\"PushUpdate\",code=\"OK\"} "));
    char log[160];
    snprintf(log, sizeof log, "%s/server.log", e->dir);
    assert_true(wait_log(log, "io_threads=2", 1, NULL, 0));
    int status = -1;
    kill(e->server, SIGTERM);
    assert_int_equal(waitpid(e->server, &status, 0), e->server);
    e->server = 0;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(wait_log(log, "event=server_stopped ", 1, NULL, 0));
}

/* Chunked query files: a server with net.max_message = 64 KiB and a query file of 6,000 rows
 * (144 KB of values, more than one message). The CLI at its default limit sends everything,
 * is refused (RESOURCE_EXHAUSTED) and halves its calls until they fit; at --net.max_message
 * 65536 it sizes them itself. Either way the rows come back in order, equal to eq. (63) in
 * process on the whole file (labels exactly, distances to 1e-12: other row blocks). */
static void kahm_daemons_predict_chunked(void **state)
{
    env *e = *state;
    e->server_extra = "--net.max_message=65536";
    start_fleet(e);
    const char *tb = "method = kahm\ndataset = kc\nclients = c0, c1, c2, c3, c4, c5\nseed = 11\n"
                     "classes = 7\n";
    char id[32], dflag[200], oflag[200], pred[160], qpath[160], errp[160];
    submit(e, tb, id, sizeof id);
    check_against_sim(e, id, tb);
    snprintf(qpath, sizeof qpath, "%s/big.csv", e->dir);
    FILE *f = fopen(qpath, "w");
    assert_non_null(f);
    fk_rng r;
    fk_rng_init(&r, 9, 1);
    for (int i = 0; i < 6000; i++) {
        int k = i % 7;
        fprintf(f, "%d", k);
        for (int j = 0; j < 3; j++)
            fprintf(f, ",%.6f", 0.25 * ((k >> j) & 1) + 0.08 * (k == 6) + 0.06 * fk_rng_normal(&r));
        fprintf(f, "\n");
    }
    fclose(f);
    struct stat sb;
    assert_int_equal(stat(qpath, &sb), 0);
    assert_true(sb.st_size > 65536); /* the file as text; as values it is 144 KB */
    snprintf(dflag, sizeof dflag, "--data=%s", qpath);
    snprintf(pred, sizeof pred, "%s/pred.csv", e->dir);
    snprintf(oflag, sizeof oflag, "--out=%s", pred);
    snprintf(errp, sizeof errp, "%s/predict.err", e->dir);
    fk_bundle res;
    eq63_in_process(e, tb, qpath, &res);
    const fk_tensor *lab = fk_bundle_get(&res, "labels"), *dist = fk_bundle_get(&res, "distances");
    char server[64], cmd[1200];
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    const char *limits[2] = {"", "--net.max_message=65536"};
    for (int t = 0; t < 2; t++) {
        unlink(pred);
        snprintf(cmd, sizeof cmd, "'%s' job predict %s --server %s --server_name server "
                 "--tls_dir '%s' --name op '%s' '%s' %s 2>'%s'", fedkern_bin, id, server, e->pki,
                 dflag, oflag, limits[t], errp);
        double t0 = now_s();
        if (system(cmd))
            fail_msg("job predict %s failed; see %s", limits[t], errp);
        fprintf(stderr, "kahm mode-B job predict, 6000 queries in calls within 64 KiB %s: "
                "%.3f s\n", t ? "(sized by the CLI)" : "(halved after refusals)", now_s() - t0);
        /* other row blocks than in process: the BLAS may round differently (labels equal) */
        assert_int_equal(compare_predictions_tol(pred, lab, dist, 1e-12), 6000);
        assert_true(wait_log(errp, "job 1: 6000 queries sent in ", 1, NULL, 0));
        assert_true(wait_log(errp, "accuracy", 1, NULL, 0));
        if (t == 0)
            assert_true(wait_log(errp, "are too many for the server; now", 1, NULL, 0));
        else
            assert_false(wait_log(errp, "too many", 0.1, NULL, 0));
    }
    fk_bundle_close(&res);
}

/* job result on a running job: exit non-zero and no file (was: exit 0 and a partial model),
 * unless --current asks for the latest model. */
static void result_of_running_job_writes_nothing(void **state)
{
    env *e = *state;
    start_fleet(e);
    const char *text = job_text("rounds = 100000\ndeadline = 30\n");
    char id[32];
    submit(e, text, id, sizeof id);
    wait_round(e, "event=round_closed job=1 round=2 ");
    char path[160], out[200], text_out[4096];
    snprintf(path, sizeof path, "%s/partial.bin", e->dir);
    snprintf(out, sizeof out, "--out=%s", path);
    assert_int_not_equal(job_cmd(e, "result", id, out, "--wait=1", text_out, sizeof text_out), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(job_cmd(e, "result", id, out, "--current", text_out, sizeof text_out), 0);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(job_cmd(e, "cancel", id, NULL, NULL, text_out, sizeof text_out), 0);
}

/* `fedkern job submit` of text, stdout and stderr into out: the exit status. */
static int try_submit(env *e, const char *text, const char *flag, char *out, size_t cap)
{
    char path[160], server[64];
    snprintf(path, sizeof path, "%s/try.conf", e->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    char *argv[] = {(char *)fedkern_bin, "job", "submit", path, "--server", server,
                    "--server_name", "server", "--tls_dir", e->pki, "--name", "op",
                    (char *)flag, NULL};
    return run_cmd_all(argv, out, cap);
}

/* The clients advertise their data sets at Join: a job naming a client the server never saw,
 * a data set the clients lack, or holders whose columns disagree is refused at submit, each
 * offender named; submitted anyway
 * (--skip_client_check), the job fails with the cause the clients reported, not only the
 * missed quorum. */
static void submit_refusals_and_failure_cause(void **state)
{
    env *e = *state;
    start_fleet(e);
    char out[4096];
    assert_int_not_equal(try_submit(e, "method = fedgrem\ndataset = gmm\nclients = c0, c1, c9\n",
                                    NULL, out, sizeof out),
                         0);
    if (!strstr(out, "client c9 has never joined this server"))
        fail_msg("unknown client: %s", out);
    const char *nowhere = "method = fedgrem\ndataset = nowhere\nclients = c0, c1, c2\n"
                          "retries = 0\ndeadline = 30\n";
    assert_int_not_equal(try_submit(e, nowhere, NULL, out, sizeof out), 0);
    if (!strstr(out, "clients c0, c1, c2 hold no data set 'nowhere'"))
        fail_msg("missing data set: %s", out);
    /* c5 rejoins holding another file as 'gmm' (the 4-column shift data): columns disagree */
    stop(&e->clients[5], SIGTERM);
    char log5[160], server[64], d5[160];
    snprintf(log5, sizeof log5, "%s/client5-shape.log", e->dir);
    snprintf(server, sizeof server, "127.0.0.1:%s", e->port);
    snprintf(d5, sizeof d5, "%s/d5.csv", e->dir);
    char *argv5[] = {(char *)client_bin, "--server", server, "--server_name", "server",
                     "--tls_dir", e->pki, "--name", "c5", "--data.gmm", d5,
                     "--backoff_max_ms", "500", NULL};
    e->clients[5] = spawn(argv5, log5);
    if (!wait_log(log5, "event=joined ", 30, NULL, 0))
        fail_msg("c5 did not rejoin; see %s", log5);
    assert_int_not_equal(try_submit(e, "method = fedgrem\ndataset = gmm\n"
                                       "clients = c0, c1, c2, c3, c4, c5\n",
                                    NULL, out, sizeof out),
                         0);
    if (!strstr(out, "data set 'gmm' has 3 columns on 5 clients but 4 on c5"))
        fail_msg("shape mismatch: %s", out);
    assert_int_equal(try_submit(e, nowhere, "--skip_client_check", out, sizeof out), 0);
    char id[32];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
    /* every client reports the failure at once: no deadline to wait for */
    char status[4096] = "";
    double until = now_s() + 30;
    while (now_s() < until) {
        int rc = job_cmd(e, "status", id, NULL, NULL, status, sizeof status);
        if (strstr(status, "failed")) /* exits 1 for a failed job */
            break;
        assert_int_equal(rc, 0);
            break;
        usleep(100000);
    }
    if (!strstr(status, "client c0 holds no data set 'nowhere' (it holds: "))
        fail_msg("job status does not show the cause: %s", status);
    assert_non_null(strstr(status, "quorum"));
}

/* The server stores what the clients advertised: restarted while every client is away, it
 * still refuses a job naming a data set they do not hold (before, only a rejoin refilled the
 * roster and such a job was accepted, then failed at the clients). */
static void roster_survives_server_restart(void **state)
{
    env *e = *state;
    start_fleet(e);
    for (int c = 0; c < K; c++)
        stop(&e->clients[c], SIGTERM);
    stop(&e->server, SIGTERM);
    start_server(e, "127.0.0.1:0");
    char out[4096];
    const char *nowhere = "method = fedgrem\ndataset = nowhere\nclients = c0, c1, c2\n";
    assert_int_not_equal(try_submit(e, nowhere, NULL, out, sizeof out), 0);
    if (!strstr(out, "clients c0, c1, c2 hold no data set 'nowhere'"))
        fail_msg("after a restart: %s", out);
    /* what they hold is still accepted; the job waits for them to rejoin */
    assert_int_equal(try_submit(e, "method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\n"
                                    "R = 3\nrounds = 1\n",
                                NULL, out, sizeof out),
                     0);
}

int main(int argc, char **argv)
{
    /* The in-process simulations here are compared bit for bit with the daemons: run the
     * kernels the daemons choose (common/la/blas_core.h); may re-execute this test once. */
    fk_blas_core_select(argv);
    if (argc < 4) {
        fprintf(stderr, "usage: test_daemons SERVER CLIENT FEDKERN\n");
        return 2;
    }
    server_bin = argv[1];
    client_bin = argv[2];
    fedkern_bin = argv[3];
    /* the in-process simulations below must run the BLAS thread count the daemons pin */
    int threads;
    fk_err err = {0};
    if (fk_blas_threads_setup(&threads, &err) != FK_OK) {
        fprintf(stderr, "test_daemons: %s\n", err.msg);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (getenv("FK_TEST_FILTER")) /* e.g. FK_TEST_FILTER='kahm*' for one family */
        cmocka_set_test_filter(getenv("FK_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(io_threads_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(fedrf_tca_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(fedrf_tca_dense_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(fedrf_tca_voting_select_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(fedgrem_mor_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(dica_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(classes_daemons_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(pooled_em_daemons_end_early, setup, teardown),
        cmocka_unit_test_setup_teardown(roster_survives_server_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(server_kill9_resumes_to_same_model, setup, teardown),
        cmocka_unit_test_setup_teardown(delete_survives_kill9, setup, teardown),
        cmocka_unit_test_setup_teardown(killed_client_is_a_dropout, setup, teardown),
        cmocka_unit_test_setup_teardown(kahm_daemons_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(kahm_daemons_predict_mode_b, setup, teardown),
        cmocka_unit_test_setup_teardown(kahm_daemons_restart_keeps_models, setup, teardown),
        cmocka_unit_test_setup_teardown(kahm_daemons_predict_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(result_of_running_job_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(submit_refusals_and_failure_cause, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
