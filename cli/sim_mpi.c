/* fk_sim_run over MPI ranks (issue 38, docs/mpi.md): the one file of the tree with MPI calls.
 *
 * Every rank runs the same command (SPMD). Each fk_sim_run is a session: rank 0 holds the
 * server state and calls the method's ops exactly as common/methods/sim.c does (plan, a task
 * per planned client in client order, fk_sim_close_phase on the updates in client order,
 * finished, model); rank r > 0 holds the clients i with 1 + i mod (P - 1) = r and answers
 * tasks with local_step. Per phase rank 0 sends each rank one message with its clients'
 * encoded tasks (a task equal to the one before it for that rank is sent once) and gets one
 * message back with their updates and reports. At the end every rank gets the model, so
 * the ranks leave fk_sim_run alike and the program goes on identically everywhere (only
 * rank 0 writes to stdout).
 *
 * Dropouts: rank 0 waits for a phase's answers until the job's `deadline` (MPI_Iprobe
 * polling, never a blocking receive); a rank that has not answered by then, or whose MPI
 * calls fail, is gone for the rest of the session and its clients are dropouts; a client
 * whose local_step fails is a dropout for that phase. The phase closes when the updates
 * that came meet the job's `quorum`, as in the daemons; otherwise the run fails.
 * FK_MPI_FAULT_RANK=r (FK_MPI_FAULT_ROUND=k, default 1) makes rank r stop answering from
 * round k on (0: from the start), as a rank that died would; it still leaves at the end. */
#include "cli/sim_mpi.h"

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/methods/method.h"
#include "common/methods/sim.h"
#include "common/net/codec.h"

static int mpi_rank_ = 0;

int fk_mpi_rank(void)
{
    return mpi_rank_;
}

/* Launched by an MPI launcher: Open MPI's mpirun, PMIx (Open MPI 4/5, srun --mpi=pmix), PMI
 * (MPICH's hydra, srun --mpi=pmi2). */
static int launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                                       NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

#if !FK_HAVE_MPI

int fk_mpi_start(int *argc, char ***argv, fk_err *err)
{
    (void)argc;
    (void)argv;
    (void)err;
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n)
        n = getenv("PMI_SIZE");
    if (launched() && n && atoi(n) > 1)
        fprintf(stderr,
                "fedkern: started by an MPI launcher (%s processes) but built without "
                "MPI (meson -Dmpi=enabled with libopenmpi-dev): every process runs the "
                "whole command on its own\n",
                n);
    return FK_OK;
}

int fk_mpi_finish(int status)
{
    return status;
}

#else

#include <mpi.h>

static int mpi_size_ = 1;
static int in_grid; /* a bench grid run: its simulations run whole in this process */

static int owner(int client)
{
    return mpi_size_ <= 1 ? 0 : 1 + client % (mpi_size_ - 1);
}

/* Whether this process holds client `client`'s data (fk_sim_holds): every client in one
 * process (and in a bench grid's run, whose simulations run whole on one rank), none on rank 0
 * of several (the server side needs no data), its own on the other ranks. */
static int holds(int client)
{
    return mpi_size_ <= 1 || in_grid || owner(client) == mpi_rank_;
}

enum {
    TAG_READY = 101, /* w -> 0: client_init's outcome */
    TAG_TASKS,       /* 0 -> w: the phase's tasks of w's clients */
    TAG_UPDATES,     /* w -> 0: their updates */
    TAG_ROUND,       /* 0 -> w: the round's summary (the progress callback) */
    TAG_END,         /* 0 -> w: the outcome, the last round, the model */
    TAG_FINAL,       /* w -> 0: the final evaluation of w's clients */
    TAG_FINALS,      /* 0 -> w: every client's final evaluation */
};

static int mpi_on;
static long session; /* fk_sim_run calls so far: stale messages carry an older one */
/* What this rank sent and received (FK_MPI_STATS=1 prints them at the end on stderr,
 * FK_MPI_STATS=PATH appends them to a file: fedkern bench sim-mpi, bench/sim_mpi.c). */
static struct {
    long rounds, sent_msgs, recv_msgs, grid_runs; /* grid_runs: bench grid runs done here */
    unsigned long long sent_bytes, recv_bytes;
} stats;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FK_CHECKRETURN static int mpi_fail(fk_err *err, int mrc, const char *what, int peer)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "MPI error %d", mrc);
    return fk_err_set(err, FK_ENET, "MPI %s (rank %d): %s", what, peer, s);
}

/* ---- byte buffers ---- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

FK_CHECKRETURN static int put(buf *b, const void *x, size_t n, fk_err *err)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q)
            return fk_err_set(err, FK_ENOMEM, "out of memory for a %zu-byte MPI message", cap);
        b->p = q;
        b->cap = cap;
    }
    if (n && x) /* x NULL: room only (a receive fills it) */
        memcpy(b->p + b->len, x, n);
    b->len += n;
    return FK_OK;
}

FK_CHECKRETURN static int put_i64(buf *b, int64_t v, fk_err *err)
{
    return put(b, &v, sizeof v, err);
}

typedef struct rd {
    const uint8_t *p;
    size_t len, at;
} rd;

FK_CHECKRETURN static int get(rd *r, void *x, size_t n, fk_err *err)
{
    if (n > r->len - r->at)
        return fk_err_set(err, FK_EFORMAT, "MPI message of %zu bytes ends early at byte %zu",
                          r->len, r->at);
    memcpy(x, r->p + r->at, n);
    r->at += n;
    return FK_OK;
}

FK_CHECKRETURN static int get_i64(rd *r, int64_t *v, fk_err *err)
{
    return get(r, v, sizeof *v, err);
}

/* n bytes of r in place */
FK_CHECKRETURN static int get_view(rd *r, int64_t n, const uint8_t **p, fk_err *err)
{
    if (n < 0 || (uint64_t)n > r->len - r->at)
        return fk_err_set(err, FK_EFORMAT, "MPI message: a field of %lld bytes past its end",
                          (long long)n);
    *p = r->p + r->at;
    r->at += (size_t)n;
    return FK_OK;
}

/* ---- sends in flight (never a blocking send: a peer that stopped receiving never blocks
 * this rank) ---- */

typedef struct pending {
    MPI_Request req;
    buf b;
    int peer;
} pending;

static pending *pend;
static int n_pend, cap_pend;

static void pend_poll(void)
{
    int j = 0;
    for (int i = 0; i < n_pend; i++) {
        int flag = 0;
        if (MPI_Test(&pend[i].req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag)
            free(pend[i].b.p);
        else
            pend[j++] = pend[i];
    }
    n_pend = j;
}

/* Send b (taken over: freed once sent) to peer. */
FK_CHECKRETURN static int send_buf(buf *b, int peer, int tag, fk_err *err)
{
    if (b->len > INT32_MAX) {
        free(b->p);
        *b = (buf){0};
        return fk_err_set(err, FK_ELIMIT, "an MPI message of %zu bytes to rank %d: at most 2 GiB",
                          b->len, peer);
    }
    pend_poll();
    if (n_pend == cap_pend) {
        int cap = cap_pend ? 2 * cap_pend : 16;
        pending *q = realloc(pend, (size_t)cap * sizeof *q);
        if (!q) {
            free(b->p);
            *b = (buf){0};
            return fk_err_set(err, FK_ENOMEM, "out of memory for MPI sends");
        }
        pend = q;
        cap_pend = cap;
    }
    pending *s = &pend[n_pend];
    s->b = *b;
    s->peer = peer;
    *b = (buf){0};
    int mrc = MPI_Isend(s->b.p, (int)s->b.len, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &s->req);
    if (mrc != MPI_SUCCESS) {
        free(s->b.p);
        return mpi_fail(err, mrc, "send", peer);
    }
    stats.sent_msgs++;
    stats.sent_bytes += s->b.len;
    n_pend++;
    return FK_OK;
}

/* Wait for the sends in flight until `until` (seconds, now_seconds clock); a send that a
 * gone peer never takes is left to MPI (its buffer kept: MPI may still read it). */
static void pend_drain(double until)
{
    while (n_pend > 0 && now_seconds() < until) {
        pend_poll();
        if (n_pend > 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < n_pend; i++)
        if (MPI_Request_free(&pend[i].req) != MPI_SUCCESS)
            continue;
    n_pend = 0;
}

/* Receive one message of tag from src (MPI_ANY_SOURCE: anyone) into *b, polling until the
 * clock passes until (INFINITY: wait). 1: got one (*from its sender), 0: time is up. */
FK_CHECKRETURN static int recv_msg(int src, int tag, double until, buf *b, int *from, fk_err *err)
{
    long spins = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        int mrc = MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
        if (mrc != MPI_SUCCESS)
            return mpi_fail(err, mrc, "probe", src);
        if (flag) {
            int count = 0;
            if ((mrc = MPI_Get_count(&st, MPI_BYTE, &count)) != MPI_SUCCESS)
                return mpi_fail(err, mrc, "message size", st.MPI_SOURCE);
            b->len = 0;
            if (put(b, NULL, (size_t)count, err))
                return FK_ENOMEM;
            mrc = MPI_Recv(b->p, count, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
            if (mrc != MPI_SUCCESS)
                return mpi_fail(err, mrc, "receive", st.MPI_SOURCE);
            stats.recv_msgs++;
            stats.recv_bytes += (unsigned long long)count;
            *from = st.MPI_SOURCE;
            return 1;
        }
        pend_poll();
        if (now_seconds() >= until)
            return 0;
        /* 20 us while answers come in, up to 1 ms when idle */
        long ns = spins < 50 ? 20000 : spins < 500 ? 200000 : 1000000;
        spins++;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
    }
}

/* ---- rank 0: the server side ---- */

typedef struct server {
    const fk_method *m;
    const fk_sim_opts *o;
    void *srv;
    int n, P;
    double deadline, quorum;
    fk_update *ups;
    unsigned char *arrived;
    int *chosen;
    int *drop_round;     /* per client: the first round it dropped out of (0: never) */
    unsigned char *gone; /* per rank */
    fk_rng drop_rng;
} server;

static void say_gone(server *s, int w, const char *why)
{
    if (s->gone[w])
        return;
    s->gone[w] = 1;
    int k = 0;
    for (int c = w - 1; c < s->n; c += s->P - 1)
        k++;
    fprintf(stderr, "fedkern sim: rank %d %s: its %d clients are dropouts from here on\n", w, why,
            k);
}

/* The READY of every rank: a client_init failure fails the run (as in one process); a rank
 * silent past the deadline is gone. */
FK_CHECKRETURN static int server_ready(server *s, fk_err *err)
{
    int want = 0, bad_rank = s->P;
    int rc = FK_OK;
    unsigned char *seen = calloc((size_t)s->P, 1);
    if (!seen)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (int w = 1; w < s->P; w++)
        want += !s->gone[w];
    double until = now_seconds() + s->deadline;
    buf b = {0};
    fk_err first = {0};
    while (rc == FK_OK && want > 0) {
        int from = 0;
        int got = recv_msg(MPI_ANY_SOURCE, TAG_READY, until, &b, &from, err);
        if (got < 0)
            rc = got;
        if (got <= 0)
            break;
        rd r = {b.p, b.len, 0};
        int64_t sess = 0, status = 0, len = 0;
        const uint8_t *msg = NULL;
        fk_err perr = {0};
        if (get_i64(&r, &sess, &perr) || sess != session || seen[from])
            continue;
        seen[from] = 1;
        want--;
        if (get_i64(&r, &status, &perr) || get_i64(&r, &len, &perr) ||
            get_view(&r, len, &msg, &perr)) {
            say_gone(s, from, "sent a malformed READY");
            continue;
        }
        if (status != FK_OK && from < bad_rank) { /* the lowest rank's error: deterministic */
            bad_rank = from;
            fk_err_set(&first, (int)status, "rank %d: %.*s", from, (int)len, (const char *)msg);
        }
    }
    free(b.p);
    for (int w = 1; rc == FK_OK && w < s->P; w++)
        if (!seen[w] && !s->gone[w])
            say_gone(s, w, "did not start its clients by the deadline");
    free(seen);
    if (rc == FK_OK && bad_rank < s->P) {
        *err = first;
        rc = first.code ? first.code : FK_EINVAL;
    }
    return rc;
}

/* Index of client c in the sorted plan, or -1. */
static int plan_index(const int *chosen, int n, int c)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (chosen[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && chosen[lo] == c ? lo : -1;
}

/* One phase's answers from rank `from` into s->ups / s->arrived. */
FK_CHECKRETURN static int take_updates(server *s, int round, int phase, int n_chosen, int from,
                                       rd *r, fk_err *err)
{
    int64_t count = 0;
    int rc = get_i64(r, &count, err);
    for (int64_t i = 0; rc == FK_OK && i < count; i++) {
        int64_t c = 0, status = 0, len = 0;
        fk_report rep;
        fk_report_init(&rep);
        const uint8_t *bytes = NULL;
        rc = get_i64(r, &c, err);
        if (!rc)
            rc = get_i64(r, &status, err);
        if (!rc)
            rc = get(r, &rep, sizeof rep, err);
        if (!rc)
            rc = get_i64(r, &len, err);
        if (!rc)
            rc = get_view(r, len, &bytes, err);
        if (rc)
            break;
        int k = c >= 0 && c < s->n && owner((int)c) == from
                    ? plan_index(s->chosen, n_chosen, (int)c)
                    : -1;
        if (k < 0)
            return fk_err_set(err, FK_EFORMAT,
                              "rank %d answered for client %lld, not one of its "
                              "planned clients",
                              from, (long long)c);
        if (status != FK_OK) {
            fprintf(stderr,
                    "fedkern sim: client %lld (rank %d), round %d phase %d: %.*s: a "
                    "dropout\n",
                    (long long)c, from, round, phase, (int)len, (const char *)bytes);
            continue;
        }
        fk_update *u = &s->ups[k];
        fk_bundle_close(&u->msg);
        fk_bundle_init(&u->msg);
        fk_err derr = {0};
        if (fk_codec_bundle_decode(bytes, (size_t)len, &u->msg, &derr) != FK_OK) {
            fprintf(stderr,
                    "fedkern sim: client %lld (rank %d), round %d phase %d: update does "
                    "not decode (%s): a dropout\n",
                    (long long)c, from, round, phase, derr.msg);
            continue;
        }
        u->report = rep;
        s->arrived[k] = 1;
    }
    return rc;
}

FK_CHECKRETURN static int server_phase(server *s, int round, int phase, int n_chosen,
                                       fk_sim_round *r, int *done, fk_err *err)
{
    int P = s->P, rc = FK_OK;
    buf *batch = calloc((size_t)P, sizeof *batch);
    buf *prev = calloc((size_t)P, sizeof *prev); /* last task bytes sent to each rank */
    int64_t *count = calloc((size_t)P, sizeof *count);
    unsigned char *waiting = calloc((size_t)P, 1);
    fk_bundle task;
    fk_bundle_init(&task);
    if (!batch || !prev || !count || !waiting)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory for a phase over %d ranks", P);
    for (int k = 0; rc == FK_OK && k < n_chosen; k++) {
        int c = s->chosen[k], w = owner(c);
        fk_update *u = &s->ups[k];
        fk_bundle_clear(&u->msg);
        fk_report_init(&u->report);
        u->client = c;
        s->arrived[k] = 0;
        if (s->gone[w])
            continue;
        fk_bundle_clear(&task);
        rc = s->m->task(s->srv, round, phase, c, &task, err);
        if (rc)
            break;
        r->bytes += 8 * fk_bundle_values(&task);
        uint8_t *enc = NULL;
        size_t len = 0;
        if ((rc = fk_codec_bundle_encode(&task, &enc, &len, err)))
            break;
        if (!count[w])
            rc = put_i64(&batch[w], session, err);
        if (!rc && !count[w])
            rc = put_i64(&batch[w], round, err);
        if (!rc && !count[w])
            rc = put_i64(&batch[w], phase, err);
        if (!rc && !count[w])
            rc = put_i64(&batch[w], 0, err); /* the count, filled in below */
        int same = prev[w].len == len && (len == 0 || !memcmp(prev[w].p, enc, len));
        if (!rc)
            rc = put_i64(&batch[w], c, err);
        if (!rc)
            rc = put_i64(&batch[w], same ? -1 : (int64_t)len, err);
        if (!rc && !same)
            rc = put(&batch[w], enc, len, err);
        if (!rc && !same) {
            prev[w].len = 0;
            rc = put(&prev[w], enc, len, err);
        }
        free(enc);
        count[w]++;
    }
    for (int w = 1; rc == FK_OK && w < P; w++) {
        if (!count[w])
            continue;
        memcpy(batch[w].p + 3 * sizeof(int64_t), &count[w], sizeof count[w]);
        fk_err serr = {0};
        if (send_buf(&batch[w], w, TAG_TASKS, &serr) != FK_OK) {
            if (serr.code == FK_ENOMEM || serr.code == FK_ELIMIT) {
                *err = serr;
                rc = serr.code;
            } else {
                say_gone(s, w, serr.msg);
            }
            continue;
        }
        waiting[w] = 1;
    }
    /* the answers, until the deadline */
    double until = now_seconds() + s->deadline;
    buf b = {0};
    for (;;) {
        int left = 0;
        for (int w = 1; w < P; w++)
            left += waiting[w] && !s->gone[w];
        if (rc != FK_OK || left == 0)
            break;
        int from = 0;
        int got = recv_msg(MPI_ANY_SOURCE, TAG_UPDATES, until, &b, &from, err);
        if (got < 0)
            rc = got;
        if (got <= 0)
            break;
        rd m = {b.p, b.len, 0};
        int64_t h[3] = {0};
        fk_err perr = {0};
        if (get(&m, h, sizeof h, &perr) || h[0] != session || h[1] != round || h[2] != phase ||
            !waiting[from] || s->gone[from])
            continue; /* a late answer to an earlier phase */
        waiting[from] = 0;
        rc = take_updates(s, round, phase, n_chosen, from, &m, err);
    }
    free(b.p);
    if (rc == FK_OK) {
        char why[96];
        snprintf(why, sizeof why, "did not answer round %d phase %d within the deadline (%g s)",
                 round, phase, s->deadline);
        for (int w = 1; w < P; w++)
            if (waiting[w] && !s->gone[w])
                say_gone(s, w, why);
        int came = 0;
        for (int k = 0; k < n_chosen; k++) {
            came += s->arrived[k];
            int c = s->chosen[k];
            if (!s->arrived[k] && !s->drop_round[c])
                s->drop_round[c] = round;
        }
        int q = (int)ceil(s->quorum * n_chosen - 1e-9);
        q = q < 1 ? 1 : q > n_chosen ? n_chosen : q;
        if (n_chosen > 0 && came < q)
            rc = fk_err_set(err, FK_ESTATE,
                            "round %d phase %d: %d of %d updates came by the deadline, the "
                            "quorum is %d (job key quorum = %g); see the dropouts above",
                            round, phase, came, n_chosen, q, s->quorum);
    }
    if (rc == FK_OK)
        rc = fk_sim_close_phase(s->m, s->srv, round, phase, s->ups, s->arrived, n_chosen,
                                s->o->drop, &s->drop_rng, r, done, err);
    for (int w = 0; batch && w < P; w++)
        free(batch[w].p);
    for (int w = 0; prev && w < P; w++)
        free(prev[w].p);
    free(batch);
    free(prev);
    free(count);
    free(waiting);
    fk_bundle_close(&task);
    return rc;
}

/* Every rank gets b (a copy each); a gone rank only the end of the session (TAG_END,
 * TAG_FINALS: a rank that is only silent leaves with the others). Nothing else is sent to a
 * rank that takes nothing: with Open MPI's shared-memory transport the sends a dead rank never
 * takes would use up the fragments the live ranks' sends need. */
FK_CHECKRETURN static int send_all(server *s, const buf *b, int tag, fk_err *err)
{
    for (int w = 1; w < s->P; w++) {
        if (s->gone[w] && tag != TAG_END && tag != TAG_FINALS)
            continue;
        buf c = {0};
        int rc = put(&c, b->p, b->len, err);
        if (rc)
            return rc;
        fk_err serr = {0};
        if (send_buf(&c, w, tag, &serr) != FK_OK)
            say_gone(s, w, serr.msg);
    }
    return FK_OK;
}

/* The final evaluations of the ranks' clients (NaN for a rank gone), then to every rank. */
FK_CHECKRETURN static int server_finals(server *s, fk_report *out, fk_err *err)
{
    for (int c = 0; c < s->n; c++)
        fk_report_init(&out[c]);
    int want = 0, rc = FK_OK;
    unsigned char *seen = calloc((size_t)s->P, 1);
    if (!seen)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (int w = 1; w < s->P; w++)
        want += !s->gone[w];
    double until = now_seconds() + s->deadline;
    buf b = {0};
    while (want > 0) {
        int from = 0;
        int got = recv_msg(MPI_ANY_SOURCE, TAG_FINAL, until, &b, &from, err);
        if (got < 0)
            rc = got;
        if (got <= 0)
            break;
        rd r = {b.p, b.len, 0};
        int64_t sess = 0, count = 0;
        fk_err perr = {0};
        if (get_i64(&r, &sess, &perr) || sess != session || seen[from] || s->gone[from])
            continue;
        seen[from] = 1;
        want--;
        if (get_i64(&r, &count, &perr))
            continue;
        for (int64_t i = 0; i < count; i++) {
            int64_t c = 0;
            fk_report rep;
            fk_report_init(&rep);
            if (get_i64(&r, &c, &perr) || get(&r, &rep, sizeof rep, &perr))
                break;
            if (c >= 0 && c < s->n && owner((int)c) == from)
                out[c] = rep;
        }
    }
    for (int w = 1; w < s->P; w++)
        if (!seen[w] && !s->gone[w])
            say_gone(s, w, "did not send its final evaluation by the deadline");
    free(seen);
    b.len = 0;
    if (rc == FK_OK)
        rc = put_i64(&b, session, err);
    if (rc == FK_OK)
        rc = put(&b, out, (size_t)s->n * sizeof *out, err);
    if (rc == FK_OK)
        rc = send_all(s, &b, TAG_FINALS, err);
    free(b.p);
    return rc;
}

/* One line (one write: mpirun interleaves the ranks' stderr by writes). */
static void say_dropouts(const server *s)
{
    int any = 0;
    for (int c = 0; c < s->n; c++)
        any += s->drop_round[c] != 0;
    if (!any)
        return;
    char line[4096];
    size_t at = (size_t)snprintf(line, sizeof line,
                                 "fedkern sim: %d of %d clients dropped out:", any, s->n);
    int shown = 0;
    for (int c = 0; c < s->n && at < sizeof line - 64; c++)
        if (s->drop_round[c]) {
            at += (size_t)snprintf(line + at, sizeof line - at, " %d (rank %d, round %d)", c,
                                   owner(c), s->drop_round[c]);
            shown++;
        }
    fprintf(stderr, "%s%s\n", line, any > shown ? " ..." : "");
}

FK_CHECKRETURN static int mpi_server(const fk_method *m, const fk_params *p, int n,
                                     const fk_sim_opts *o, fk_bundle *model, fk_sim_round *last,
                                     fk_err *err)
{
    server s = {.m = m, .o = o, .n = n, .P = mpi_size_};
    fk_sim_drop_rng(&s.drop_rng, o->seed);
    s.ups = calloc((size_t)n, sizeof *s.ups);
    s.arrived = calloc((size_t)n, 1);
    s.chosen = calloc((size_t)n, sizeof *s.chosen);
    s.drop_round = calloc((size_t)n, sizeof *s.drop_round);
    s.gone = calloc((size_t)s.P, 1);
    int rc = FK_OK;
    if (!s.ups || !s.arrived || !s.chosen || !s.drop_round || !s.gone)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory for %d simulated clients", n);
    for (int i = 0; s.ups && i < n; i++)
        fk_bundle_init(&s.ups[i].msg);
    if (rc == FK_OK)
        rc = fk_params_double(p, "deadline", 60.0, 1e-3, 1e9, &s.deadline, err);
    if (rc == FK_OK)
        rc = fk_params_double(p, "quorum", 0.5, 0.0, 1.0, &s.quorum, err);
    if (rc == FK_OK)
        rc = m->server_init(&s.srv, p, n, o->seed, err);
    if (rc == FK_OK)
        rc = server_ready(&s, err);
    fk_sim_round r = {0};
    for (int round = 1; rc == FK_OK && round <= o->rounds; round++) {
        r = (fk_sim_round){.round = round};
        double t0 = now_seconds();
        fk_rng plan_rng;
        fk_sim_plan_rng(&plan_rng, o->seed, round);
        int n_chosen = 0;
        if ((rc = m->plan(s.srv, round, &plan_rng, s.chosen, &n_chosen, err)))
            break;
        fk_sim_sort_plan(s.chosen, n_chosen);
        r.planned = n_chosen;
        int done = 0;
        for (int phase = 0; rc == FK_OK && !done; phase++) {
            if (phase == 16) {
                rc = fk_err_set(err, FK_ESTATE, "method %s did not finish round %d in %d phases",
                                m->name, round, 16);
                break;
            }
            rc = server_phase(&s, round, phase, n_chosen, &r, &done, err);
        }
        r.seconds = now_seconds() - t0;
        stats.rounds++;
        if (rc == FK_OK) {
            if (o->progress)
                o->progress(&r, o->ctx);
            buf b = {0};
            rc = put_i64(&b, session, err);
            if (!rc)
                rc = put(&b, &r, sizeof r, err);
            if (!rc)
                rc = send_all(&s, &b, TAG_ROUND, err);
            free(b.p);
        }
        if (last)
            *last = r;
        if (rc == FK_OK && m->finished && m->finished(s.srv))
            break;
    }
    /* the end, to every rank (also on failure: they leave fk_sim_run with the same error) */
    uint8_t *enc = NULL;
    size_t len = 0;
    int want_finals = model && o->final_reports && m->evaluate;
    if (rc == FK_OK && model) {
        fk_bundle_init(model);
        rc = m->model(s.srv, model, err);
        if (rc == FK_OK)
            rc = fk_codec_bundle_encode(model, &enc, &len, err);
        if (rc != FK_OK)
            fk_bundle_close(model);
    }
    buf b = {0};
    fk_err e2 = {0};
    const char *msg = rc ? err->msg : "";
    int64_t mlen = (int64_t)strlen(msg);
    int brc = put_i64(&b, session, &e2);
    if (!brc)
        brc = put_i64(&b, rc, &e2);
    if (!brc)
        brc = put_i64(&b, want_finals && rc == FK_OK, &e2);
    if (!brc)
        brc = put_i64(&b, mlen, &e2);
    if (!brc)
        brc = put(&b, msg, (size_t)mlen, &e2);
    if (!brc)
        brc = put(&b, &r, sizeof r, &e2);
    if (!brc)
        brc = put_i64(&b, model && rc == FK_OK ? (int64_t)len : -1, &e2);
    if (!brc)
        brc = put(&b, enc, model && rc == FK_OK ? len : 0, &e2);
    if (!brc)
        brc = send_all(&s, &b, TAG_END, &e2);
    free(b.p);
    free(enc);
    if (brc && rc == FK_OK) {
        *err = e2;
        rc = brc;
        if (model)
            fk_bundle_close(model);
    }
    if (rc == FK_OK && want_finals) {
        rc = server_finals(&s, o->final_reports, err);
        if (rc != FK_OK)
            fk_bundle_close(model);
    }
    say_dropouts(&s);
    pend_drain(now_seconds() + (s.deadline < 10 ? s.deadline : 10));
    if (s.srv)
        m->server_close(s.srv);
    for (int i = 0; s.ups && i < n; i++)
        fk_bundle_close(&s.ups[i].msg);
    free(s.ups);
    free(s.arrived);
    free(s.chosen);
    free(s.drop_round);
    free(s.gone);
    return rc;
}

/* ---- ranks > 0: the clients ---- */

typedef struct worker {
    const fk_method *m;
    void **cli; /* n entries; only this rank's are set */
    int n;
    int fault_round; /* FK_MPI_FAULT_RANK is this rank: silent from this round; -1: never */
} worker;

FK_CHECKRETURN static int worker_tasks(worker *w, rd *r, fk_err *err)
{
    int64_t round = 0, phase = 0, count = 0;
    int rc = get_i64(r, &round, err);
    if (!rc)
        rc = get_i64(r, &phase, err);
    if (!rc)
        rc = get_i64(r, &count, err);
    if (rc)
        return rc;
    if (w->fault_round >= 0 && round >= w->fault_round)
        return FK_OK; /* FK_MPI_FAULT_RANK: as if this rank had died */
    buf out = {0};
    fk_bundle task, upd;
    fk_bundle_init(&task);
    fk_bundle_init(&upd);
    rc = put_i64(&out, session, err);
    if (!rc)
        rc = put_i64(&out, round, err);
    if (!rc)
        rc = put_i64(&out, phase, err);
    if (!rc)
        rc = put_i64(&out, count, err);
    int have_task = 0;
    for (int64_t i = 0; rc == FK_OK && i < count; i++) {
        int64_t c = 0, len = 0;
        const uint8_t *bytes = NULL;
        rc = get_i64(r, &c, err);
        if (!rc)
            rc = get_i64(r, &len, err);
        if (!rc && len >= 0) {
            rc = get_view(r, len, &bytes, err);
            fk_bundle_close(&task);
            fk_bundle_init(&task);
            have_task = 0;
            if (!rc)
                rc = fk_codec_bundle_decode(bytes, (size_t)len, &task, err);
            have_task = rc == FK_OK;
        }
        if (rc == FK_OK && (!have_task || c < 0 || c >= w->n || !w->cli[c]))
            rc = fk_err_set(err, FK_EFORMAT, "a task for client %lld, not one of this rank's",
                            (long long)c);
        if (rc)
            break;
        fk_report rep;
        fk_report_init(&rep);
        fk_bundle_clear(&upd);
        fk_err cerr = {0};
        int st = w->m->local_step(w->cli[c], &task, &upd, &rep, &cerr);
        uint8_t *enc = NULL;
        size_t elen = 0;
        if (st == FK_OK)
            st = fk_codec_bundle_encode(&upd, &enc, &elen, &cerr);
        rc = put_i64(&out, c, err);
        if (!rc)
            rc = put_i64(&out, st, err);
        if (!rc)
            rc = put(&out, &rep, sizeof rep, err);
        const void *payload = st == FK_OK ? (const void *)enc : (const void *)cerr.msg;
        size_t plen = st == FK_OK ? elen : strlen(cerr.msg);
        if (!rc)
            rc = put_i64(&out, (int64_t)plen, err);
        if (!rc)
            rc = put(&out, payload, plen, err);
        free(enc);
    }
    if (rc == FK_OK)
        rc = send_buf(&out, 0, TAG_UPDATES, err);
    free(out.p);
    fk_bundle_close(&task);
    fk_bundle_close(&upd);
    return rc;
}

/* The END message: the outcome (an error rank 0 had), the last round, the model, then the
 * final evaluations. 1 when the session is over. */
FK_CHECKRETURN static int worker_end(worker *w, rd *r, const fk_sim_opts *o, fk_bundle *model,
                                     fk_sim_round *last, fk_err *err)
{
    int64_t status = 0, finals = 0, mlen = 0, blen = 0;
    const uint8_t *msg = NULL, *bytes = NULL;
    fk_sim_round rr = {0};
    int rc = get_i64(r, &status, err);
    if (!rc)
        rc = get_i64(r, &finals, err);
    if (!rc)
        rc = get_i64(r, &mlen, err);
    if (!rc)
        rc = get_view(r, mlen, &msg, err);
    if (!rc)
        rc = get(r, &rr, sizeof rr, err);
    if (!rc)
        rc = get_i64(r, &blen, err);
    if (rc)
        return rc;
    if (last)
        *last = rr;
    if (status != FK_OK)
        return fk_err_set(err, (int)status, "%.*s", (int)mlen, (const char *)msg);
    if (model && blen >= 0) {
        fk_bundle_init(model);
        rc = get_view(r, blen, &bytes, err);
        if (!rc)
            rc = fk_codec_bundle_decode(bytes, (size_t)blen, model, err);
        if (rc)
            return rc;
    }
    if (!finals)
        return FK_OK;
    buf out = {0};
    int64_t mine = 0;
    for (int c = 0; c < w->n; c++)
        mine += w->cli[c] != NULL;
    rc = put_i64(&out, session, err);
    if (!rc)
        rc = put_i64(&out, mine, err);
    for (int c = 0; rc == FK_OK && c < w->n; c++) {
        if (!w->cli[c])
            continue;
        fk_report rep;
        fk_report_init(&rep);
        fk_err eerr = {0};
        if (w->m->evaluate(w->cli[c], model, &rep, &eerr) != FK_OK) {
            fprintf(stderr, "fedkern sim: client %d (rank %d), final evaluation: %s\n", c,
                    mpi_rank_, eerr.msg);
            fk_report_init(&rep);
        }
        rc = put_i64(&out, c, err);
        if (!rc)
            rc = put(&out, &rep, sizeof rep, err);
    }
    if (rc == FK_OK && w->fault_round < 0)
        rc = send_buf(&out, 0, TAG_FINAL, err);
    free(out.p);
    /* every client's evaluation, from rank 0 */
    buf b = {0};
    int from = 0;
    for (; rc == FK_OK;) {
        int got = recv_msg(0, TAG_FINALS, INFINITY, &b, &from, err);
        if (got <= 0) {
            rc = got < 0 ? got : FK_ENET;
            break;
        }
        rd f = {b.p, b.len, 0};
        int64_t sess = 0;
        if ((rc = get_i64(&f, &sess, err)) || sess != session)
            continue;
        rc = get(&f, o->final_reports, (size_t)w->n * sizeof *o->final_reports, err);
        break;
    }
    free(b.p);
    return rc;
}

FK_CHECKRETURN static int mpi_worker(const fk_method *m, const fk_params *p,
                                     const fk_dataset *clients, int n, const fk_sim_opts *o,
                                     fk_bundle *model, fk_sim_round *last, fk_err *err)
{
    worker w = {.m = m, .n = n, .fault_round = -1};
    const char *fr = getenv("FK_MPI_FAULT_RANK");
    if (fr && atoi(fr) == mpi_rank_) {
        const char *k = getenv("FK_MPI_FAULT_ROUND");
        w.fault_round = k ? atoi(k) : 1;
    }
    w.cli = calloc((size_t)n, sizeof *w.cli);
    int rc = w.cli ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory for %d clients", n);
    fk_err ierr = {0};
    int status = FK_OK;
    for (int c = 0; rc == FK_OK && status == FK_OK && c < n; c++)
        if (owner(c) == mpi_rank_) {
            status = m->client_init(&w.cli[c], p, &clients[c], c, n, o->seed, &ierr);
            if (status)
                status = fk_err_prefix(&ierr, status, "client %d (%s): ", c, clients[c].name);
        }
    buf b = {0};
    if (rc == FK_OK)
        rc = put_i64(&b, session, err);
    if (rc == FK_OK)
        rc = put_i64(&b, status, err);
    if (rc == FK_OK)
        rc = put_i64(&b, status ? (int64_t)strlen(ierr.msg) : 0, err);
    if (rc == FK_OK && status)
        rc = put(&b, ierr.msg, strlen(ierr.msg), err);
    if (rc == FK_OK && w.fault_round != 0)
        rc = send_buf(&b, 0, TAG_READY, err);
    free(b.p);
    b = (buf){0};
    /* rank 0 leads: tasks, round summaries, the end */
    int over = 0;
    while (rc == FK_OK && !over) {
        int flag = 0, from = 0;
        MPI_Status st;
        /* any tag: rank 0's messages in the order it sent them */
        int mrc = MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (mrc != MPI_SUCCESS) {
            rc = mpi_fail(err, mrc, "probe", 0);
            break;
        }
        if (!flag) {
            pend_poll();
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        int got = st.MPI_TAG;
        int g = recv_msg(0, got, INFINITY, &b, &from, err);
        if (g <= 0) {
            rc = g < 0 ? g : FK_ENET;
            break;
        }
        rd r = {b.p, b.len, 0};
        int64_t sess = 0;
        if ((rc = get_i64(&r, &sess, err)))
            break;
        if (sess != session)
            continue;
        if (got == TAG_TASKS) {
            rc = worker_tasks(&w, &r, err);
        } else if (got == TAG_FINALS) {
            continue; /* of a session this rank left early */
        } else if (got == TAG_ROUND) {
            fk_sim_round rr = {0};
            if ((rc = get(&r, &rr, sizeof rr, err)))
                break;
            stats.rounds++;
            if (o->progress) /* this rank's stdout is /dev/null: the callback's state alike */
                o->progress(&rr, o->ctx);
        } else {
            rc = worker_end(&w, &r, o, model, last, err);
            over = 1;
        }
    }
    free(b.p);
    pend_drain(now_seconds() + 10);
    for (int c = 0; w.cli && c < n; c++)
        if (w.cli[c])
            m->client_close(w.cli[c]);
    free(w.cli);
    if (rc == FK_OK && status != FK_OK) { /* rank 0 failed the run on it too */
        *err = ierr;
        rc = status;
    }
    return rc;
}

FK_CHECKRETURN static int mpi_driver(const fk_method *m, const fk_params *p,
                                     const fk_dataset *clients, int n_clients, const fk_sim_opts *o,
                                     fk_bundle *model, fk_sim_round *last, fk_err *err)
{
    session++;
    return mpi_rank_ == 0 ? mpi_server(m, p, n_clients, o, model, last, err)
                          : mpi_worker(m, p, clients, n_clients, o, model, last, err);
}

/* A bench grid over the ranks (fk_bench_grid): run i on rank i mod P, each run in this
 * process (the simulation driver off meanwhile, so a run's fk_sim_run does not also spread
 * its clients), then one MPI_Allreduce (bitwise OR of zero-filled slots, each written by
 * one rank only) gives every rank every run's outcome and out in order. A rank stops at its
 * first failing run; the lowest failing run decides, as in one process. No deadline here:
 * a rank that dies ends the job (Open MPI's default). */
typedef struct grid_slot {
    int32_t done, rc;
    char msg[sizeof((fk_err *)0)->msg];
} grid_slot;

FK_CHECKRETURN static int mpi_grid(int n, size_t out_size, fk_bench_run_fn run, void *ctx,
                                   void *outs, int *n_done, fk_err *err)
{
    size_t slot = sizeof(grid_slot) + out_size;
    slot = (slot + 7) / 8 * 8;
    if (n < 0 || (n > 0 && slot > (size_t)INT32_MAX / (size_t)n))
        return fk_err_set(err, FK_EINVAL, "bench grid: %d runs of %zu bytes do not fit one message",
                          n, out_size);
    unsigned char *mine = calloc((size_t)n ? (size_t)n : 1, slot);
    unsigned char *all = calloc((size_t)n ? (size_t)n : 1, slot);
    if (!mine || !all) {
        free(mine);
        free(all);
        return fk_err_set(err, FK_ENOMEM, "out of memory for a bench grid of %d runs", n);
    }
    fk_sim_set_driver(NULL);
    in_grid = 1;
    for (int i = mpi_rank_; i < n; i += mpi_size_) {
        grid_slot *g = (grid_slot *)(mine + (size_t)i * slot);
        fk_err e = {0};
        g->done = 1;
        stats.grid_runs++;
        g->rc = run(ctx, i, mine + (size_t)i * slot + sizeof(grid_slot), &e);
        if (g->rc != FK_OK) {
            memcpy(g->msg, e.msg, sizeof g->msg);
            g->msg[sizeof g->msg - 1] = 0;
            break;
        }
    }
    fk_sim_set_driver(mpi_driver);
    in_grid = 0;
    int mrc = MPI_Allreduce(mine, all, (int)(slot * (size_t)n), MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    free(mine);
    int rc = FK_OK;
    if (mrc != MPI_SUCCESS) {
        rc = mpi_fail(err, mrc, "bench grid", 0);
        *n_done = 0;
    }
    for (int i = 0; i < n && rc == FK_OK; i++) {
        const grid_slot *g = (const grid_slot *)(all + (size_t)i * slot);
        if (g->done && g->rc == FK_OK) {
            memcpy((char *)outs + (size_t)i * out_size, all + (size_t)i * slot + sizeof(grid_slot),
                   out_size);
            continue;
        }
        *n_done = i;
        rc = g->done ? fk_err_set(err, g->rc, "%s", g->msg)
                     : fk_err_set(err, FK_EINVAL, "bench grid: run %d was not run (rank %d)", i,
                                  i % mpi_size_);
    }
    if (rc == FK_OK)
        *n_done = n;
    free(all);
    return rc;
}

int fk_mpi_start(int *argc, char ***argv, fk_err *err)
{
    if (!launched())
        return FK_OK;
    int mrc = MPI_Init(argc, argv);
    if (mrc != MPI_SUCCESS)
        return fk_err_set(err, FK_ENET, "MPI_Init failed (%d): is this mpirun's environment?", mrc);
    mpi_on = 1;
    if ((mrc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        (mrc = MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank_)) != MPI_SUCCESS ||
        (mrc = MPI_Comm_size(MPI_COMM_WORLD, &mpi_size_)) != MPI_SUCCESS)
        return mpi_fail(err, mrc, "start", 0);
    if (mpi_size_ > 1) {
        fk_sim_set_driver(mpi_driver);
        fk_sim_set_holds(holds);
        fk_bench_set_grid_driver(mpi_grid);
        if (mpi_rank_ > 0 && !freopen("/dev/null", "w", stdout))
            return fk_err_set(err, FK_EIO, "rank %d: cannot send stdout to /dev/null", mpi_rank_);
    }
    return FK_OK;
}

int fk_mpi_finish(int status)
{
    if (!mpi_on)
        return status;
    const char *sv = getenv("FK_MPI_STATS");
    if (sv) {
        struct rusage ru;
        long rss = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
        char line[320];
        snprintf(line, sizeof line,
                 "fk-mpi-stats rank=%d size=%d rounds=%ld sent_msgs=%ld sent_bytes=%llu "
                 "recv_msgs=%ld recv_bytes=%llu maxrss_kb=%ld grid_runs=%ld\n",
                 mpi_rank_, mpi_size_, stats.rounds, stats.sent_msgs, stats.sent_bytes,
                 stats.recv_msgs, stats.recv_bytes, rss, stats.grid_runs);
        /* FK_MPI_STATS=PATH (fedkern bench sim-mpi): every rank appends its line to the file
         * in one write (O_APPEND), never interleaved with another rank's stderr */
        int fd = strchr(sv, '/') ? open(sv, O_WRONLY | O_APPEND | O_CREAT, 0600) : -1;
        if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
            fputs(line, stderr);
        if (fd >= 0)
            close(fd);
    }
    free(pend);
    pend = NULL;
    if (status != 0 && mpi_size_ > 1) {
        fprintf(stderr, "fedkern: rank %d failed (exit status %d): ending the MPI job\n", mpi_rank_,
                status);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    MPI_Finalize();
    return status;
}

#endif
