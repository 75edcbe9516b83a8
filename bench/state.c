/* fedkern bench state: how large the state file grows and how long a start takes (issue 35).
 *
 * Fills a state file through the store API (no network, no method): --jobs jobs of --rounds
 * rounds, each round written as the round engine writes it (the round and its phase opened
 * in one transaction, the --clients updates of --update_kb each committed together, then the
 * close: phase, round metrics, a --checkpoint_kb checkpoint and a --model_kb model, the
 * retention and the job's next position in one transaction). Then: the file's size against
 * the bytes it keeps, and the start-up time (the file's pages dropped from the page cache
 * first, posix_fadvise DONTNEED) after a clean stop and after a crash (the run record says "running").
 *
 * Modes, in the same run: before (every update, checkpoint and model kept, as --audit; the
 * start-up check of before issue 35: PRAGMA quick_check over the whole file) and after (the
 * server's default retention: 2 checkpoints, the latest model, update bytes pruned at each
 * close; the start-up check of schema 6), then `state compact` of the after file. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/la/rng.h"
#include "server/store.h"

typedef struct cfg {
    long jobs, rounds, clients, update_kb, checkpoint_kb, model_kb;
    int sync;
} cfg;

/* Wall seconds of the round-close transactions (where retention runs, on the server's loop). */
static double close_sum, close_max, retain_sum;

static void fill_bytes(uint8_t *b, size_t n, fk_rng *g)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v = fk_rng_u64(g);
        memcpy(b + i, &v, 8);
    }
}

static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        (void)fdatasync(fd);
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

FK_CHECKRETURN static int one_round(fk_store *st, const cfg *c, int64_t job, int round,
                                    uint8_t *buf, fk_rng *g, fk_err *err)
{
    int planned[64];
    for (int i = 0; i < c->clients; i++)
        planned[i] = i;
    int rc = fk_store_begin_relaxed(st, err);
    if (!rc)
        rc = fk_store_round_open(st, job, round, 0, planned, (int)c->clients, (int)c->clients, 1.0,
                                 err);
    if (!rc)
        rc = fk_store_phase_open(st, job, round, 0, 0, 1e9, err);
    if (!rc)
        rc = fk_store_job_set_position(st, job, round, 0, 0, 1.0, err);
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    if (!rc)
        rc = fk_store_begin(st, err);
    for (int k = 0; !rc && k < c->clients; k++) {
        char idem[64], who[16];
        snprintf(idem, sizeof idem, "u-%lld-%d-%d", (long long)job, round, k);
        snprintf(who, sizeof who, "c%d", k);
        fill_bytes(buf, (size_t)c->update_kb << 10, g);
        fk_store_update u = {.job = job,
                             .round = round,
                             .client = k,
                             .identity = who,
                             .idem = idem,
                             .blob = buf,
                             .len = (size_t)c->update_kb << 10,
                             .received = 1.0};
        fk_report_init(&u.report);
        u.report.n_samples = 100;
        u.report.loss = 0.5;
        int dup;
        rc = fk_store_update_put(st, &u, &dup, err);
    }
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    if (rc)
        return rc;
    fk_store_round r = {.job = job,
                        .round = round,
                        .closed = 1,
                        .participants = (int)c->clients,
                        .loss = 0.5,
                        .accuracy = NAN,
                        .error = NAN,
                        .misclust = NAN,
                        .ari = NAN,
                        .rmse = NAN,
                        .model_error = NAN};
    int last = round == c->rounds;
    double t0 = fk_bench_now();
    rc = fk_store_begin_relaxed(st, err);
    if (!rc)
        rc = fk_store_phase_close(st, job, round, 0, 0, (int)c->clients, err);
    if (!rc)
        rc = fk_store_round_close(st, &r, err);
    fill_bytes(buf, (size_t)c->checkpoint_kb << 10, g);
    if (!rc)
        rc = fk_store_checkpoint_put(st, job, round, buf, (size_t)c->checkpoint_kb << 10, err);
    fill_bytes(buf, (size_t)c->model_kb << 10, g);
    if (!rc)
        rc = fk_store_model_put(st, job, round, buf, (size_t)c->model_kb << 10, err);
    double tr = fk_bench_now();
    if (!rc)
        rc = fk_store_retain(st, job, round, last, NULL, err);
    retain_sum += fk_bench_now() - tr;
    if (!rc && last)
        rc = fk_store_job_set_state(st, job, FK_JOB_DONE, NULL, 1.0, err);
    if (!rc && !last)
        rc = fk_store_job_set_position(st, job, round + 1, 0, 0, 1.0, err);
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    double dt = fk_bench_now() - t0;
    close_sum += dt;
    close_max = dt > close_max ? dt : close_max;
    return rc;
}

/* As after a crash once SQLite had folded the -wal into the file: the run record says
 * "running" for this file (what every start writes before it writes anything else). */
static void as_crashed(const char *rec)
{
    char text[512], out[600];
    FILE *f = fopen(rec, "r");
    if (!f)
        return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *at = strstr(text, "state clean");
    if (!at)
        return;
    snprintf(out, sizeof out, "%.*sstate running%s", (int)(at - text), text,
             at + strlen("state clean"));
    f = fopen(rec, "w");
    if (f) {
        fputs(out, f);
        fclose(f);
    }
}

/* Open the file as a server starts: the start-up check, timed. */
FK_CHECKRETURN static int timed_open(const char *path, int full, double *sec, char *mode,
                                     fk_err *err)
{
    drop_cache(path);
    fk_store *st;
    fk_store_open_opts o = {.check_full = full};
    double t0 = fk_bench_now();
    int rc = fk_store_open_ex(&st, path, &o, err);
    *sec = fk_bench_now() - t0;
    if (rc)
        return rc;
    fk_store_startup su;
    fk_store_startup_get(st, &su);
    snprintf(mode, 8, "%s", su.mode);
    fk_store_close(st);
    return FK_OK;
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static double mb(uint64_t b)
{
    return (double)b / (1 << 20);
}

FK_CHECKRETURN static int bench_mode(const cfg *c, int after, const char *dir, int json,
                                     fk_err *err)
{
    char path[512], rec[560];
    snprintf(path, sizeof path, "%s/%s.db", dir, after ? "after" : "before");
    snprintf(rec, sizeof rec, "%s.run", path);
    fk_store *st;
    int rc = fk_store_open(&st, path, err);
    if (rc)
        return rc;
    fk_store_retention keep;
    fk_store_retention_default(&keep);
    if (!after)
        keep = (fk_store_retention){.keep_checkpoints = 0, .keep_updates = 1, .keep_models = 1};
    fk_store_set_retention(st, &keep);
    if (!c->sync)
        rc = fk_store_set_full_sync(st, 0, err);
    size_t cap = (size_t)(c->update_kb > c->checkpoint_kb ? c->update_kb : c->checkpoint_kb);
    cap = (cap > (size_t)c->model_kb ? cap : (size_t)c->model_kb) << 10;
    uint8_t *buf = malloc(cap + 8);
    if (!buf)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    fk_rng g;
    fk_rng_init(&g, 35, 0);
    double t0 = fk_bench_now();
    close_sum = close_max = retain_sum = 0;
    for (long j = 0; !rc && j < c->jobs; j++) {
        int64_t id;
        rc = fk_store_job_insert(st, "bench", "method = bench\n", 1.0, &id, err);
        fill_bytes(buf, (size_t)c->checkpoint_kb << 10, &g);
        if (!rc)
            rc = fk_store_checkpoint_put(st, id, 0, buf, (size_t)c->checkpoint_kb << 10, err);
        for (int r = 1; !rc && r <= c->rounds; r++)
            rc = one_round(st, c, id, r, buf, &g, err);
    }
    double fill = fk_bench_now() - t0;
    free(buf);
    fk_store_usage u = {0};
    if (!rc)
        rc = fk_store_usage_get(st, &u, err);
    fk_store_close(st); /* a clean stop: checkpoints the -wal into the file */
    if (rc)
        return rc;
    uint64_t kept = u.update_bytes + u.checkpoint_bytes + u.model_bytes;
    uint64_t file = file_size(path);
    double clean_s = 0, crash_s = 0, full_s = 0;
    char clean_m[8] = "", crash_m[8] = "", full_m[8] = "";
    if (!after) {
        rc = timed_open(path, 1, &full_s, full_m, err);
    } else {
        rc = timed_open(path, 0, &clean_s, clean_m, err);
        if (!rc) {
            as_crashed(rec);
            rc = timed_open(path, 0, &crash_s, crash_m, err);
        }
        if (!rc) { /* and again as after a crash of a run that wrote nothing */
            as_crashed(rec);
            double s2;
            char m2[8];
            rc = timed_open(path, 0, &s2, m2, err);
        }
    }
    if (rc)
        return rc;
    uint64_t before_c = 0, after_c = 0;
    if (after && (rc = fk_store_compact(path, &before_c, &after_c, err)))
        return rc;
    if (json) {
        printf("{\"bench\":\"state\",\"mode\":\"%s\",\"jobs\":%ld,\"rounds\":%ld,"
               "\"clients\":%ld,\"update_kb\":%ld,\"checkpoint_kb\":%ld,\"model_kb\":%ld,"
               "\"fill_s\":%.3f,\"file_bytes\":%llu,\"kept_blob_bytes\":%llu,"
               "\"free_bytes\":%llu,\"ratio\":%.3f,\"start_full_s\":%.4f,"
               "\"start_clean_s\":%.4f,\"start_crash_s\":%.4f,\"compacted_bytes\":%llu,"
               "\"close_mean_s\":%.5f,\"close_max_s\":%.5f}\n",
               after ? "after" : "before", c->jobs, c->rounds, c->clients, c->update_kb,
               c->checkpoint_kb, c->model_kb, fill, (unsigned long long)file,
               (unsigned long long)kept, (unsigned long long)u.free_bytes,
               kept ? (double)file / (double)kept : 0, full_s, clean_s, crash_s,
               (unsigned long long)after_c, close_sum / (double)(c->jobs * c->rounds), close_max);
    } else {
        printf("%-6s fill %7.1f s  file %9.1f MiB  kept blobs %9.1f MiB (updates %.1f, "
               "checkpoints %.1f, models %.1f)  free %.1f MiB  file/kept %.2f\n",
               after ? "after" : "before", fill, mb(file), mb(kept), mb(u.update_bytes),
               mb(u.checkpoint_bytes), mb(u.model_bytes), mb(u.free_bytes),
               kept ? (double)file / (double)kept : 0);
        printf("       rows: %lld jobs, %lld rounds, %lld updates (%lld pruned), %lld "
               "checkpoints, %lld models\n",
               (long long)u.jobs, (long long)u.rounds, (long long)u.updates,
               (long long)u.updates_pruned, (long long)u.checkpoints, (long long)u.models);
        printf("       round close transaction (checkpoint, model, retention): mean %.4f s, "
               "max %.4f s; of which retention mean %.4f s\n",
               close_sum / (double)(c->jobs * c->rounds), close_max,
               retain_sum / (double)(c->jobs * c->rounds));
        if (!after)
            printf("       start (%s check, cold cache): %.3f s\n", full_m, full_s);
        else
            printf("       start after a clean stop (%s): %.4f s; after a crash (%s): %.4f s; "
                   "compacted: %.1f MiB\n",
                   clean_m, clean_s, crash_m, crash_s, mb(after_c));
    }
    unlink(path);
    unlink(rec);
    return FK_OK;
}

int fk_bench_state(int argc, char **argv)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc || fk_params_get(&p, "help")) {
        fprintf(rc ? stderr : stdout,
                "usage: fedkern bench state [--jobs 100] [--rounds 100] [--clients 4]\n"
                "         [--update_kb 16] [--checkpoint_kb 64] [--model_kb 16] [--sync 0]\n"
                "         [--modes before,after] [--dir /tmp] [--json]\n"
                "Fills a state file through the store API as the round engine writes it (no\n"
                "network) and reports its size against the bytes it keeps and the start-up time\n"
                "(cold page cache) after a clean stop and after a crash; before = every update,\n"
                "checkpoint and model kept and PRAGMA quick_check at start (the server before\n"
                "issue 35), after = the default retention and start-up check. --sync 1 fsyncs\n"
                "every commit as the server does (slower fill, same sizes).\n%s",
                rc ? err.msg : "");
        fk_params_close(&p);
        return rc ? 2 : 0;
    }
    cfg c;
    int json;
    long sync;
    if (fk_params_int(&p, "jobs", 100, 1, 1000000, &c.jobs, &err) ||
        fk_params_int(&p, "rounds", 100, 1, 100000, &c.rounds, &err) ||
        fk_params_int(&p, "clients", 4, 1, 64, &c.clients, &err) ||
        fk_params_int(&p, "update_kb", 16, 1, 1 << 20, &c.update_kb, &err) ||
        fk_params_int(&p, "checkpoint_kb", 64, 1, 1 << 20, &c.checkpoint_kb, &err) ||
        fk_params_int(&p, "model_kb", 16, 1, 1 << 20, &c.model_kb, &err) ||
        fk_params_int(&p, "sync", 0, 0, 1, &sync, &err) ||
        fk_params_bool(&p, "json", 0, &json, &err)) {
        fprintf(stderr, "fedkern bench state: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    c.sync = (int)sync;
    const char *modes = fk_params_str(&p, "modes", "before,after");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fk-bench-state-XXXXXX", fk_params_str(&p, "dir", "/tmp"));
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fedkern bench state: cannot create a directory in --dir\n");
        fk_params_close(&p);
        return 1;
    }
    fk_log_set_level(FK_LOG_ERROR);
    if (strstr(modes, "before"))
        rc = bench_mode(&c, 0, dir, json, &err);
    if (!rc && strstr(modes, "after"))
        rc = bench_mode(&c, 1, dir, json, &err);
    if (rc)
        fprintf(stderr, "fedkern bench state: %s\n", err.msg);
    rmdir(dir);
    fk_params_close(&p);
    return rc ? 1 : 0;
}
