/* The server's durable state in SQLite: jobs, rounds and phases, the client
 * registry, accepted updates, checkpoints and models per round.
 *
 * WAL journal with synchronous=FULL, so a call that returned FK_OK survived a
 * crash; an update is acknowledged to its client only after fk_store_update_put
 * returned FK_OK. Blobs (updates, checkpoints, models) are opaque bytes here.
 * A full disk or read-only file gives FK_EIO with a clear message: the caller
 * must then refuse, not acknowledge. */
#ifndef FK_STORE_H
#define FK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/methods/method.h"
#include "server/roster.h"

typedef struct fk_store fk_store;

enum { FK_STORE_SCHEMA_VERSION = 6 };

/* Open (creating and migrating as needed) the database at path. Refused with one message
 * (FK_EINVAL) when path is a directory, a read-only file or sits in a directory the server
 * cannot write; FK_EFORMAT with the restore steps (docs/operations.md section 9) when
 * PRAGMA quick_check fails or SQLite finds the file damaged (SQLITE_CORRUPT, SQLITE_NOTADB,
 * also on any later call): a damaged database is never waited for like a full disk (FK_EIO). */
FK_CHECKRETURN int fk_store_open(fk_store **st, const char *path, fk_err *err);
/* fk_store_open, and the rule for a file that holds no federation (issue 33): an absent file
 * is a new federation (unless its -wal is still there: the file was removed, refused with
 * the restore steps); an empty file or an SQLite database without fedkern's tables is refused
 * (FK_EINVAL, naming --init and the restore steps) unless init = 1 (--init), which starts a
 * new, empty federation in it. init changes nothing for a file with fedkern state. */
FK_CHECKRETURN int fk_store_open_init(fk_store **st, const char *path, int init, fk_err *err);

/* The start-up check (issue 35; docs/operations.md "Start-up check"). Its cost follows what
 * was written since the last clean stop, not the file's size. Beside the file, PATH.run
 * records each start ("running": the run's number, the file's device and inode, written and
 * fsync'd before anything else) and each clean stop ("clean": also the file's size and mtime,
 * written by fk_store_close after SQLite folded and removed the -wal):
 *  - "clean": the record is a clean stop of the file exactly as it is now: nothing is read.
 *  - "crash": the record is a start of this same file (device, inode) that never stopped
 *    cleanly: the SHA-256 of every update, checkpoint and model row written since the last
 *    verified start (schema 6: each row records the run that wrote it) is checked; a mismatch
 *    refuses the start (FK_EFORMAT, restore steps).
 *  - "full": PRAGMA quick_check over the whole file (as before schema 6): no record (a copied
 *    or restored file), a record of another file or of the file before it changed (inode,
 *    size, mtime), no verified start recorded yet (a file migrated from schema 5 or older),
 *    or asked for (check_full, --check_state full).
 *  - "new": a file created by this open.
 * Each start is logged (state_check: mode, reason, rows, bytes, seconds, run); the run and
 * the verified point (meta 'run', 'verified_run') are written by the first transaction. */
typedef struct fk_store_startup {
    char mode[8];     /* "new", "clean", "crash", "full" */
    char reason[200]; /* why that mode */
    int64_t rows;     /* rows whose SHA-256 was checked ("crash") */
    uint64_t bytes;   /* their bytes */
    double seconds;   /* wall time of the check */
    int64_t run;      /* this start's number */
} fk_store_startup;

typedef struct fk_store_open_opts {
    int init;       /* fk_store_open_init's init */
    int check_full; /* the "full" check whatever the record says */
} fk_store_open_opts;

FK_CHECKRETURN int fk_store_open_ex(fk_store **st, const char *path, const fk_store_open_opts *o,
                                    fk_err *err);
void fk_store_startup_get(const fk_store *st, fk_store_startup *out);
/* Close; after a clean run (no damage found, writes not refused, the file still at its
 * path, no transaction open, SQLite closed it and removed its -wal) PATH.run says "clean". */
void fk_store_close(fk_store *st);
/* A read-only second connection to writer's file, for one other thread (the worker that
 * aggregates): fk_store_update_each and the other reads work on it; it sees what the writer
 * committed (WAL). FK_ESTATE for an in-memory database. Closed with fk_store_close, before
 * the writer. A row failing its checksum sets the reader's fk_store_damaged, not the writer's. */
FK_CHECKRETURN int fk_store_open_reader(fk_store **st, const fk_store *writer, fk_err *err);
/* Group commit with the fsync off the loop (issue 35): a transaction begun with
 * fk_store_begin_relaxed commits without an fsync (WAL, synchronous=NORMAL: it survives a
 * crash of the process, not yet a power cut); fk_store_sync_wal(fk_store_path(st)), which
 * touches no connection and may run on any thread, then makes every commit before it as
 * durable as synchronous=FULL would have (fdatasync of the -wal). fk_store_sync_deferred:
 * 1 when that sync is needed, 0 when the store runs with synchronous=NORMAL (nothing to do),
 * strict (relaxed commits fsync themselves) or is not a file. */
int fk_store_sync_deferred(const fk_store *st);
/* 1 while the writer holds an open transaction (rows another connection cannot see yet). */
int fk_store_in_transaction(const fk_store *st);
const char *fk_store_path(const fk_store *st);
FK_CHECKRETURN int fk_store_sync_wal(const char *db_path, fk_err *err);
/* WAL checkpoints off the loop (issue 35): a third connection, read-write, for one other
 * thread; its passive checkpoints keep the -wal below SQLite's auto-checkpoint size, so the
 * writer seldom copies a large update into the file and fsyncs it inside a commit on the
 * loop (the writer keeps its auto-checkpoint as a backstop). fk_store_checkpoint_passive
 * copies what it can without waiting for any lock (*frames_left: what it could not); call it
 * when fk_store_wal_bytes grows. FK_ESTATE for an in-memory database. Closed with
 * fk_store_close, before the writer. */
FK_CHECKRETURN int fk_store_open_checkpointer(fk_store **ck, fk_store *writer, fk_err *err);
FK_CHECKRETURN int fk_store_checkpoint_passive(fk_store *ck, int *frames_left, fk_err *err);
uint64_t fk_store_wal_bytes(const fk_store *st);
/* The writer checkpoints at commit again (after the checkpointer is closed). */
void fk_store_autocheckpoint_default(fk_store *writer);
/* With a checkpointer on the pool: the writer checkpoints inside a commit as SQLite does by
 * default (from 1000 -wal pages), except in a commit that itself wrote 1000 pages or more (a
 * large update, checkpoint or model), which the pool's checkpointer copies instead (issue 35).
 * fk_store_autocheckpoint_default undoes it. */
void fk_store_autocheckpoint_small(fk_store *writer);
/* 1 once after a commit whose checkpoint fk_store_autocheckpoint_small left to the pool. */
int fk_store_checkpoint_skipped(fk_store *writer);
/* 1 while reader still reads the file writer writes (0 after fk_store_recreate moved the
 * writer to a new file: open a new reader). */
int fk_store_reads_writer(const fk_store *reader, const fk_store *writer);

/* --- retention (issue 35; docs/operations.md "Retention") --- */
typedef struct fk_store_retention {
    int keep_checkpoints; /* newest checkpoints kept per job (>= 1); 0 = every one (2) */
    int keep_updates;     /* 1: the bytes of every update stay (--retain_updates, --audit) */
    int keep_models;      /* 1: every round's model stays (--audit) */
} fk_store_retention;
/* The default (keep_checkpoints 2, updates and models pruned); fk_store_open sets it. */
void fk_store_retention_default(fk_store_retention *r);
void fk_store_set_retention(fk_store *st, const fk_store_retention *r);
/* Apply the retention to one job inside the caller's transaction, after round `round`'s
 * checkpoint and model were written in it (so they are durable exactly when the pruning is).
 * Updates of rounds < round go (this round's stay while the job runs; a finished job's all
 * go; their reports stay, fk_store_report_each); checkpoints older than the keep_checkpoints newest go;
 * models go but the latest, the one `job result --selected` picks (m->select_by, see
 * fk_store_selected_round) and, while the job runs (finished = 0), the select_lag newest,
 * which are not scored yet. A finished job (done, failed, cancelled) is called once more with
 * finished = 1 and its last round. */
FK_CHECKRETURN int fk_store_retain(fk_store *st, int64_t job, int round, int finished,
                                   const fk_method *m, fk_err *err);
/* The round whose model m's criterion picks among the job's closed rounds (its select_by
 * field measured select_lag rounds later, the earliest best): *round = 0 when none is scored
 * yet or m has no select_by. *value gets the criterion's value (may be NULL). */
FK_CHECKRETURN int fk_store_selected_round(fk_store *st, int64_t job, const fk_method *m,
                                           int *round, double *value, fk_err *err);
/* What the file holds (`fedkern bench state`, `fedkern state usage`). */
typedef struct fk_store_usage {
    uint64_t file_bytes, wal_bytes; /* the file and its -wal on disk */
    uint64_t free_bytes;            /* free pages inside the file (reused; compact returns them) */
    uint64_t update_bytes, checkpoint_bytes, model_bytes;               /* the blobs' bytes */
    int64_t updates, updates_pruned, checkpoints, models, jobs, rounds; /* rows */
} fk_store_usage;
FK_CHECKRETURN int fk_store_usage_get(fk_store *st, fk_store_usage *u, fk_err *err);
/* Remove a job that is not running with everything stored for it (rounds, phases, updates,
 * checkpoints, models), in one fsync'd transaction. FK_ENOTFOUND for no such job, FK_ESTATE
 * for a running one. The space is reused by later writes; fk_store_compact gives it back. */
FK_CHECKRETURN int fk_store_job_delete(fk_store *st, int64_t job, fk_err *err);
/* `fedkern state compact PATH`: offline VACUUM of a state file no server has open (refused,
 * FK_ESTATE, while one has: each open store holds a shared flock on the file). *before and
 * *after get the file's size in bytes. */
FK_CHECKRETURN int fk_store_compact(const char *path, uint64_t *before, uint64_t *after,
                                    fk_err *err);
/* 1 once a stored row failed its SHA-256 check (the file was damaged after it was written). */
int fk_store_damaged(const fk_store *st);
/* The state file is kept by identity (device, inode, taken at open): fk_store_file_check
 * tells whether the path still names it (FK_STORE_FILE_OK), names nothing (REMOVED: `rm
 * state.db` while the server runs; the connection still holds every byte) or another file
 * (REPLACED). The server's answer (server/main.c, docs/operations.md): removed, the database
 * is copied back to the path from the open connection (fk_store_recreate) with an error line;
 * replaced, it is saved beside it (fk_store_save_copy) and the server stops with exit 1. */
enum { FK_STORE_FILE_OK = 0, FK_STORE_FILE_REMOVED = 1, FK_STORE_FILE_REPLACED = 2 };
int fk_store_file_state(const fk_store *st);
/* Write the whole database as the connection sees it to path again (copy to PATH.recreate-tmp,
 * fsync, rename, reopen, limits and sync mode as before). Not inside a transaction
 * (FK_ESTATE). */
FK_CHECKRETURN int fk_store_recreate(fk_store *st, fk_err *err);
/* From now on every transaction is refused (FK_EIO with why): nothing more is acknowledged
 * into a file that is about to be left. */
void fk_store_refuse_writes(fk_store *st, const char *why);
/* Copy the whole database to a new file dest (fsync'd). Not inside a transaction. */
FK_CHECKRETURN int fk_store_save_copy(fk_store *st, const char *dest, fk_err *err);
/* Cap the database at max_bytes (0 = no cap): writes beyond it fail like a full disk. */
FK_CHECKRETURN int fk_store_set_limit(fk_store *st, uint64_t max_bytes, fk_err *err);
/* Bytes the database file uses now (pages in use x page size). */
FK_CHECKRETURN int fk_store_size(fk_store *st, uint64_t *bytes, fk_err *err);
FK_CHECKRETURN int fk_store_schema_version(fk_store *st, int *version, fk_err *err);
/* full = 0 relaxes synchronous=FULL to NORMAL (WAL: survives a process crash,
 * not a power cut); full = 2 fsyncs the fk_store_begin_relaxed transactions too (as before
 * they existed). Benchmarks only, to tell protocol time from fsync time. */
FK_CHECKRETURN int fk_store_set_full_sync(fk_store *st, int full, fk_err *err);

/* Transactions group the writes of one state change (a round's close, or a
 * batch of updates committed together). A failed commit rolls back. */
FK_CHECKRETURN int fk_store_begin(fk_store *st, fk_err *err);
FK_CHECKRETURN int fk_store_commit(fk_store *st, fk_err *err);
/* A transaction whose commit skips the fsync (synchronous=NORMAL for it, FULL again after):
 * for writes the server can compute again from what is durable, a round's or phase's close
 * and the next one's open (the updates they are made of were committed with their fsync).
 * WAL keeps the order: a power cut loses at most a suffix of such commits, and the next
 * fsync'd commit (the next batch of updates) makes them durable too. */
FK_CHECKRETURN int fk_store_begin_relaxed(fk_store *st, fk_err *err);
void fk_store_rollback(fk_store *st);
/* Explicit transactions committed and the wall time spent in their COMMIT (with
 * synchronous=FULL that is where the WAL's fsync happens: the fsync share of a round). */
typedef struct fk_store_stats {
    uint64_t commits;
    double commit_seconds;
} fk_store_stats;
void fk_store_stats_get(const fk_store *st, fk_store_stats *out);
/* Tests only: after `skip` commits that succeed, the next n fail with FK_EIO
 * and roll back, as on a full disk. */
void fk_store_test_fail_commits(fk_store *st, int skip, int n);

/* --- jobs --- */
typedef enum fk_job_state {
    FK_JOB_RUNNING = 0,
    FK_JOB_DONE = 1,
    FK_JOB_FAILED = 2,
    FK_JOB_CANCELLED = 3,
} fk_job_state;

const char *fk_job_state_name(int state);

typedef struct fk_store_job {
    int64_t id;
    char method[64];
    char *config; /* the job's INI text, owned */
    int state;    /* fk_job_state */
    int round;    /* round in progress (1-based), or the last one when finished */
    int attempt;  /* 0 for the first try of the round, +1 per retry */
    int phase;
    char failure[512];
    double created;
    double updated;
} fk_store_job;

void fk_store_job_free(fk_store_job *j);
FK_CHECKRETURN int fk_store_job_insert(fk_store *st, const char *method, const char *config,
                                       double now, int64_t *id, fk_err *err);
FK_CHECKRETURN int fk_store_job_get(fk_store *st, int64_t id, fk_store_job *out, fk_err *err);
/* Ids of the jobs in `state` (-1 = all), ascending; *ids is malloc'd. */
FK_CHECKRETURN int fk_store_job_ids(fk_store *st, int state, int64_t **ids, int *n, fk_err *err);
FK_CHECKRETURN int fk_store_job_set_position(fk_store *st, int64_t id, int round, int attempt,
                                             int phase, double now, fk_err *err);
FK_CHECKRETURN int fk_store_job_set_state(fk_store *st, int64_t id, int state, const char *failure,
                                          double now, fk_err *err);

/* --- rounds (one row per attempt) and their phases --- */
typedef struct fk_store_round {
    int64_t job;
    int round, attempt;
    int *planned; /* client indices, ascending, owned */
    int n_planned;
    int quorum;
    double started;
    int closed;       /* 0 open, 1 aggregated, 2 abandoned (quorum missed) */
    int participants; /* updates aggregated in the last phase */
    int dropouts;
    char dropped[512]; /* comma-separated client indices */
    double agg_seconds;
    double loss, accuracy, error; /* weighted means of the last phase's reports, NaN if none */
    double misclust, ari, rmse;   /* the same for the quality metrics (schema version 2) */
    double model_error;           /* kahm's largest modelling error (schema version 4) */
} fk_store_round;

void fk_store_round_free(fk_store_round *r);
FK_CHECKRETURN int fk_store_round_open(fk_store *st, int64_t job, int round, int attempt,
                                       const int *planned, int n_planned, int quorum,
                                       double started, fk_err *err);
/* Write the close of a round: closed, participants, dropouts, metrics from r. */
FK_CHECKRETURN int fk_store_round_close(fk_store *st, const fk_store_round *r, fk_err *err);
/* FK_ENOTFOUND if that attempt was never opened. */
FK_CHECKRETURN int fk_store_round_get(fk_store *st, int64_t job, int round, int attempt,
                                      fk_store_round *out, fk_err *err);
/* Every round row of a job in order (round, attempt); *rows malloc'd, free each. */
FK_CHECKRETURN int fk_store_round_list(fk_store *st, int64_t job, fk_store_round **rows, int *n,
                                       fk_err *err);

FK_CHECKRETURN int fk_store_phase_open(fk_store *st, int64_t job, int round, int attempt, int phase,
                                       double deadline, fk_err *err);
FK_CHECKRETURN int fk_store_phase_get(fk_store *st, int64_t job, int round, int attempt, int phase,
                                      double *deadline, int *closed, fk_err *err);
FK_CHECKRETURN int fk_store_phase_close(fk_store *st, int64_t job, int round, int attempt,
                                        int phase, int participants, fk_err *err);

/* --- client registry --- */
FK_CHECKRETURN int fk_store_client_seen(fk_store *st, const char *identity, double now,
                                        fk_err *err);
/* FK_ENOTFOUND for a client never seen. */
FK_CHECKRETURN int fk_store_client_last_seen(fk_store *st, const char *identity, double *when,
                                             fk_err *err);

/* --- client roster (server/roster.h): the data sets each client advertised --- */
/* Replace what identity holds (listed = 0: unknown, sets ignored). Whole or not at all, inside
 * or outside an open transaction. */
FK_CHECKRETURN int fk_store_roster_put(fk_store *st, const char *identity, int listed,
                                       const fk_roster_set *sets, int n, fk_err *err);
/* Join every stored client into r (a server start: the roster as the clients last left it). */
FK_CHECKRETURN int fk_store_roster_load(fk_store *st, fk_roster *r, fk_err *err);

/* --- accepted updates --- */
typedef struct fk_store_update {
    int64_t job;
    int round, attempt, phase;
    int client;           /* index in the job */
    const char *identity; /* certificate identity of the sender */
    const char *idem;     /* idempotency id, unique over the whole store */
    fk_report report;
    const void *blob;
    size_t len;
    double received;
    const uint8_t *sha256; /* put: the blob's SHA-256 if the caller has it (else computed) */
    int pruned;            /* each: retention dropped the bytes (blob NULL, len 0) */
} fk_store_update;

/* What a sender stored under an idempotency id (fk_store_update_match). */
enum { FK_STORE_IDEM_NEW = 0, FK_STORE_IDEM_SAME = 1, FK_STORE_IDEM_OTHER = 2 };

/* Commit one update. A resend (same idem from the same identity) is not
 * stored again: *dup = FK_STORE_IDEM_SAME and FK_OK, so the caller acknowledges it again
 * without counting it; the same idem with other bytes gives *dup = FK_STORE_IDEM_OTHER and
 * FK_OK, nothing stored (the protocol's ABORTED). A second, different update for the same
 * (job, round, attempt, phase, client), or an idem another identity used, gives FK_ESTATE. */
FK_CHECKRETURN int fk_store_update_put(fk_store *st, const fk_store_update *u, int *dup,
                                       fk_err *err);
/* Call cb for each update of one phase in ascending client order. The blob
 * and strings are valid only during the call. An update whose bytes retention dropped comes
 * with pruned = 1, blob NULL and len 0 (its report stays). Every other blob is checked against the SHA-256
 * stored beside it: a mismatch stops with FK_EFORMAT naming the job, round, phase and client
 * and the restore steps (and fk_store_damaged() turns 1). */
typedef int (*fk_store_update_cb)(void *ctx, const fk_store_update *u, fk_err *err);
FK_CHECKRETURN int fk_store_update_each(fk_store *st, int64_t job, int round, int attempt,
                                        int phase, fk_store_update_cb cb, void *ctx, fk_err *err);
/* Like fk_store_update_each, over the clients' reports of one phase, which stay when
 * retention deleted the updates (schema 6): pruned = 1, blob NULL, idem "". */
FK_CHECKRETURN int fk_store_report_each(fk_store *st, int64_t job, int round, int attempt,
                                        int phase, fk_store_update_cb cb, void *ctx, fk_err *err);
/* Forget one client's update of one phase (its data made the aggregation fail): a replay
 * of the phase after a restart aggregates without it, as the running server did. */
FK_CHECKRETURN int fk_store_update_drop(fk_store *st, int64_t job, int round, int attempt,
                                        int phase, int client, fk_err *err);
/* *known = 1 if identity stored an update with this idempotency id. */
FK_CHECKRETURN int fk_store_update_known(fk_store *st, const char *idem, const char *identity,
                                         int *known, fk_err *err);
/* *state = FK_STORE_IDEM_NEW, _SAME (stored with these bytes) or _OTHER (other bytes);
 * sha256 (32 bytes) gets the blob's digest, for fk_store_update.sha256. */
FK_CHECKRETURN int fk_store_update_match(fk_store *st, const char *idem, const char *identity,
                                         const void *blob, size_t len, int *state,
                                         uint8_t sha256[32], fk_err *err);
/* fk_store_update_match with the SHA-256 of the bytes already computed (off the loop). */
FK_CHECKRETURN int fk_store_update_match_digest(fk_store *st, const char *idem,
                                                const char *identity, const uint8_t d[32],
                                                int *state, fk_err *err);
FK_CHECKRETURN int fk_store_update_count(fk_store *st, int64_t job, int *n, fk_err *err);

/* --- checkpoints (method server state) and models, per round ---
 * Stored with their SHA-256; a get whose bytes fail it returns FK_EFORMAT naming the job and
 * round with the restore steps, never the bytes. */
FK_CHECKRETURN int fk_store_checkpoint_put(fk_store *st, int64_t job, int round, const void *blob,
                                           size_t len, fk_err *err);
/* The _summed puts take the bytes' SHA-256 computed before (fk_store_digest, any thread), so
 * that a large checkpoint or model is not hashed on the event loop (issue 35). */
FK_CHECKRETURN int fk_store_checkpoint_put_summed(fk_store *st, int64_t job, int round,
                                                  const void *blob, size_t len,
                                                  const uint8_t sum[32], fk_err *err);
FK_CHECKRETURN int fk_store_model_put_summed(fk_store *st, int64_t job, int round, const void *blob,
                                             size_t len, const uint8_t sum[32], fk_err *err);
/* SHA-256 of bytes as the store keeps it; touches no connection. */
FK_CHECKRETURN int fk_store_digest(const void *blob, size_t len, uint8_t out[32], fk_err *err);
/* *blob is malloc'd; FK_ENOTFOUND if absent. */
FK_CHECKRETURN int fk_store_checkpoint_get(fk_store *st, int64_t job, int round, void **blob,
                                           size_t *len, fk_err *err);
FK_CHECKRETURN int fk_store_model_put(fk_store *st, int64_t job, int round, const void *blob,
                                      size_t len, fk_err *err);
/* round < 0: the latest model. *round_out (may be NULL) gets its round. */
FK_CHECKRETURN int fk_store_model_get(fk_store *st, int64_t job, int round, void **blob,
                                      size_t *len, int *round_out, fk_err *err);

#endif
