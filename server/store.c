#include "server/store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/base/log.h"

enum { STMT_CACHE_MAX = 64 };

/* A prepared statement kept for the store's lifetime, keyed by its SQL text. */
typedef struct cached_stmt {
    char *sql;
    sqlite3_stmt *s;
} cached_stmt;

struct fk_store {
    sqlite3 *db;
    int wal_pages;  /* the writer's in-commit checkpoint from this many -wal frames (0: none) */
    int wal_frames; /* frames in the -wal after the last commit (its hook) */
    int wal_skipped; /* the hook left a large commit's checkpoint to the pool */
    char path[512];
    cached_stmt cache[STMT_CACHE_MAX];
    int n_cache;
    int pass_commits; /* test hook: this many next COMMITs succeed, then */
    int fail_commits; /* this many fail like a full disk */
    fk_store_stats stats;
    int normal;  /* fk_store_set_full_sync(0): synchronous=NORMAL throughout */
    int strict;  /* fk_store_set_full_sync(2): relaxed transactions fsync too (benchmarks) */
    int relaxed; /* a fk_store_begin_relaxed transaction is open (synchronous=NORMAL) */
    int damaged; /* a stored row failed its SHA-256 (fk_store_damaged) */
    int watched; /* dev and ino hold the identity of the file at path (fk_store_file_check) */
    dev_t dev;
    ino_t ino;
    uint64_t max_bytes; /* fk_store_set_limit, applied again after fk_store_recreate */
    char refuse[256];   /* fk_store_refuse_writes: why every transaction is refused */
    fk_store_retention keep; /* fk_store_set_retention */
    int64_t run;             /* this start's number (meta 'run'); 0 before the open's check */
    int run_recorded;        /* meta 'run' holds it (written by the first transaction) */
    int run_in_tx;           /* the open transaction writes it */
    int lock_fd;             /* flock(LOCK_SH) on the file while open; -1 for none */
    int check_full;          /* fk_store_open_opts.check_full */
    int pre_ok, wal_before;  /* the file (stat in pre) and its -wal before SQLite opened it */
    struct stat pre;
    fk_store_startup startup; /* what the start-up check did */
};

enum { SUM_LEN = 32 }; /* SHA-256 beside every stored blob (schema version 4) */

/* Migration i takes the schema from version i to i + 1; append, never edit. */
static const char *const migrations[] = {
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  method TEXT NOT NULL,"
    "  config TEXT NOT NULL,"
    "  state INTEGER NOT NULL DEFAULT 0 CHECK (state BETWEEN 0 AND 3),"
    "  round INTEGER NOT NULL DEFAULT 1,"
    "  attempt INTEGER NOT NULL DEFAULT 0,"
    "  phase INTEGER NOT NULL DEFAULT 0,"
    "  failure TEXT NOT NULL DEFAULT '',"
    "  created REAL NOT NULL,"
    "  updated REAL NOT NULL);"
    "CREATE TABLE rounds ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  round INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  planned TEXT NOT NULL,"
    "  quorum INTEGER NOT NULL,"
    "  started REAL NOT NULL,"
    "  closed INTEGER NOT NULL DEFAULT 0,"
    "  participants INTEGER NOT NULL DEFAULT 0,"
    "  dropouts INTEGER NOT NULL DEFAULT 0,"
    "  dropped TEXT NOT NULL DEFAULT '',"
    "  agg_seconds REAL NOT NULL DEFAULT 0,"
    "  loss REAL, accuracy REAL, error REAL,"
    "  PRIMARY KEY (job_id, round, attempt));"
    "CREATE TABLE phases ("
    "  job_id INTEGER NOT NULL,"
    "  round INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  phase INTEGER NOT NULL,"
    "  deadline REAL NOT NULL,"
    "  closed INTEGER NOT NULL DEFAULT 0,"
    "  participants INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (job_id, round, attempt, phase),"
    "  FOREIGN KEY (job_id, round, attempt) REFERENCES rounds(job_id, round, attempt)"
    "    ON DELETE CASCADE);"
    "CREATE TABLE clients ("
    "  identity TEXT PRIMARY KEY,"
    "  first_seen REAL NOT NULL,"
    "  last_seen REAL NOT NULL);"
    "CREATE TABLE updates ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id INTEGER NOT NULL,"
    "  round INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  phase INTEGER NOT NULL,"
    "  client INTEGER NOT NULL,"
    "  identity TEXT NOT NULL,"
    "  idem TEXT NOT NULL UNIQUE,"
    "  n_samples REAL NOT NULL, loss REAL, accuracy REAL, error REAL,"
    "  blob BLOB NOT NULL,"
    "  received REAL NOT NULL,"
    "  UNIQUE (job_id, round, attempt, phase, client),"
    "  FOREIGN KEY (job_id, round, attempt, phase)"
    "    REFERENCES phases(job_id, round, attempt, phase) ON DELETE CASCADE);"
    "CREATE TABLE checkpoints ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  round INTEGER NOT NULL,"
    "  blob BLOB NOT NULL,"
    "  PRIMARY KEY (job_id, round));"
    "CREATE TABLE models ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    "  round INTEGER NOT NULL,"
    "  blob BLOB NOT NULL,"
    "  PRIMARY KEY (job_id, round));",
    /* 2: the per-round quality metrics (NULL in rows written before: not measured) */
    "ALTER TABLE rounds ADD COLUMN misclust REAL;"
    "ALTER TABLE rounds ADD COLUMN ari REAL;"
    "ALTER TABLE rounds ADD COLUMN rmse REAL;"
    "ALTER TABLE updates ADD COLUMN misclust REAL;"
    "ALTER TABLE updates ADD COLUMN ari REAL;"
    "ALTER TABLE updates ADD COLUMN rmse REAL;",
    /* 3: the data sets each client advertised at its last Join (server/roster.h), so that a
     * restarted server checks submitted jobs before the clients rejoin */
    "CREATE TABLE client_holdings ("
    "  identity TEXT PRIMARY KEY,"
    "  listed INTEGER NOT NULL);"
    "CREATE TABLE client_datasets ("
    "  identity TEXT NOT NULL REFERENCES client_holdings(identity) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  rows INTEGER NOT NULL,"
    "  cols INTEGER NOT NULL,"
    "  classes INTEGER NOT NULL,"
    "  PRIMARY KEY (identity, seq));",
    /* 4: a SHA-256 beside every stored update, checkpoint and model, checked on every read
     * (issue 33): a changed byte is an error naming the row, never a different model. Rows
     * written before are hashed as they are now. */
    "ALTER TABLE updates ADD COLUMN sha256 BLOB;"
    "ALTER TABLE checkpoints ADD COLUMN sha256 BLOB;"
    "ALTER TABLE models ADD COLUMN sha256 BLOB;"
    "UPDATE updates SET sha256 = fk_sha256(blob);"
    "UPDATE checkpoints SET sha256 = fk_sha256(blob);"
    "UPDATE models SET sha256 = fk_sha256(blob);",
    /* 5: kahm's largest modelling error under its own name (rows written before keep it in
     * `error`, where kahm reported it until then) */
    ("ALTER TABLE rounds ADD COLUMN model_error REAL;"
     "ALTER TABLE updates ADD COLUMN model_error REAL;"), /* one element: two statements */
    /* 6: retention and the start-up check (issue 35). `run` numbers the server starts on the
     * file (meta 'run'); every blob row records the run that wrote it, so the check after a
     * crash reads only the rows written since the last verified start (meta 'verified_run').
     * An update whose bytes retention dropped keeps its row (report, idempotency id, SHA-256
     * of the bytes it had) with an empty blob and pruned = 1. */
    ("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
     "ALTER TABLE updates ADD COLUMN run INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE updates ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE checkpoints ADD COLUMN run INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE models ADD COLUMN run INTEGER NOT NULL DEFAULT 0;"
     "CREATE INDEX updates_run ON updates (run);"
     "CREATE INDEX checkpoints_run ON checkpoints (run);"
     "CREATE INDEX models_run ON models (run);"
     /* each update's report apart from its bytes (`job status --round N`, `job plot` per
      * client), so that retention may delete the update rows */
     "CREATE TABLE update_reports ("
     "  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
     "  round INTEGER NOT NULL, attempt INTEGER NOT NULL, phase INTEGER NOT NULL,"
     "  client INTEGER NOT NULL, identity TEXT NOT NULL, n_samples REAL NOT NULL,"
     "  loss REAL, accuracy REAL, error REAL, misclust REAL, ari REAL, rmse REAL,"
     "  model_error REAL,"
     "  PRIMARY KEY (job_id, round, attempt, phase, client)) WITHOUT ROWID;"
     "INSERT INTO update_reports SELECT job_id, round, attempt, phase, client, identity, "
     "  n_samples, loss, accuracy, error, misclust, ari, rmse, model_error FROM updates;"),
};
static const int n_migrations = (int)(sizeof migrations / sizeof *migrations);

const char *fk_job_state_name(int state)
{
    static const char *names[] = {"running", "done", "failed", "cancelled"};
    return state >= 0 && state <= 3 ? names[state] : "unknown";
}

/* One message for every SQLite failure, with a hint for the usual causes. */
/* What an operator does with a damaged database (docs/operations.md section 9). */
#define FK_STORE_RESTORE_STEPS                                                                  \
    "the state database is damaged: stop the server, move the damaged state.db (and its "     \
    "-wal, -shm) aside, restore the latest backup as state.db (docs/operations.md section 9: "  \
    "'Backup and restore of the state directory'), then start the server"

/* 1 if a write failure is the process's file-size limit (RLIMIT_FSIZE: ulimit -f, systemd
 * LimitFSIZE=): EFBIG seen by SQLite, or the database or its -wal within a page or two of the
 * limit (SQLite's rollback after the failed write may have replaced the errno). */
static int at_file_size_limit(fk_store *st)
{
    if (st->db && sqlite3_system_errno(st->db) == EFBIG)
        return 1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    const char *suffix[] = {"", "-wal"};
    for (int i = 0; i < 2; i++) {
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s%s", st->path, suffix[i]);
        if (stat(p, &sb) == 0 && (uint64_t)sb.st_size + 65536 + 32 >= (uint64_t)rl.rlim_cur)
            return 1;
    }
    return 0;
}

FK_CHECKRETURN static int db_fail(fk_store *st, int rc, const char *what, fk_err *err)
{
    int prim = rc & 0xff;
    int code = FK_EIO; /* the engine waits and retries: a full disk may get space */
    const char *hint = "check the state directory";
    if (prim == SQLITE_FULL)
        hint = "the disk or the configured size limit is full; free space, nothing was stored";
    else if (prim == SQLITE_IOERR && at_file_size_limit(st))
        hint = "the file-size limit of the server process is reached (ulimit -f, systemd "
               "LimitFSIZE=); raise it, nothing was stored";
    else if (prim == SQLITE_READONLY || prim == SQLITE_PERM || prim == SQLITE_CANTOPEN)
        hint = "the state database is not writable; fix permissions of the state directory";
    else if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB) {
        code = FK_EFORMAT; /* no retry mends it: never waited for like a full disk */
        hint = FK_STORE_RESTORE_STEPS;
    } else if (prim == SQLITE_NOMEM) {
        code = FK_ENOMEM;
        hint = "out of memory";
    } else if (prim == SQLITE_CONSTRAINT) {
        code = FK_ESTATE;
        hint = "the row conflicts with stored state";
    }
    return fk_err_set(err, code, "state db %s: %s: %s (%s)", st->path, what,
                      st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc), hint);
}

/* ------------------------------------------------------------ checksums */

static int sha256(const void *p, size_t n, unsigned char out[SUM_LEN])
{
    unsigned int got = 0;
    return EVP_Digest(n ? p : "", n, out, &got, EVP_sha256(), NULL) == 1 && got == SUM_LEN
               ? FK_OK
               : FK_EIO;
}

/* fk_sha256(blob) in SQL: the migration to version 4 hashes the rows already stored. */
static void sql_sha256(sqlite3_context *c, int argc, sqlite3_value **v)
{
    (void)argc;
    const void *b = sqlite3_value_blob(v[0]);
    int n = sqlite3_value_bytes(v[0]);
    unsigned char d[SUM_LEN];
    if (n < 0 || sha256(b, (size_t)n, d)) {
        sqlite3_result_error(c, "SHA-256 failed", -1);
        return;
    }
    sqlite3_result_blob(c, d, SUM_LEN, SQLITE_TRANSIENT);
}

/* The blob of column `col` of the current row against the SHA-256 in column `col + 1`:
 * FK_OK, or FK_EFORMAT naming the row (`what`) and the restore steps. A missing sum is a
 * mismatch too: the migration gave every row one. */
FK_CHECKRETURN static int verify_blob(fk_store *st, sqlite3_stmt *s, int col, const char *what, fk_err *err)
{
    const void *b = sqlite3_column_blob(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    const void *sum = sqlite3_column_blob(s, col + 1);
    int sum_len = sqlite3_column_bytes(s, col + 1);
    unsigned char d[SUM_LEN];
    if (sha256(b, n, d))
        return fk_err_set(err, FK_EIO, "state db %s: %s: cannot compute its SHA-256", st->path,
                          what);
    if (sum && sum_len == SUM_LEN && !memcmp(sum, d, SUM_LEN))
        return FK_OK;
    st->damaged = 1;
    fk_log(FK_LOG_ERROR, "state_checksum_mismatch", "state=%s row=\"%s\" bytes=%zu action=\"%s\"",
           st->path, what, n, FK_STORE_RESTORE_STEPS);
    /* short enough for a gRPC status message (255 bytes) with the job and what to do first;
     * the log line above has the full restore steps */
    return fk_err_set(err, FK_EFORMAT,
                      "%s fails its SHA-256 check (changed on disk, not used): stop the server, "
                      "restore the latest backup (docs/operations.md section 9); state db %s",
                      what, st->path);
}

int fk_store_damaged(const fk_store *st)
{
    return st->damaged;
}

FK_CHECKRETURN static int exec(fk_store *st, const char *sql, const char *what, fk_err *err)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? FK_OK : db_fail(st, rc, what, err);
}

/* A ready statement for sql: the cached one (reset, no bindings), or a fresh
 * one that is cached. A cached statement still in use by an outer caller (a
 * store call from inside fk_store_update_each's callback) gets a private copy. */
FK_CHECKRETURN static int prep(fk_store *st, const char *sql, sqlite3_stmt **s, fk_err *err)
{
    int in_use = 0;
    for (int i = 0; i < st->n_cache; i++) {
        if (strcmp(st->cache[i].sql, sql))
            continue;
        if (sqlite3_stmt_busy(st->cache[i].s)) {
            in_use = 1;
            break;
        }
        *s = st->cache[i].s;
        sqlite3_reset(*s);
        sqlite3_clear_bindings(*s);
        return FK_OK;
    }
    int rc = sqlite3_prepare_v2(st->db, sql, -1, s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, "prepare", err);
    if (!in_use && st->n_cache < STMT_CACHE_MAX) {
        char *key = strdup(sql);
        if (key) /* out of memory only costs the cache entry */
            st->cache[st->n_cache++] = (cached_stmt){.sql = key, .s = *s};
    }
    return FK_OK;
}

/* Done with a statement from prep(): a cached one is reset (ending its read
 * and dropping borrowed blob pointers), any other finalized. */
static void release(fk_store *st, sqlite3_stmt *s)
{
    for (int i = 0; i < st->n_cache; i++)
        if (st->cache[i].s == s) {
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            return;
        }
    sqlite3_finalize(s);
}

static void cache_clear(fk_store *st)
{
    for (int i = 0; i < st->n_cache; i++) {
        sqlite3_finalize(st->cache[i].s);
        free(st->cache[i].sql);
    }
    st->n_cache = 0;
}

/* Step a statement that returns no rows, then release it. */
static int run(fk_store *st, sqlite3_stmt *s, const char *what, fk_err *err)
{
    int rc = sqlite3_step(s);
    release(st, s);
    return rc == SQLITE_DONE ? FK_OK : db_fail(st, rc, what, err);
}

/* Run one cached statement without parameters (transaction control). */
FK_CHECKRETURN static int exec_cached(fk_store *st, const char *sql, const char *what, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    return rc ? rc : run(st, s, what, err);
}

static void bind_real_or_null(sqlite3_stmt *s, int i, double v)
{
    if (isnan(v))
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_double(s, i, v);
}

static double column_real_or_nan(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

/* prep() with the key of a round attempt bound: ?1 job, ?2 round, ?3 attempt. */
FK_CHECKRETURN static int prep_round(fk_store *st, const char *sql, int64_t job, int round, int attempt,
                      sqlite3_stmt **s, fk_err *err)
{
    int rc = prep(st, sql, s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(*s, 1, job);
    sqlite3_bind_int(*s, 2, round);
    sqlite3_bind_int(*s, 3, attempt);
    return FK_OK;
}

/* prep_round() and ?4 phase: the key of a phase. */
FK_CHECKRETURN static int prep_phase(fk_store *st, const char *sql, int64_t job, int round, int attempt,
                      int phase, sqlite3_stmt **s, fk_err *err)
{
    int rc = prep_round(st, sql, job, round, attempt, s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(*s, 4, phase);
    return FK_OK;
}

FK_CHECKRETURN static int migrate(fk_store *st, fk_err *err)
{
    int rc = exec(st, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);",
                  "create schema_version", err);
    if (rc)
        return rc;
    int version = 0;
    if ((rc = fk_store_schema_version(st, &version, err)))
        return rc;
    if (version > n_migrations)
        return fk_err_set(err, FK_EFORMAT,
                          "state db %s: schema version %d is newer than this server (%d); "
                          "run a newer fedkern-server",
                          st->path, version, n_migrations);
    for (int v = version; v < n_migrations; v++) {
        if ((rc = fk_store_begin(st, err)))
            return rc;
        char bump[96];
        snprintf(bump, sizeof bump, "DELETE FROM schema_version; INSERT INTO schema_version VALUES (%d);",
                 v + 1);
        rc = exec(st, migrations[v], "migrate schema", err);
        if (!rc)
            rc = exec(st, bump, "record schema version", err);
        if (!rc)
            rc = fk_store_commit(st, err);
        if (rc) {
            fk_store_rollback(st);
            return rc;
        }
    }
    return FK_OK;
}

/* Before SQLite sees the path: a directory, a read-only file or a directory the server cannot
 * write (SQLite puts state.db-wal and -shm next to the file) is refused with one message,
 * instead of a start that stalls at the first write. The mode bit is checked as well as
 * access(): root passes access() for a file an operator made read-only. */
FK_CHECKRETURN static int check_path(const char *path, fk_err *err)
{
    if (!strcmp(path, ":memory:") || !*path || !strncmp(path, "file:", 5))
        return FK_OK; /* no file of ours to check (tests, fuzz targets) */
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return fk_err_set(err, FK_EINVAL,
                              "state db %s is a directory, not a database file: --state names "
                              "the file (e.g. --state %s/state.db)",
                              path, path);
        if (!S_ISREG(sb.st_mode))
            return fk_err_set(err, FK_EINVAL, "state db %s is not a regular file", path);
        if (!(sb.st_mode & S_IWUSR) || access(path, R_OK | W_OK))
            return fk_err_set(err, FK_EINVAL,
                              "state db %s is read-only (mode %04o): the server writes every "
                              "update to it; make it writable by the server's user (e.g. chmod "
                              "0600, chown fedkern:fedkern)",
                              path, (unsigned)(sb.st_mode & 07777));
    } else if (errno != ENOENT) {
        return fk_err_set(err, FK_EIO, "state db %s: %s", path, strerror(errno));
    }
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    if (access(dir, W_OK | X_OK) && errno == ENOENT)
        return fk_err_set(err, FK_EIO,
                          "state db %s: its directory %s does not exist; create it, owned by the "
                          "server's user",
                          path, dir);
    if (access(dir, W_OK | X_OK))
        return fk_err_set(err, FK_EINVAL,
                          "state directory %s is not writable (%s): the database keeps its -wal "
                          "and -shm files next to it; fix the directory's permissions",
                          dir, strerror(errno));
    return FK_OK;
}

/* PRAGMA quick_check: FK_OK for "ok", else FK_EFORMAT with SQLite's first finding and the
 * restore steps. */
FK_CHECKRETURN static int quick_check(fk_store *st, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(1)", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, "check (PRAGMA quick_check)", err);
    rc = sqlite3_step(s);
    char first[200] = "";
    if (rc == SQLITE_ROW)
        snprintf(first, sizeof first, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return db_fail(st, rc, "check (PRAGMA quick_check)", err);
    if (strcmp(first, "ok"))
        return fk_err_set(err, FK_EFORMAT, "state db %s: PRAGMA quick_check: %s (%s)", st->path,
                          first, FK_STORE_RESTORE_STEPS);
    return FK_OK;
}

/* 1 if the database holds fedkern's tables (a schema_version table), 0 if not, <0 error. */
FK_CHECKRETURN static int has_fedkern_schema(fk_store *st, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                "name = 'schema_version'",
                                -1, &s, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, "read the schema", err);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : db_fail(st, rc, "read the schema", err);
}

/* ------------------------------------------------------ start-up check */

static void fsync_dir_of(const char *path);

/* 1 for a path that names a file of ours (not ":memory:", "" or a "file:" URI). */
static int is_file_path(const char *path)
{
    return strcmp(path, ":memory:") && *path && strncmp(path, "file:", 5);
}

static double now_mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A shared flock on the file for the store's lifetime (independent of SQLite's own fcntl
 * locks): fk_store_compact takes it exclusive, so it never runs under a server. */
FK_CHECKRETURN static int lock_shared(fk_store *st, fk_err *err)
{
    if (!is_file_path(st->path))
        return FK_OK;
    if (st->lock_fd >= 0)
        close(st->lock_fd);
    st->lock_fd = open(st->path, O_RDONLY | O_CLOEXEC);
    if (st->lock_fd < 0)
        return FK_OK; /* SQLite reports what is wrong with the file */
    if (flock(st->lock_fd, LOCK_SH | LOCK_NB) == 0)
        return FK_OK;
    int e = errno;
    close(st->lock_fd);
    st->lock_fd = -1;
    if (e == EWOULDBLOCK)
        return fk_err_set(err, FK_ESTATE,
                          "state db %s is being compacted ('fedkern state compact'); start the "
                          "server once it has finished",
                          st->path);
    return FK_OK; /* a file system without flock: no protection, no refusal */
}

/* The file and its -wal as they are before SQLite opens them. */
static void note_before(fk_store *st)
{
    if (!is_file_path(st->path))
        return;
    st->pre_ok = stat(st->path, &st->pre) == 0;
    char wal[600];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", st->path);
    st->wal_before = stat(wal, &sb) == 0 && sb.st_size > 0;
}

/* meta[key] into *v; FK_ENOTFOUND when absent (or no meta table: schema < 6). */
FK_CHECKRETURN static int meta_get(fk_store *st, const char *key, int64_t *v, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE key = ?1", -1, &s, NULL);
    if (rc != SQLITE_OK)
        return FK_ENOTFOUND;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return FK_OK;
    return rc == SQLITE_DONE ? FK_ENOTFOUND : db_fail(st, rc, "read meta", err);
}

FK_CHECKRETURN static int meta_set(fk_store *st, const char *key, int64_t v, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 2, v);
    return run(st, s, "write meta", err);
}

static void record_path(const fk_store *st, char *out, size_t cap, const char *suffix)
{
    snprintf(out, cap, "%s.run%s", st->path, suffix);
}

enum { REC_NONE = -1, REC_OTHER = 0, REC_CLEAN = 1, REC_RUNNING = 2 };

/* The run record PATH.run (written at every start: "running", and at a clean stop: "clean"):
 * REC_CLEAN when it records a clean stop of the file exactly as it is now (st->pre: device,
 * inode, size, mtime), REC_RUNNING when it records a start of this very file (device, inode)
 * that never stopped cleanly, REC_OTHER when it names another file or another state of it
 * (reason says which), REC_NONE when there is none. *run gets the run it names. */
static int read_record(fk_store *st, int64_t *run, char *reason, size_t cap)
{
    char p[640];
    record_path(st, p, sizeof p, "");
    FILE *f = fopen(p, "r");
    if (!f)
        return REC_NONE;
    char state[16] = "";
    long long r = 0, size = 0, sec = 0;
    unsigned long long dev = 0, ino = 0;
    long nsec = 0;
    int n = fscanf(f, "fedkern-state-run 1 state %15s run %lld dev %llu ino %llu size %lld "
                      "mtime %lld.%ld",
                   state, &r, &dev, &ino, &size, &sec, &nsec);
    fclose(f);
    *run = r;
    int clean = !strcmp(state, "clean");
    if (n != 7 || (!clean && strcmp(state, "running"))) {
        snprintf(reason, cap, "%.120s is not a run record", p);
        return REC_OTHER;
    }
    if (!st->pre_ok || dev != (unsigned long long)st->pre.st_dev ||
        ino != (unsigned long long)st->pre.st_ino) {
        snprintf(reason, cap, "another file than the one run %lld used: a restored or copied "
                 "file",
                 r);
        return REC_OTHER;
    }
    if (!clean)
        return REC_RUNNING;
    if (size != (long long)st->pre.st_size || sec != (long long)st->pre.st_mtim.tv_sec ||
        nsec != st->pre.st_mtim.tv_nsec) {
        snprintf(reason, cap, "the file changed after the clean stop of run %lld (size or "
                 "mtime)",
                 r);
        return REC_OTHER;
    }
    return REC_CLEAN;
}

/* PATH.run: "running" at a start, "clean" after a clean close (the file as it is now), written
 * to a temporary, fsync'd, renamed. 0 if written. */
static int write_record(fk_store *st, int clean)
{
    char wal[600], tmp[640], p[640];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", st->path);
    if (stat(st->path, &sb) != 0)
        return -1;
    if (clean && stat(wal, &sb) == 0)
        return -1; /* SQLite left its -wal (another connection has the file open) */
    if (clean && stat(st->path, &sb) != 0)
        return -1;
    record_path(st, tmp, sizeof tmp, "-tmp");
    record_path(st, p, sizeof p, "");
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fprintf(f,
                     "fedkern-state-run 1\nstate %s\nrun %lld\ndev %llu\nino %llu\nsize %lld\n"
                     "mtime %lld.%09ld\n",
                     clean ? "clean" : "running",
                     (long long)(!clean || st->run_recorded ? st->run : st->run - 1),
                     (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
                     clean ? (long long)sb.st_size : 0LL,
                     clean ? (long long)sb.st_mtim.tv_sec : 0LL,
                     clean ? (long)sb.st_mtim.tv_nsec : 0L) > 0;
    ok = fflush(f) == 0 && ok && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, p) == 0) {
        fsync_dir_of(p);
        return 0;
    }
    unlink(tmp);
    return -1;
}

static void startup_set(fk_store *st, const char *mode, const char *reason)
{
    snprintf(st->startup.mode, sizeof st->startup.mode, "%s", mode);
    snprintf(st->startup.reason, sizeof st->startup.reason, "%s", reason);
}

/* Which check this start needs (fk_store_startup), and the "full" one at once, before the
 * schema is read or migrated. */
FK_CHECKRETURN static int startup_decide(fk_store *st, fk_err *err)
{
    double t0 = now_mono();
    if (!strcmp(st->startup.mode, "new"))
        return FK_OK;
    int version = 0, rc = has_fedkern_schema(st, err);
    if (rc < 0)
        return rc;
    if (rc == 1 && (rc = fk_store_schema_version(st, &version, err)))
        return rc;
    int64_t verified = -1, last = 0, rec_run = 0;
    char why[200] = "";
    if (version >= 6 && meta_get(st, "verified_run", &verified, err) != FK_OK)
        verified = -1;
    if (version >= 6 && meta_get(st, "run", &last, err) != FK_OK)
        last = 0;
    int rec = is_file_path(st->path) ? read_record(st, &rec_run, why, sizeof why) : REC_NONE;
    /* a running record names the run that crashed: the last recorded one, or the next if
     * it crashed before its first write */
    int same_run = rec_run == last || (rec == REC_RUNNING && rec_run == last + 1);
    if (st->check_full)
        startup_set(st, "full", "asked for (--check_state full)");
    else if (version < 6)
        startup_set(st, "full", version ? "no verified start recorded (schema version < 6)"
                                        : "no fedkern schema yet");
    else if (verified < 0)
        startup_set(st, "full", "no verified start recorded");
    else if (rec == REC_NONE)
        startup_set(st, "full", "no run record beside the file (a copied or restored file)");
    else if (rec == REC_OTHER)
        startup_set(st, "full", why);
    else if (!same_run)
        startup_set(st, "full", "the run record names another run of the file");
    else if (rec == REC_RUNNING || st->wal_before) {
        snprintf(why, sizeof why, "run %lld ended without a clean stop%s; checking the rows "
                 "written since run %lld",
                 (long long)rec_run, st->wal_before ? " (its -wal was left)" : "",
                 (long long)verified);
        startup_set(st, "crash", why);
    } else {
        snprintf(why, sizeof why, "run %lld stopped cleanly and the file is as it left it",
                 (long long)last);
        startup_set(st, "clean", why);
    }
    if (!strcmp(st->startup.mode, "full"))
        rc = quick_check(st, err);
    st->startup.seconds = now_mono() - t0;
    return rc;
}

/* The "crash" check: the SHA-256 of every blob row written since the last verified run. */
FK_CHECKRETURN static int startup_verify(fk_store *st, fk_err *err)
{
    double t0 = now_mono();
    int rc = FK_OK;
    if (!strcmp(st->startup.mode, "crash")) {
        int64_t verified = 0;
        if ((rc = meta_get(st, "verified_run", &verified, err)))
            return rc == FK_ENOTFOUND ? FK_OK : rc;
        static const char *const sql[] = {
            ("SELECT job_id, round, blob, sha256, attempt, phase, client FROM updates "
             "WHERE run > ?1 AND pruned = 0"),
            "SELECT job_id, round, blob, sha256 FROM checkpoints WHERE run > ?1",
            "SELECT job_id, round, blob, sha256 FROM models WHERE run > ?1",
        };
        static const char *const what[] = {"update", "checkpoint", "model"};
        for (int t = 0; !rc && t < 3; t++) {
            sqlite3_stmt *s;
            if ((rc = prep(st, sql[t], &s, err)))
                break;
            sqlite3_bind_int64(s, 1, verified);
            int step;
            while (!rc && (step = sqlite3_step(s)) == SQLITE_ROW) {
                char w[160];
                if (t == 0)
                    snprintf(w, sizeof w, "job %lld round %d attempt %d phase %d: the update of "
                             "client %d",
                             (long long)sqlite3_column_int64(s, 0), sqlite3_column_int(s, 1),
                             sqlite3_column_int(s, 4), sqlite3_column_int(s, 5),
                             sqlite3_column_int(s, 6));
                else
                    snprintf(w, sizeof w, "job %lld: the %s of round %d",
                             (long long)sqlite3_column_int64(s, 0), what[t],
                             sqlite3_column_int(s, 1));
                rc = verify_blob(st, s, 2, w, err);
                st->startup.rows++;
                st->startup.bytes += (uint64_t)sqlite3_column_bytes(s, 2);
            }
            if (!rc && step != SQLITE_DONE)
                rc = db_fail(st, step, "start-up check", err);
            release(st, s);
        }
    }
    st->startup.seconds += now_mono() - t0;
    return rc;
}

/* This start's number: meta run + 1, recorded (with verified_run = the run just checked or
 * stopped cleanly) by the first transaction (fk_store_begin), so that opening writes nothing
 * to the database (another connection may hold the write lock). PATH.run says "running"
 * first: a crash of this run is a "crash" start next. Then the log line. */
FK_CHECKRETURN static int begin_run(fk_store *st, fk_err *err)
{
    int64_t last = 0;
    int rc = meta_get(st, "run", &last, err);
    if (rc && rc != FK_ENOTFOUND)
        return rc;
    st->run = last + 1;
    st->startup.run = st->run;
    if (is_file_path(st->path) && write_record(st, 0)) {
        char p[640];
        record_path(st, p, sizeof p, "");
        unlink(p); /* no record: the next start is a full check */
        fk_log(FK_LOG_WARN, "state_run_record_not_written",
               "state=%s record=%s error=\"%s\" action=\"the next start checks the whole "
               "file\"",
               st->path, p, strerror(errno));
    }
    if (!st->startup.mode[0])
        startup_set(st, "new", "a new state file");
    fk_log(FK_LOG_INFO, "state_check",
           "state=%s mode=%s reason=\"%s\" rows=%lld bytes=%llu seconds=%.3f run=%lld",
           st->path, st->startup.mode, st->startup.reason, (long long)st->startup.rows,
           (unsigned long long)st->startup.bytes, st->startup.seconds, (long long)st->run);
    return FK_OK;
}

/* Inside the first transaction of a run: record it (see begin_run). */
FK_CHECKRETURN static int record_run(fk_store *st, fk_err *err)
{
    if (!st->run || st->run_recorded)
        return FK_OK;
    int rc = meta_set(st, "run", st->run, err);
    if (!rc)
        rc = meta_set(st, "verified_run", st->run - 1, err);
    st->run_in_tx = !rc;
    return rc;
}

void fk_store_startup_get(const fk_store *st, fk_store_startup *out)
{
    *out = st->startup;
}

/* The connection to st->path: open, configure, check, and (only where the file holds
 * fedkern state, or init allows a new federation in it) migrate. `existed`: the file was
 * there, non-empty, before the open. */
FK_CHECKRETURN static int startup_decide(fk_store *st, fk_err *err);
FK_CHECKRETURN static int startup_verify(fk_store *st, fk_err *err);

FK_CHECKRETURN static int connect_db(fk_store *st, int existed, int init, int startup, fk_err *err)
{
    int rc = sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, "open", err);
    sqlite3_busy_timeout(st->db, 5000);
    rc = sqlite3_create_function(st->db, "fk_sha256", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                 NULL, sql_sha256, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_fail(st, rc, "register fk_sha256", err);
    if (sqlite3_db_readonly(st->db, "main") == 1)
        return fk_err_set(err, FK_EINVAL,
                          "state db %s opened read-only: the server writes every update to it; "
                          "make the file and its directory writable by the server's user",
                          st->path);
    rc = exec(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;",
              "configure (WAL, synchronous, foreign keys)", err);
    if (!rc && startup)
        rc = startup_decide(st, err); /* runs the "full" check */
    if (!rc && existed && !init) {
        rc = has_fedkern_schema(st, err);
        if (rc == 0)
            rc = fk_err_set(err, FK_EINVAL,
                            "state db %s is an SQLite database without fedkern's tables (another "
                            "program's file?): it is not taken as a new federation. Check --state; "
                            "if a state file was lost, restore the latest backup (docs/"
                            "operations.md section 9); to start a new, empty federation in this "
                            "file, start once with --init",
                            st->path);
        else if (rc == 1)
            rc = FK_OK;
    }
    if (!rc)
        rc = migrate(st, err);
    if (!rc && startup)
        rc = startup_verify(st, err); /* the "crash" check, the log line */
    return rc;
}

/* Record the identity (device, inode) of the file the connection uses. */
static void note_identity(fk_store *st)
{
    struct stat sb;
    st->watched = st->db && stat(st->path, &sb) == 0;
    if (st->watched) {
        st->dev = sb.st_dev;
        st->ino = sb.st_ino;
    }
}

/* What the path holds before SQLite sees it: FK_OK to go on (*existed = 1 for a non-empty
 * file), or the refusal of a file that would silently become a new federation. */
static int check_presence(const char *path, int init, int *existed, fk_err *err)
{
    *existed = 0;
    if (!strcmp(path, ":memory:") || !*path || !strncmp(path, "file:", 5))
        return FK_OK;
    char wal[600];
    size_t n = strlen(path);
    if (n + sizeof "-wal" > sizeof wal)
        return fk_err_set(err, FK_EINVAL, "state db path %.100s... is too long", path);
    memcpy(wal, path, n);
    memcpy(wal + n, "-wal", sizeof "-wal");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && stat(wal, &sb) == 0)
            return fk_err_set(err, FK_EINVAL,
                              "state db %s is missing but %s is there: the state file was "
                              "removed and its last writes are in the -wal. Restore the latest "
                              "backup as %s (docs/operations.md section 9); to start a new, "
                              "empty federation instead, move %s and %s-shm aside first",
                              path, wal, path, wal, path);
        return FK_OK; /* absent: a new federation (check_path reported other errors) */
    }
    if (sb.st_size == 0 && !init)
        return fk_err_set(err, FK_EINVAL,
                          "state db %s is an empty file: it holds no federation and is not "
                          "taken as a new one. If a state file was lost, restore the latest "
                          "backup (docs/operations.md section 9); to start a new, empty "
                          "federation in it, start once with --init",
                          path);
    *existed = sb.st_size > 0;
    return FK_OK;
}

static void fsync_dir_of(const char *path);

/* A new federation at an absent path, made whole before it appears there: the schema is
 * written to PATH.init-tmp, which is fsync'd and renamed, so a crash at the first start never
 * leaves an empty state.db (refused as "holds no federation" at the next start). */
FK_CHECKRETURN static int create_db(fk_store *st, const char *path, fk_err *err)
{
    char tmp[sizeof st->path];
    if (snprintf(tmp, sizeof tmp, "%s.init-tmp", path) >= (int)sizeof tmp)
        return fk_err_set(err, FK_EINVAL, "state db path %s is too long", path);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) { /* left by a crash during an earlier first start */
        char p[640];
        snprintf(p, sizeof p, "%s%s", tmp, suffix[i]);
        unlink(p);
    }
    memcpy(st->path, tmp, sizeof tmp);
    int rc = connect_db(st, 0, 1, 0, err);
    cache_clear(st);
    sqlite3_close(st->db); /* checkpoints the -wal into the file and removes it */
    st->db = NULL;
    int fd = rc ? -1 : open(tmp, O_RDONLY);
    if (!rc && (fd < 0 || fsync(fd)))
        rc = fk_err_set(err, FK_EIO, "state db %s: cannot fsync %s: %s", path, tmp,
                        strerror(errno));
    if (fd >= 0)
        close(fd);
    if (!rc && rename(tmp, path))
        rc = fk_err_set(err, FK_EIO, "state db %s: cannot rename %s to it: %s", path, tmp,
                        strerror(errno));
    if (rc)
        unlink(tmp);
    else
        fsync_dir_of(path);
    return rc;
}

int fk_store_open_ex(fk_store **out, const char *path, const fk_store_open_opts *o, fk_err *err)
{
    *out = NULL;
    int existed = 0, init = o ? o->init : 0;
    int rc = check_path(path, err);
    if (!rc)
        rc = check_presence(path, init, &existed, err);
    if (rc)
        return rc;
    struct stat sb;
    int absent = is_file_path(path) && stat(path, &sb) != 0 && errno == ENOENT;
    fk_store *st = calloc(1, sizeof *st);
    if (!st)
        return fk_err_set(err, FK_ENOMEM, "out of memory opening %s", path);
    st->lock_fd = -1;
    st->check_full = o ? o->check_full : 0;
    fk_store_retention_default(&st->keep);
    rc = absent ? create_db(st, path, err) : FK_OK;
    snprintf(st->path, sizeof st->path, "%s", path);
    if (!rc)
        rc = lock_shared(st, err);
    if (!rc && !absent)
        note_before(st);
    if (absent)
        startup_set(st, "new", "a new state file");
    if (!rc)
        rc = connect_db(st, existed || absent, init, 1, err);
    if (!rc)
        rc = begin_run(st, err);
    if (rc) {
        st->run = 0; /* no "clean" record for a start that failed */
        fk_store_close(st);
        return rc;
    }
    note_identity(st);
    *out = st;
    return FK_OK;
}

int fk_store_open_init(fk_store **out, const char *path, int init, fk_err *err)
{
    fk_store_open_opts o = {.init = init};
    return fk_store_open_ex(out, path, &o, err);
}

int fk_store_open(fk_store **out, const char *path, fk_err *err)
{
    return fk_store_open_init(out, path, 0, err);
}

int fk_store_open_checkpointer(fk_store **out, fk_store *writer, fk_err *err)
{
    *out = NULL;
    const char *path = writer->path;
    if (!writer->watched)
        return fk_err_set(err, FK_ESTATE, "state db %s: no checkpoint connection to an "
                          "in-memory or URI database", path);
    fk_store *st = calloc(1, sizeof *st);
    if (!st)
        return fk_err_set(err, FK_ENOMEM, "out of memory opening a checkpointer of %s", path);
    st->lock_fd = -1; /* the writer holds the file's flock; fk_store_close closes no fd 0 */
    snprintf(st->path, sizeof st->path, "%s", path);
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    rc = rc == SQLITE_OK ? FK_OK : db_fail(st, rc, "open a checkpointer", err);
    /* Its own checkpoints only when asked. The writer keeps SQLite's auto-checkpoint (1000
     * pages) as a backstop: the checkpointer's passive runs on the pool keep the -wal below
     * that, so the writer seldom checkpoints inside a commit; without the backstop a disk
     * that filled up stayed full after space came back (fault scenario disk-full: the -wal
     * grew into every freed byte before the pool's threshold was reached). */
    if (!rc)
        rc = exec(st, "PRAGMA wal_autocheckpoint=0;", "configure the checkpointer", err);
    (void)writer;
    if (rc) {
        fk_store_close(st);
        return rc;
    }
    st->dev = writer->dev;
    st->ino = writer->ino;
    *out = st;
    return FK_OK;
}

/* The writer's checkpoint inside a commit (SQLite's auto-checkpoint), except after a commit
 * that alone wrote wal_pages frames or more: a large update, checkpoint or model (issue 35).
 * That one would copy all of it into the file on the event loop; the pool's checkpointer does
 * it instead, right after. Small commits checkpoint as before, so the backstop stays for a
 * -wal that the pool cannot keep small (fault scenario disk-full). */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    fk_store *st = arg;
    int added = frames >= st->wal_frames ? frames - st->wal_frames : frames; /* restarted */
    st->wal_frames = frames;
    if (st->wal_pages <= 0 || frames < st->wal_pages)
        return SQLITE_OK;
    if (added >= st->wal_pages) {
        st->wal_skipped = 1;
        return SQLITE_OK;
    }
    (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK; /* as SQLite's own hook: a failed checkpoint is not the commit's error */
}

int fk_store_checkpoint_skipped(fk_store *writer)
{
    int was = writer->wal_skipped;
    writer->wal_skipped = 0;
    return was;
}

void fk_store_autocheckpoint_small(fk_store *writer)
{
    writer->wal_pages = 1000; /* SQLite's default */
    writer->wal_frames = 0;
    sqlite3_wal_hook(writer->db, wal_hook, writer);
}

void fk_store_autocheckpoint_default(fk_store *writer)
{
    writer->wal_pages = 0;
    sqlite3_wal_autocheckpoint(writer->db, 1000); /* SQLite's default */
}

int fk_store_checkpoint_passive(fk_store *ck, int *frames_left, fk_err *err)
{
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    *frames_left = log > done ? log - done : 0;
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
        return FK_OK; /* another checkpoint or a recovery: the next turn */
    return rc == SQLITE_OK ? FK_OK : db_fail(ck, rc, "checkpoint the -wal", err);
}

uint64_t fk_store_wal_bytes(const fk_store *st)
{
    char wal[600];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", st->path);
    return stat(wal, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int fk_store_in_transaction(const fk_store *st)
{
    return st->db && !sqlite3_get_autocommit(st->db);
}

int fk_store_sync_deferred(const fk_store *st)
{
    return !st->normal && !st->strict && st->watched;
}

const char *fk_store_path(const fk_store *st)
{
    return st->path;
}

int fk_store_sync_wal(const char *db_path, fk_err *err)
{
    char wal[600];
    size_t n = strlen(db_path);
    if (n + sizeof "-wal" > sizeof wal)
        return fk_err_set(err, FK_EINVAL, "state db path %.100s... is too long", db_path);
    memcpy(wal, db_path, n);
    memcpy(wal + n, "-wal", sizeof "-wal");
    int fd = open(wal, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return FK_OK; /* no -wal: every commit was checkpointed into the file, synced there */
    if (fd < 0)
        return fk_err_set(err, FK_EIO, "state db %s: cannot open its -wal to sync it: %s",
                          db_path, strerror(errno));
    int rc = fdatasync(fd) ? errno : 0;
    close(fd);
    if (rc)
        return fk_err_set(err, FK_EIO, "state db %s: fdatasync of its -wal failed: %s; the "
                          "updates are stored but not known to be on disk",
                          db_path, strerror(rc));
    return FK_OK;
}

int fk_store_reads_writer(const fk_store *reader, const fk_store *writer)
{
    return writer->watched && reader->dev == writer->dev && reader->ino == writer->ino;
}

/* A second, read-only connection to the writer's file for the worker thread (issue 35): in WAL
 * mode it reads the committed rows while the writer goes on, so a phase's updates stream from
 * the file to the aggregation without passing through the loop. Only reads (query_only). */
int fk_store_open_reader(fk_store **out, const fk_store *writer, fk_err *err)
{
    *out = NULL;
    const char *path = writer->path;
    if (!strcmp(path, ":memory:") || !*path || !strncmp(path, "file:", 5))
        return fk_err_set(err, FK_ESTATE, "state db %s: no second connection to an in-memory "
                          "or URI database", path);
    fk_store *st = calloc(1, sizeof *st);
    if (!st)
        return fk_err_set(err, FK_ENOMEM, "out of memory opening a reader of %s", path);
    st->lock_fd = -1; /* the writer holds the file's flock; fk_store_close closes no fd 0 */
    snprintf(st->path, sizeof st->path, "%s", path);
    /* NOMUTEX: the connection is used by one thread at a time (the worker's FIFO) */
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    rc = rc == SQLITE_OK ? FK_OK : db_fail(st, rc, "open a reader", err);
    if (!rc) {
        sqlite3_busy_timeout(st->db, 5000);
        rc = exec(st, "PRAGMA query_only=1;", "configure the reader", err);
    }
    st->dev = writer->dev; /* the writer's file (fk_store_reads_writer); not watched itself */
    st->ino = writer->ino;
    if (rc) {
        fk_store_close(st);
        return rc;
    }
    *out = st;
    return FK_OK;
}

/* -------------------------------------------------- the file's identity */

int fk_store_file_state(const fk_store *st)
{
    struct stat sb;
    if (!st->watched)
        return FK_STORE_FILE_OK;
    if (stat(st->path, &sb) != 0) /* another error (EACCES on the directory...) says nothing */
        return errno == ENOENT ? FK_STORE_FILE_REMOVED : FK_STORE_FILE_OK;
    return sb.st_dev != st->dev || sb.st_ino != st->ino ? FK_STORE_FILE_REPLACED
                                                        : FK_STORE_FILE_OK;
}

/* Copy the whole database (what the connection sees, -wal included) into a new file at dest,
 * fsync'd. dest must not exist. */
FK_CHECKRETURN static int copy_to(fk_store *st, const char *dest, fk_err *err)
{
    sqlite3 *out = NULL;
    int rc = sqlite3_open_v2(dest, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(out, "main", st->db, "main") : NULL;
    if (b) {
        rc = sqlite3_backup_step(b, -1);
        int fin = sqlite3_backup_finish(b);
        rc = rc == SQLITE_DONE ? fin : rc;
    } else if (rc == SQLITE_OK) {
        rc = sqlite3_errcode(out);
    }
    const char *msg = rc == SQLITE_OK ? "" : out ? sqlite3_errmsg(out) : sqlite3_errstr(rc);
    char why[256];
    snprintf(why, sizeof why, "%s", msg);
    sqlite3_close(out); /* rollback journal mode: one file once closed */
    if (rc != SQLITE_OK) {
        unlink(dest);
        return fk_err_set(err, FK_EIO, "state db %s: cannot copy it to %s: %s", st->path, dest,
                          why);
    }
    int fd = open(dest, O_RDONLY);
    int synced = fd >= 0 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    if (!synced) {
        unlink(dest);
        return fk_err_set(err, FK_EIO, "state db %s: cannot fsync its copy %s: %s", st->path,
                          dest, strerror(errno));
    }
    return FK_OK;
}

static void fsync_dir_of(const char *path)
{
    char copy[700];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the rename is already visible */
        close(fd);
    }
}

/* Close the connection and the SQLite files named after the path: a connection whose file
 * moved does not checkpoint at close and leaves -wal and -shm behind, which a database opened
 * next at the path would replay. */
static void disconnect_moved(fk_store *st)
{
    cache_clear(st);
    sqlite3_close(st->db);
    st->db = NULL;
    char p[600];
    snprintf(p, sizeof p, "%s-wal", st->path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", st->path);
    unlink(p);
}

int fk_store_save_copy(fk_store *st, const char *dest, fk_err *err)
{
    if (sqlite3_get_autocommit(st->db) == 0)
        return fk_err_set(err, FK_ESTATE, "state db %s: a transaction is open", st->path);
    return copy_to(st, dest, err);
}

int fk_store_recreate(fk_store *st, fk_err *err)
{
    if (sqlite3_get_autocommit(st->db) == 0)
        return fk_err_set(err, FK_ESTATE, "state db %s: a transaction is open", st->path);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.recreate-tmp", st->path);
    unlink(tmp);
    int rc = copy_to(st, tmp, err);
    if (rc)
        return rc;
    disconnect_moved(st);
    if (rename(tmp, st->path)) {
        rc = fk_err_set(err, FK_EIO,
                        "state db %s: cannot put the re-created file in place (%s); the state "
                        "is in %s: move it to %s before the next start",
                        st->path, strerror(errno), tmp, st->path);
        return rc;
    }
    fsync_dir_of(st->path);
    if ((rc = connect_db(st, 1, 0, 0, err)))
        return rc;
    note_identity(st);
    if ((rc = lock_shared(st, err)))
        return rc;
    if (st->max_bytes && (rc = fk_store_set_limit(st, st->max_bytes, err)))
        return rc;
    if (st->normal || st->strict)
        rc = fk_store_set_full_sync(st, st->strict ? 2 : 0, err);
    return rc;
}

void fk_store_close(fk_store *st)
{
    if (!st)
        return;
    int clean = st->db && st->run > 0 && !st->damaged && !st->refuse[0] &&
                sqlite3_get_autocommit(st->db) && is_file_path(st->path);
    if (st->db && fk_store_file_state(st) != FK_STORE_FILE_OK) {
        clean = 0;
        disconnect_moved(st); /* its -wal would be replayed into the file now at the path */
    }
    cache_clear(st);
    int rc = sqlite3_close(st->db);
    if (clean && rc == SQLITE_OK)
        (void)write_record(st, 1);
    if (st->lock_fd >= 0)
        close(st->lock_fd);
    free(st);
}

FK_CHECKRETURN static int pragma_int(fk_store *st, const char *sql, int64_t *out, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    if (rc)
        return rc;
    rc = sqlite3_step(s);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    release(st, s);
    return rc == SQLITE_ROW ? FK_OK : db_fail(st, rc, sql, err);
}

int fk_store_size(fk_store *st, uint64_t *bytes, fk_err *err)
{
    int64_t pages = 0, page = 0;
    int rc = pragma_int(st, "PRAGMA page_count", &pages, err);
    if (!rc)
        rc = pragma_int(st, "PRAGMA page_size", &page, err);
    *bytes = rc ? 0 : (uint64_t)pages * (uint64_t)page;
    return rc;
}

int fk_store_set_limit(fk_store *st, uint64_t max_bytes, fk_err *err)
{
    st->max_bytes = max_bytes;
    int64_t page = 4096;
    int rc = pragma_int(st, "PRAGMA page_size", &page, err);
    if (rc)
        return rc;
    uint64_t pages = max_bytes ? max_bytes / (uint64_t)page : 4294967294ULL;
    char sql[96];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%llu", (unsigned long long)(pages ? pages : 1));
    int64_t got;
    return pragma_int(st, sql, &got, err);
}

int fk_store_schema_version(fk_store *st, int *version, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT max(version) FROM schema_version", &s, err);
    if (rc)
        return rc;
    rc = sqlite3_step(s);
    *version = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    release(st, s);
    return rc == SQLITE_ROW ? FK_OK : db_fail(st, rc, "read schema version", err);
}

static void unrelax(fk_store *st);

int fk_store_set_full_sync(fk_store *st, int full, fk_err *err)
{
    int rc = exec(st, full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                  "set synchronous", err);
    if (!rc) {
        st->normal = !full;
        st->strict = full == 2;
    }
    return rc;
}

int fk_store_begin_relaxed(fk_store *st, fk_err *err)
{
    if (!st->normal && !st->strict) {
        int rc = exec_cached(st, "PRAGMA synchronous=NORMAL", "relax synchronous", err);
        if (rc)
            return rc;
        st->relaxed = 1;
    }
    int rc = fk_store_begin(st, err);
    if (rc)
        unrelax(st);
    return rc;
}

/* Back to synchronous=FULL after a relaxed transaction. Should that fail, the next commits
 * are only as durable as NORMAL (still consistent): logged once per failure. */
static void unrelax(fk_store *st)
{
    if (!st->relaxed)
        return;
    st->relaxed = 0;
    fk_err err = {0};
    if (exec_cached(st, "PRAGMA synchronous=FULL", "restore synchronous=FULL", &err))
        fk_log(FK_LOG_ERROR, "state_sync_not_restored", "error=\"%s\"", err.msg);
}

void fk_store_refuse_writes(fk_store *st, const char *why)
{
    snprintf(st->refuse, sizeof st->refuse, "%s", why && *why ? why : "writes refused");
}

int fk_store_begin(fk_store *st, fk_err *err)
{
    if (st->refuse[0])
        return fk_err_set(err, FK_EIO, "state db %s: %s", st->path, st->refuse);
    int rc = exec_cached(st, "BEGIN IMMEDIATE", "begin transaction", err);
    if (!rc && (rc = record_run(st, err)))
        fk_store_rollback(st);
    return rc;
}

int fk_store_commit(fk_store *st, fk_err *err)
{
    if (st->pass_commits > 0) {
        st->pass_commits--;
    } else if (st->fail_commits > 0) {
        st->fail_commits--;
        fk_store_rollback(st);
        return fk_err_set(err, FK_EIO, "state db %s: commit: simulated failure (test hook); "
                          "nothing was stored", st->path);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = exec_cached(st, "COMMIT", "commit", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    st->stats.commits++;
    st->stats.commit_seconds +=
        (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc)
        fk_store_rollback(st);
    else if (st->run_in_tx)
        st->run_recorded = 1;
    st->run_in_tx = 0;
    unrelax(st);
    return rc;
}

void fk_store_stats_get(const fk_store *st, fk_store_stats *out)
{
    *out = st->stats;
}

void fk_store_test_fail_commits(fk_store *st, int skip, int n)
{
    st->pass_commits = skip;
    st->fail_commits = n;
}

void fk_store_rollback(fk_store *st)
{
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    st->run_in_tx = 0;
    unrelax(st);
}

/* ---------------------------------------------------------------- roster */

/* The statements of one roster write, in a savepoint so that it is whole inside or outside
 * an open transaction. */
FK_CHECKRETURN static int roster_write(fk_store *st, const char *identity, int listed, const fk_roster_set *sets,
                        int n, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "DELETE FROM client_datasets WHERE identity = ?1", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, identity, -1, SQLITE_TRANSIENT);
    if ((rc = run(st, s, "forget client data sets", err)))
        return rc;
    rc = prep(st,
              "INSERT INTO client_holdings (identity, listed) VALUES (?1, ?2) "
              "ON CONFLICT (identity) DO UPDATE SET listed = excluded.listed",
              &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, identity, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 2, listed != 0);
    if ((rc = run(st, s, "record client holdings", err)))
        return rc;
    for (int i = 0; listed && i < n; i++) {
        rc = prep(st,
                  "INSERT INTO client_datasets (identity, seq, name, rows, cols, classes) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                  &s, err);
        if (rc)
            return rc;
        sqlite3_bind_text(s, 1, identity, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(s, 2, i);
        sqlite3_bind_text(s, 3, sets[i].name, -1, SQLITE_TRANSIENT);
        /* SQLite integers are signed 64-bit: counts past 2^63 do not occur (the bytes would not) */
        sqlite3_bind_int64(s, 4, (sqlite3_int64)(sets[i].rows > INT64_MAX ? INT64_MAX : sets[i].rows));
        sqlite3_bind_int64(s, 5, (sqlite3_int64)(sets[i].cols > INT64_MAX ? INT64_MAX : sets[i].cols));
        sqlite3_bind_int64(s, 6, (sqlite3_int64)sets[i].classes);
        if ((rc = run(st, s, "record client data set", err)))
            return rc;
    }
    return FK_OK;
}

int fk_store_roster_put(fk_store *st, const char *identity, int listed, const fk_roster_set *sets,
                        int n, fk_err *err)
{
    int rc = exec(st, "SAVEPOINT roster", "begin roster write", err);
    if (rc)
        return rc;
    rc = roster_write(st, identity, listed, sets, n, err);
    if (rc)
        sqlite3_exec(st->db, "ROLLBACK TO roster", NULL, NULL, NULL);
    int rel = exec(st, "RELEASE roster", "end roster write", rc ? NULL : err);
    return rc ? rc : rel;
}

/* One client's row group of the load query into the roster. */
FK_CHECKRETURN static int roster_flush(fk_roster *r, const char *id, int listed, const fk_roster_set *sets, int n,
                        fk_err *err)
{
    return fk_roster_join(r, id, listed, sets, n)
               ? fk_err_set(err, FK_ENOMEM, "out of memory loading the client roster")
               : FK_OK;
}

int fk_store_roster_load(fk_store *st, fk_roster *r, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "SELECT h.identity, h.listed, d.name, d.rows, d.cols, d.classes "
                  "FROM client_holdings h LEFT JOIN client_datasets d ON d.identity = h.identity "
                  "ORDER BY h.identity, d.seq",
                  &s, err);
    if (rc)
        return rc;
    enum { MAX_SETS = 16 }; /* what a Join records (service.c) */
    fk_roster_set sets[MAX_SETS];
    char id[256] = "";
    int have = 0, listed = 0, n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *rid = (const char *)sqlite3_column_text(s, 0);
        if (!rid)
            continue;
        if (!have || strcmp(rid, id)) { /* the next client: the last one is complete */
            if (have && (rc = roster_flush(r, id, listed, sets, n, err)))
                break;
            snprintf(id, sizeof id, "%s", rid);
            have = 1;
            listed = sqlite3_column_int(s, 1);
            n = 0;
        }
        if (sqlite3_column_type(s, 2) == SQLITE_NULL || n == MAX_SETS)
            continue;
        fk_roster_set *o = &sets[n++];
        *o = (fk_roster_set){0};
        snprintf(o->name, sizeof o->name, "%s", (const char *)sqlite3_column_text(s, 2));
        sqlite3_int64 rows = sqlite3_column_int64(s, 3), cols = sqlite3_column_int64(s, 4);
        sqlite3_int64 classes = sqlite3_column_int64(s, 5);
        o->rows = rows > 0 ? (uint64_t)rows : 0;
        o->cols = cols > 0 ? (uint64_t)cols : 0;
        o->classes = classes > 0 && classes <= UINT32_MAX ? (uint32_t)classes : 0;
    }
    if (rc == SQLITE_DONE)
        rc = have ? roster_flush(r, id, listed, sets, n, err) : FK_OK;
    else if (rc > 0) /* an SQLite code, not one of ours */
        rc = db_fail(st, rc, "read client roster", err);
    release(st, s);
    return rc;
}

/* ---------------------------------------------------------------- jobs */

void fk_store_job_free(fk_store_job *j)
{
    free(j->config);
    j->config = NULL;
}

int fk_store_job_insert(fk_store *st, const char *method, const char *config, double now,
                        int64_t *id, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "INSERT INTO jobs (method, config, created, updated) VALUES (?1, ?2, ?3, ?3)",
                  &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, method, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, config, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 3, now);
    if ((rc = run(st, s, "insert job", err)))
        return rc;
    *id = sqlite3_last_insert_rowid(st->db);
    return FK_OK;
}

int fk_store_job_get(fk_store *st, int64_t id, fk_store_job *out, fk_err *err)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *s;
    int rc = prep(st,
                  "SELECT method, config, state, round, attempt, phase, failure, created, updated "
                  "FROM jobs WHERE id = ?1",
                  &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        release(st, s);
        if (rc == SQLITE_DONE)
            return fk_err_set(err, FK_ENOTFOUND, "no job %lld; 'fedkern job list' lists the jobs",
                              (long long)id);
        return db_fail(st, rc, "read job", err);
    }
    out->id = id;
    snprintf(out->method, sizeof out->method, "%s", (const char *)sqlite3_column_text(s, 0));
    out->config = strdup((const char *)sqlite3_column_text(s, 1));
    out->state = sqlite3_column_int(s, 2);
    out->round = sqlite3_column_int(s, 3);
    out->attempt = sqlite3_column_int(s, 4);
    out->phase = sqlite3_column_int(s, 5);
    snprintf(out->failure, sizeof out->failure, "%s", (const char *)sqlite3_column_text(s, 6));
    out->created = sqlite3_column_double(s, 7);
    out->updated = sqlite3_column_double(s, 8);
    release(st, s);
    if (!out->config)
        return fk_err_set(err, FK_ENOMEM, "out of memory reading job %lld", (long long)id);
    return FK_OK;
}

int fk_store_job_ids(fk_store *st, int state, int64_t **ids, int *n, fk_err *err)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT id FROM jobs WHERE ?1 < 0 OR state = ?1 ORDER BY id", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 1, state);
    int cap = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *g = realloc(*ids, (size_t)cap * sizeof *g);
            if (!g) {
                release(st, s);
                free(*ids);
                *ids = NULL;
                *n = 0;
                return fk_err_set(err, FK_ENOMEM, "out of memory listing jobs");
            }
            *ids = g;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    release(st, s);
    if (rc != SQLITE_DONE) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return db_fail(st, rc, "list jobs", err);
    }
    return FK_OK;
}

int fk_store_job_set_position(fk_store *st, int64_t id, int round, int attempt, int phase,
                              double now, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "UPDATE jobs SET round = ?2, attempt = ?3, phase = ?4, updated = ?5 "
                        "WHERE id = ?1",
                        id, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_double(s, 5, now);
    return run(st, s, "update job position", err);
}

int fk_store_job_set_state(fk_store *st, int64_t id, int state, const char *failure, double now,
                           fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "UPDATE jobs SET state = ?2, failure = ?3, updated = ?4 WHERE id = ?1", &s,
                  err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, state);
    sqlite3_bind_text(s, 3, failure ? failure : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 4, now);
    return run(st, s, "update job state", err);
}

/* -------------------------------------------------------------- rounds */

void fk_store_round_free(fk_store_round *r)
{
    free(r->planned);
    r->planned = NULL;
    r->n_planned = 0;
}

/* "0,3,7" <-> int array. */
static char *join_ints(const int *v, int n)
{
    char *s = malloc((size_t)n * 12 + 1);
    if (!s)
        return NULL;
    size_t off = 0;
    s[0] = '\0';
    for (int i = 0; i < n; i++)
        off += (size_t)sprintf(s + off, "%s%d", i ? "," : "", v[i]);
    return s;
}

static int split_ints(const char *s, int **out, int *n)
{
    *out = NULL;
    *n = 0;
    int count = *s ? 1 : 0;
    for (const char *p = s; *p; p++)
        count += *p == ',';
    if (!count)
        return FK_OK;
    int *v = malloc((size_t)count * sizeof *v);
    if (!v)
        return FK_ENOMEM;
    const char *p = s;
    for (int i = 0; i < count; i++) {
        char *end;
        v[i] = (int)strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    *out = v;
    *n = count;
    return FK_OK;
}

int fk_store_round_open(fk_store *st, int64_t job, int round, int attempt, const int *planned,
                        int n_planned, int quorum, double started, fk_err *err)
{
    char *list = join_ints(planned, n_planned);
    if (!list)
        return fk_err_set(err, FK_ENOMEM, "out of memory storing round %d", round);
    sqlite3_stmt *s;
    int rc = prep_round(st,
                        "INSERT INTO rounds (job_id, round, attempt, planned, quorum, started) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        job, round, attempt, &s, err);
    if (rc) {
        free(list);
        return rc;
    }
    sqlite3_bind_text(s, 4, list, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(s, 5, quorum);
    sqlite3_bind_double(s, 6, started);
    free(list);
    return run(st, s, "open round", err);
}

int fk_store_round_close(fk_store *st, const fk_store_round *r, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_round(st,
                        "UPDATE rounds SET closed = ?4, participants = ?5, dropouts = ?6, "
                        "dropped = ?7, agg_seconds = ?8, loss = ?9, accuracy = ?10, error = ?11, "
                        "misclust = ?12, ari = ?13, rmse = ?14, model_error = ?15 "
                        "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3",
                        r->job, r->round, r->attempt, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 4, r->closed);
    sqlite3_bind_int(s, 5, r->participants);
    sqlite3_bind_int(s, 6, r->dropouts);
    sqlite3_bind_text(s, 7, r->dropped, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 8, r->agg_seconds);
    bind_real_or_null(s, 9, r->loss);
    bind_real_or_null(s, 10, r->accuracy);
    bind_real_or_null(s, 11, r->error);
    bind_real_or_null(s, 12, r->misclust);
    bind_real_or_null(s, 13, r->ari);
    bind_real_or_null(s, 14, r->rmse);
    bind_real_or_null(s, 15, r->model_error);
    if ((rc = run(st, s, "close round", err)))
        return rc;
    if (sqlite3_changes(st->db) != 1)
        return fk_err_set(err, FK_ENOTFOUND, "state db %s: job %lld round %d attempt %d was never opened",
                          st->path, (long long)r->job, r->round, r->attempt);
    return FK_OK;
}

static const char round_cols[] =
    "SELECT job_id, round, attempt, planned, quorum, started, closed, participants, dropouts, "
    "dropped, agg_seconds, loss, accuracy, error, misclust, ari, rmse, model_error FROM rounds ";

static int read_round(sqlite3_stmt *s, fk_store_round *r)
{
    memset(r, 0, sizeof *r);
    r->job = sqlite3_column_int64(s, 0);
    r->round = sqlite3_column_int(s, 1);
    r->attempt = sqlite3_column_int(s, 2);
    r->quorum = sqlite3_column_int(s, 4);
    r->started = sqlite3_column_double(s, 5);
    r->closed = sqlite3_column_int(s, 6);
    r->participants = sqlite3_column_int(s, 7);
    r->dropouts = sqlite3_column_int(s, 8);
    snprintf(r->dropped, sizeof r->dropped, "%s", (const char *)sqlite3_column_text(s, 9));
    r->agg_seconds = sqlite3_column_double(s, 10);
    r->loss = column_real_or_nan(s, 11);
    r->accuracy = column_real_or_nan(s, 12);
    r->error = column_real_or_nan(s, 13);
    r->misclust = column_real_or_nan(s, 14);
    r->ari = column_real_or_nan(s, 15);
    r->rmse = column_real_or_nan(s, 16);
    r->model_error = column_real_or_nan(s, 17);
    return split_ints((const char *)sqlite3_column_text(s, 3), &r->planned, &r->n_planned);
}

int fk_store_round_get(fk_store *st, int64_t job, int round, int attempt, fk_store_round *out,
                       fk_err *err)
{
    memset(out, 0, sizeof *out);
    char sql[512];
    snprintf(sql, sizeof sql, "%sWHERE job_id = ?1 AND round = ?2 AND attempt = ?3", round_cols);
    sqlite3_stmt *s;
    int rc = prep_round(st, sql, job, round, attempt, &s, err);
    if (rc)
        return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        rc = read_round(s, out) ? fk_err_set(err, FK_ENOMEM, "out of memory reading a round")
                                : FK_OK;
    } else if (rc == SQLITE_DONE) {
        rc = fk_err_set(err, FK_ENOTFOUND, "job %lld has no round %d attempt %d", (long long)job,
                        round, attempt);
    } else {
        rc = db_fail(st, rc, "read round", err);
    }
    release(st, s);
    return rc;
}

int fk_store_round_list(fk_store *st, int64_t job, fk_store_round **rows, int *n, fk_err *err)
{
    *rows = NULL;
    *n = 0;
    char sql[512];
    snprintf(sql, sizeof sql, "%sWHERE job_id = ?1 ORDER BY round, attempt", round_cols);
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job);
    int cap = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            fk_store_round *g = realloc(*rows, (size_t)cap * sizeof *g);
            if (!g)
                break;
            *rows = g;
        }
        if (read_round(s, &(*rows)[*n]))
            break;
        (*n)++;
    }
    release(st, s);
    if (rc == SQLITE_DONE)
        return FK_OK;
    for (int i = 0; i < *n; i++)
        fk_store_round_free(&(*rows)[i]);
    free(*rows);
    *rows = NULL;
    *n = 0;
    return rc == SQLITE_ROW ? fk_err_set(err, FK_ENOMEM, "out of memory listing rounds")
                            : db_fail(st, rc, "list rounds", err);
}

/* -------------------------------------------------------------- phases */

int fk_store_phase_open(fk_store *st, int64_t job, int round, int attempt, int phase,
                        double deadline, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "INSERT INTO phases (job_id, round, attempt, phase, deadline) "
                        "VALUES (?1, ?2, ?3, ?4, ?5)",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_double(s, 5, deadline);
    return run(st, s, "open phase", err);
}

int fk_store_phase_get(fk_store *st, int64_t job, int round, int attempt, int phase,
                       double *deadline, int *closed, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "SELECT deadline, closed FROM phases "
                        "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3 AND phase = ?4",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *deadline = sqlite3_column_double(s, 0);
        *closed = sqlite3_column_int(s, 1);
        rc = FK_OK;
    } else if (rc == SQLITE_DONE) {
        rc = fk_err_set(err, FK_ENOTFOUND, "job %lld round %d attempt %d has no phase %d",
                        (long long)job, round, attempt, phase);
    } else {
        rc = db_fail(st, rc, "read phase", err);
    }
    release(st, s);
    return rc;
}

int fk_store_phase_close(fk_store *st, int64_t job, int round, int attempt, int phase,
                         int participants, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "UPDATE phases SET closed = 1, participants = ?5 "
                        "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3 AND phase = ?4",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 5, participants);
    return run(st, s, "close phase", err);
}

/* ------------------------------------------------------------- clients */

int fk_store_client_seen(fk_store *st, const char *identity, double now, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st,
                  "INSERT INTO clients (identity, first_seen, last_seen) VALUES (?1, ?2, ?2) "
                  "ON CONFLICT (identity) DO UPDATE SET last_seen = excluded.last_seen",
                  &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, identity, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 2, now);
    return run(st, s, "record client", err);
}

int fk_store_client_last_seen(fk_store *st, const char *identity, double *when, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT last_seen FROM clients WHERE identity = ?1", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, identity, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *when = sqlite3_column_double(s, 0);
        rc = FK_OK;
    } else if (rc == SQLITE_DONE) {
        rc = fk_err_set(err, FK_ENOTFOUND, "client '%s' was never seen", identity);
    } else {
        rc = db_fail(st, rc, "read client", err);
    }
    release(st, s);
    return rc;
}

/* ------------------------------------------------------------- updates */

/* What this sender stored under this idempotency id: FK_STORE_IDEM_NEW (nothing),
 * FK_STORE_IDEM_SAME (bytes of SHA-256 d, or any bytes when d is NULL) or FK_STORE_IDEM_OTHER
 * (other bytes: a reused id), <0 on error. Scoped to the sender: nobody can claim another
 * client's id. */
FK_CHECKRETURN static int idem_state(fk_store *st, const char *idem, const char *identity,
                      const unsigned char *d, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT sha256 FROM updates WHERE idem = ?1 AND identity = ?2", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, idem, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, identity, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        const void *sum = sqlite3_column_blob(s, 0);
        int same = !d || (sqlite3_column_bytes(s, 0) == SUM_LEN && !memcmp(sum, d, SUM_LEN));
        release(st, s);
        return same ? FK_STORE_IDEM_SAME : FK_STORE_IDEM_OTHER;
    }
    release(st, s);
    return rc == SQLITE_DONE ? FK_STORE_IDEM_NEW : db_fail(st, rc, "look up idempotency id", err);
}

/* The report of an update just stored, in update_reports (kept when retention deletes the
 * update). */
FK_CHECKRETURN static int report_put(fk_store *st, const fk_store_update *u, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "INSERT OR REPLACE INTO update_reports (job_id, round, attempt, phase, "
                        "client, identity, n_samples, loss, accuracy, error, misclust, ari, "
                        "rmse, model_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                        "?11, ?12, ?13, ?14)",
                        u->job, u->round, u->attempt, u->phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 5, u->client);
    sqlite3_bind_text(s, 6, u->identity, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 7, u->report.n_samples);
    bind_real_or_null(s, 8, u->report.loss);
    bind_real_or_null(s, 9, u->report.accuracy);
    bind_real_or_null(s, 10, u->report.error);
    bind_real_or_null(s, 11, u->report.misclust);
    bind_real_or_null(s, 12, u->report.ari);
    bind_real_or_null(s, 13, u->report.rmse);
    bind_real_or_null(s, 14, u->report.model_error);
    return run(st, s, "store an update's report", err);
}

int fk_store_report_each(fk_store *st, int64_t job, int round, int attempt, int phase,
                         fk_store_update_cb cb, void *ctx, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "SELECT client, identity, n_samples, loss, accuracy, error, misclust, "
                        "ari, rmse, model_error FROM update_reports WHERE job_id = ?1 AND "
                        "round = ?2 AND attempt = ?3 AND phase = ?4 ORDER BY client",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        fk_store_update u = {.job = job, .round = round, .attempt = attempt, .phase = phase,
                             .idem = "", .pruned = 1};
        u.client = sqlite3_column_int(s, 0);
        u.identity = (const char *)sqlite3_column_text(s, 1);
        u.report.n_samples = sqlite3_column_double(s, 2);
        u.report.loss = column_real_or_nan(s, 3);
        u.report.accuracy = column_real_or_nan(s, 4);
        u.report.error = column_real_or_nan(s, 5);
        u.report.misclust = column_real_or_nan(s, 6);
        u.report.ari = column_real_or_nan(s, 7);
        u.report.rmse = column_real_or_nan(s, 8);
        u.report.model_error = column_real_or_nan(s, 9);
        int crc = cb(ctx, &u, err);
        if (crc) {
            release(st, s);
            return crc;
        }
    }
    release(st, s);
    return rc == SQLITE_DONE ? FK_OK : db_fail(st, rc, "read update reports", err);
}

int fk_store_update_put(fk_store *st, const fk_store_update *u, int *dup, fk_err *err)
{
    *dup = 0;
    unsigned char sum[SUM_LEN];
    if (u->sha256)
        memcpy(sum, u->sha256, SUM_LEN);
    else if (sha256(u->blob, u->len, sum))
        return fk_err_set(err, FK_EIO, "state db %s: cannot compute an update's SHA-256",
                          st->path);
    int rc = idem_state(st, u->idem, u->identity, sum, err);
    if (rc < 0)
        return rc;
    if (rc != FK_STORE_IDEM_NEW) {
        *dup = rc;
        return FK_OK;
    }
    sqlite3_stmt *s;
    rc = prep_phase(st,
                    "INSERT INTO updates (job_id, round, attempt, phase, client, identity, idem, "
                    "n_samples, loss, accuracy, error, blob, received, misclust, ari, rmse, "
                    "sha256, model_error, run) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                    "?16, ?17, ?18, ?19)",
                    u->job, u->round, u->attempt, u->phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 5, u->client);
    sqlite3_bind_text(s, 6, u->identity, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 7, u->idem, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(s, 8, u->report.n_samples);
    bind_real_or_null(s, 9, u->report.loss);
    bind_real_or_null(s, 10, u->report.accuracy);
    bind_real_or_null(s, 11, u->report.error);
    /* the blobs' binds can fail (SQLITE_TOOBIG past SQLite's length limit): checked below */
    int brc = sqlite3_bind_blob64(s, 12, u->len ? u->blob : "", u->len, SQLITE_STATIC);
    sqlite3_bind_double(s, 13, u->received);
    bind_real_or_null(s, 14, u->report.misclust);
    bind_real_or_null(s, 15, u->report.ari);
    bind_real_or_null(s, 16, u->report.rmse);
    if (brc == SQLITE_OK)
        brc = sqlite3_bind_blob(s, 17, sum, SUM_LEN, SQLITE_STATIC);
    bind_real_or_null(s, 18, u->report.model_error);
    sqlite3_bind_int64(s, 19, st->run);
    if (brc != SQLITE_OK) {
        release(st, s);
        return db_fail(st, brc, "store update", err);
    }
    rc = sqlite3_step(s);
    release(st, s);
    if (rc == SQLITE_DONE)
        return report_put(st, u, err);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return fk_err_set(err, FK_ESTATE,
                          "client %d already sent another update for job %lld round %d phase %d "
                          "(or that phase is not open); the first one counts",
                          u->client, (long long)u->job, u->round, u->phase);
    return db_fail(st, rc, "store update", err);
}

int fk_store_update_each(fk_store *st, int64_t job, int round, int attempt, int phase,
                         fk_store_update_cb cb, void *ctx, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "SELECT client, identity, idem, n_samples, loss, accuracy, error, blob, "
                        "sha256, received, misclust, ari, rmse, model_error, pruned FROM updates "
                        "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3 AND phase = ?4 "
                        "ORDER BY client",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        fk_store_update u = {.job = job, .round = round, .attempt = attempt, .phase = phase};
        u.client = sqlite3_column_int(s, 0);
        u.identity = (const char *)sqlite3_column_text(s, 1);
        u.idem = (const char *)sqlite3_column_text(s, 2);
        u.report.n_samples = sqlite3_column_double(s, 3);
        u.report.loss = column_real_or_nan(s, 4);
        u.report.accuracy = column_real_or_nan(s, 5);
        u.report.error = column_real_or_nan(s, 6);
        char what[160];
        snprintf(what, sizeof what, "job %lld round %d attempt %d phase %d: the update of "
                 "client %d", (long long)job, round, attempt, phase, u.client);
        u.pruned = sqlite3_column_int(s, 14) != 0;
        int crc = u.pruned ? FK_OK : verify_blob(st, s, 7, what, err);
        u.blob = u.pruned ? NULL : sqlite3_column_blob(s, 7);
        u.len = u.pruned ? 0 : (size_t)sqlite3_column_bytes(s, 7);
        u.received = sqlite3_column_double(s, 9);
        u.report.misclust = column_real_or_nan(s, 10);
        u.report.ari = column_real_or_nan(s, 11);
        u.report.rmse = column_real_or_nan(s, 12);
        u.report.model_error = column_real_or_nan(s, 13);
        if (!crc)
            crc = cb(ctx, &u, err);
        if (crc) {
            release(st, s);
            return crc;
        }
    }
    release(st, s);
    return rc == SQLITE_DONE ? FK_OK : db_fail(st, rc, "read updates", err);
}

int fk_store_update_drop(fk_store *st, int64_t job, int round, int attempt, int phase, int client,
                         fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep_phase(st,
                        "DELETE FROM updates WHERE job_id = ?1 AND round = ?2 AND attempt = ?3 "
                        "AND phase = ?4 AND client = ?5",
                        job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 5, client);
    rc = sqlite3_step(s);
    release(st, s);
    if (rc != SQLITE_DONE)
        return db_fail(st, rc, "drop an update", err);
    rc = prep_phase(st,
                    "DELETE FROM update_reports WHERE job_id = ?1 AND round = ?2 AND "
                    "attempt = ?3 AND phase = ?4 AND client = ?5",
                    job, round, attempt, phase, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 5, client);
    return run(st, s, "drop an update's report", err);
}

int fk_store_update_known(fk_store *st, const char *idem, const char *identity, int *known,
                          fk_err *err)
{
    int rc = idem_state(st, idem, identity, NULL, err);
    if (rc < 0)
        return rc;
    *known = rc != FK_STORE_IDEM_NEW;
    return FK_OK;
}

int fk_store_update_match(fk_store *st, const char *idem, const char *identity, const void *blob,
                          size_t len, int *state, uint8_t d[32], fk_err *err)
{
    if (sha256(blob, len, d))
        return fk_err_set(err, FK_EIO, "state db %s: cannot compute an update's SHA-256",
                          st->path);
    int rc = idem_state(st, idem, identity, d, err);
    if (rc < 0)
        return rc;
    *state = rc;
    return FK_OK;
}

int fk_store_update_match_digest(fk_store *st, const char *idem, const char *identity,
                                 const uint8_t d[32], int *state, fk_err *err)
{
    int rc = idem_state(st, idem, identity, d, err);
    if (rc < 0)
        return rc;
    *state = rc;
    return FK_OK;
}

int fk_store_update_count(fk_store *st, int64_t job, int *n, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, "SELECT count(*) FROM updates WHERE job_id = ?1", &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job);
    rc = sqlite3_step(s);
    *n = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    release(st, s);
    return rc == SQLITE_ROW ? FK_OK : db_fail(st, rc, "count updates", err);
}

/* ------------------------------------------------- checkpoints, models */

FK_CHECKRETURN static int blob_put(fk_store *st, const char *table, int64_t job, int round,
                                   const void *blob, size_t len, const uint8_t *given, fk_err *err)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO %s (job_id, round, blob, sha256, run) "
             "VALUES (?1, ?2, ?3, ?4, ?5)",
             table);
    unsigned char sum[SUM_LEN];
    if (given) /* hashed off the loop (fk_store_digest) */
        memcpy(sum, given, SUM_LEN);
    else if (sha256(blob, len, sum))
        return fk_err_set(err, FK_EIO, "state db %s: cannot compute the SHA-256 of a %s row",
                          st->path, table);
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job);
    sqlite3_bind_int(s, 2, round);
    int brc = sqlite3_bind_blob64(s, 3, len ? blob : "", len, SQLITE_STATIC);
    if (brc == SQLITE_OK)
        brc = sqlite3_bind_blob(s, 4, sum, SUM_LEN, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, st->run);
    if (brc != SQLITE_OK) { /* SQLITE_TOOBIG past SQLite's length limit */
        release(st, s);
        return db_fail(st, brc, table, err);
    }
    return run(st, s, table, err);
}

FK_CHECKRETURN static int blob_get(fk_store *st, const char *table, int64_t job, int round, void **blob,
                    size_t *len, int *round_out, fk_err *err)
{
    *blob = NULL;
    *len = 0;
    char sql[160];
    snprintf(sql, sizeof sql,
             "SELECT blob, sha256, round FROM %s WHERE job_id = ?1 AND (?2 < 0 OR round = ?2) "
             "ORDER BY round DESC LIMIT 1",
             table);
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job);
    sqlite3_bind_int(s, 2, round);
    rc = sqlite3_step(s);
    char what[128];
    int bad = FK_OK;
    if (rc == SQLITE_ROW) {
        snprintf(what, sizeof what, "job %lld: the %s of round %d", (long long)job,
                 !strcmp(table, "models") ? "model" : "checkpoint", sqlite3_column_int(s, 2));
        bad = verify_blob(st, s, 0, what, err);
    }
    if (bad) {
        rc = bad; /* the row's bytes are not handed out */
    } else if (rc == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        *blob = malloc(n ? n : 1);
        if (!*blob) {
            rc = fk_err_set(err, FK_ENOMEM, "out of memory reading %zu bytes of %s", n, table);
        } else {
            if (n)
                memcpy(*blob, sqlite3_column_blob(s, 0), n);
            *len = n;
            if (round_out)
                *round_out = sqlite3_column_int(s, 2);
            rc = FK_OK;
        }
    } else if (rc == SQLITE_DONE) {
        rc = fk_err_set(err, FK_ENOTFOUND, "job %lld has no %s for round %d", (long long)job,
                        table, round);
    } else {
        rc = db_fail(st, rc, table, err);
    }
    release(st, s);
    return rc;
}

int fk_store_checkpoint_put(fk_store *st, int64_t job, int round, const void *blob, size_t len,
                            fk_err *err)
{
    return blob_put(st, "checkpoints", job, round, blob, len, NULL, err);
}

int fk_store_checkpoint_put_summed(fk_store *st, int64_t job, int round, const void *blob,
                                   size_t len, const uint8_t sum[32], fk_err *err)
{
    return blob_put(st, "checkpoints", job, round, blob, len, sum, err);
}

int fk_store_digest(const void *blob, size_t len, uint8_t out[32], fk_err *err)
{
    return sha256(blob, len, out) ? fk_err_set(err, FK_EIO,
                                               "cannot compute a SHA-256 (OpenSSL "
                                               "EVP_Digest failed)")
                                  : FK_OK;
}

int fk_store_checkpoint_get(fk_store *st, int64_t job, int round, void **blob, size_t *len,
                            fk_err *err)
{
    return blob_get(st, "checkpoints", job, round, blob, len, NULL, err);
}

int fk_store_model_put(fk_store *st, int64_t job, int round, const void *blob, size_t len,
                       fk_err *err)
{
    return blob_put(st, "models", job, round, blob, len, NULL, err);
}

int fk_store_model_put_summed(fk_store *st, int64_t job, int round, const void *blob, size_t len,
                              const uint8_t sum[32], fk_err *err)
{
    return blob_put(st, "models", job, round, blob, len, sum, err);
}

int fk_store_model_get(fk_store *st, int64_t job, int round, void **blob, size_t *len,
                       int *round_out, fk_err *err)
{
    return blob_get(st, "models", job, round, blob, len, round_out, err);
}

/* ------------------------------------------------------------ retention */

void fk_store_retention_default(fk_store_retention *r)
{
    *r = (fk_store_retention){.keep_checkpoints = 2};
}

void fk_store_set_retention(fk_store *st, const fk_store_retention *r)
{
    st->keep = *r;
    if (st->keep.keep_checkpoints < 0)
        st->keep.keep_checkpoints = 0;
}

int fk_store_selected_round(fk_store *st, int64_t job, const fk_method *m, int *round,
                            double *value, fk_err *err)
{
    *round = 0;
    if (value)
        *value = NAN;
    if (!m || !m->select_by)
        return FK_OK;
    fk_store_round *rows;
    int count;
    int rc = fk_store_round_list(st, job, &rows, &count, err);
    if (rc)
        return rc;
    int best = 0;
    double best_v = NAN;
    for (int i = 0; i < count; i++) {
        fk_report q = {.loss = rows[i].loss, .accuracy = rows[i].accuracy,
                       .error = rows[i].error, .misclust = rows[i].misclust,
                       .ari = rows[i].ari, .rmse = rows[i].rmse,
                       .model_error = rows[i].model_error};
        double v = fk_report_get(&q, m->select_by);
        int r = rows[i].round - m->select_lag; /* the round whose model v scores */
        if (rows[i].closed != 1 || isnan(v) || r < 1)
            continue;
        if (!best || (m->select_max ? v > best_v : v < best_v)) {
            best = r;
            best_v = v;
        }
    }
    for (int i = 0; i < count; i++)
        fk_store_round_free(&rows[i]);
    free(rows);
    *round = best;
    if (value)
        *value = best_v;
    return FK_OK;
}

/* Run one statement with ?1 job and the int parameters that follow. */
FK_CHECKRETURN static int run_job_ints(fk_store *st, const char *sql, int64_t job, const int *v, int n,
                        const char *what, fk_err *err)
{
    sqlite3_stmt *s;
    int rc = prep(st, sql, &s, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, job);
    for (int i = 0; i < n; i++)
        sqlite3_bind_int(s, 2 + i, v[i]);
    return run(st, s, what, err);
}

int fk_store_retain(fk_store *st, int64_t job, int round, int finished, const fk_method *m,
                    fk_err *err)
{
    int rc = FK_OK;
    if (!st->keep.keep_updates) {
        /* The rounds before this one go (their checkpoint is durable with this one's); this
         * round's stay while the job runs (a resent update is answered DUPLICATE), all of a
         * finished job's go. The clients' reports stay in update_reports. A DELETE reads each
         * blob's overflow pages once; this runs on the loop. */
        int v[] = {finished ? round + 1 : round};
        rc = run_job_ints(st, "DELETE FROM updates WHERE job_id = ?1 AND round < ?2", job, v, 1,
                          "prune updates", err);
    }
    if (!rc && st->keep.keep_checkpoints > 0) {
        int v[] = {st->keep.keep_checkpoints};
        rc = run_job_ints(st,
                          "DELETE FROM checkpoints WHERE job_id = ?1 AND round <= "
                          "(SELECT max(round) FROM checkpoints WHERE job_id = ?1) - ?2",
                          job, v, 1, "prune checkpoints", err);
    }
    if (!rc && !st->keep.keep_models) {
        int sel = 0;
        rc = fk_store_selected_round(st, job, m, &sel, NULL, err);
        /* not scored yet while the job runs: the select_lag newest may still be picked */
        int window = !finished && m && m->select_by ? m->select_lag : 0;
        int v[] = {window, sel};
        if (!rc)
            rc = run_job_ints(st,
                              "DELETE FROM models WHERE job_id = ?1 AND round <= "
                              "(SELECT max(round) FROM models WHERE job_id = ?1) - 1 - ?2 "
                              "AND round != ?3",
                              job, v, 2, "prune models", err);
    }
    return rc ? fk_err_prefix(err, rc, "job %lld: retention: ", (long long)job) : FK_OK;
}

int fk_store_job_delete(fk_store *st, int64_t job, fk_err *err)
{
    if (sqlite3_get_autocommit(st->db) == 0)
        return fk_err_set(err, FK_ESTATE, "state db %s: a transaction is open", st->path);
    fk_store_job row;
    int rc = fk_store_job_get(st, job, &row, err);
    if (rc)
        return rc;
    int state = row.state;
    fk_store_job_free(&row);
    if (state == FK_JOB_RUNNING)
        return fk_err_set(err, FK_ESTATE,
                          "job %lld is running: cancel it first ('fedkern job cancel %lld'), "
                          "then delete it",
                          (long long)job, (long long)job);
    if ((rc = fk_store_begin(st, err)))
        return rc;
    /* updates hang on phases, phases on rounds: the cascades remove them with the job */
    sqlite3_stmt *s;
    rc = prep(st, "DELETE FROM jobs WHERE id = ?1", &s, err);
    if (!rc) {
        sqlite3_bind_int64(s, 1, job);
        rc = run(st, s, "delete job", err);
    }
    if (!rc)
        rc = fk_store_commit(st, err); /* fsync'd: an acknowledged delete survives a crash */
    else
        fk_store_rollback(st);
    return rc;
}

static uint64_t file_bytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int fk_store_compact(const char *path, uint64_t *before, uint64_t *after, fk_err *err)
{
    *before = *after = 0;
    if (!is_file_path(path))
        return fk_err_set(err, FK_EINVAL, "state compact: %s is not a state file path", path);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return fk_err_set(err, FK_ENOTFOUND, "state compact: %s: %s", path, strerror(errno));
    fk_store *st;
    int rc = fk_store_open(&st, path, err);
    if (rc)
        return rc;
    *before = file_bytes(path);
    if (st->lock_fd >= 0 && flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0)
        rc = fk_err_set(err, FK_ESTATE,
                        "state db %s is open in a running fedkern-server: stop the server, "
                        "then compact (the file is rewritten as a whole)",
                        path);
    double t0 = now_mono();
    if (!rc)
        rc = exec(st, "VACUUM", "compact (VACUUM)", err);
    if (!rc)
        rc = exec(st, "PRAGMA wal_checkpoint(TRUNCATE)", "compact (checkpoint)", err);
    if (!rc)
        fk_log(FK_LOG_INFO, "state_compacted", "state=%s bytes_before=%llu bytes_after=%llu "
               "seconds=%.3f",
               path, (unsigned long long)*before, (unsigned long long)file_bytes(path),
               now_mono() - t0);
    fk_store_close(st);
    *after = file_bytes(path);
    return rc;
}

int fk_store_usage_get(fk_store *st, fk_store_usage *u, fk_err *err)
{
    *u = (fk_store_usage){0};
    int64_t pages = 0, page = 0, freel = 0;
    int rc = pragma_int(st, "PRAGMA page_count", &pages, err);
    if (!rc)
        rc = pragma_int(st, "PRAGMA page_size", &page, err);
    if (!rc)
        rc = pragma_int(st, "PRAGMA freelist_count", &freel, err);
    if (rc)
        return rc;
    u->file_bytes = is_file_path(st->path) ? file_bytes(st->path) : (uint64_t)(pages * page);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", st->path);
    u->wal_bytes = is_file_path(st->path) ? file_bytes(wal) : 0;
    u->free_bytes = (uint64_t)(freel * page);
    static const char *const sql[] = {
        "SELECT count(*), coalesce(sum(length(blob)), 0), coalesce(sum(pruned), 0) FROM updates",
        "SELECT count(*), coalesce(sum(length(blob)), 0), 0 FROM checkpoints",
        "SELECT count(*), coalesce(sum(length(blob)), 0), 0 FROM models",
        "SELECT count(*), 0, 0 FROM jobs",
        "SELECT count(*), 0, 0 FROM rounds",
    };
    int64_t *n[] = {&u->updates, &u->checkpoints, &u->models, &u->jobs, &u->rounds};
    uint64_t dummy[2], *b[] = {&u->update_bytes, &u->checkpoint_bytes, &u->model_bytes,
                               &dummy[0], &dummy[1]};
    for (int i = 0; !rc && i < 5; i++) {
        sqlite3_stmt *s;
        if ((rc = prep(st, sql[i], &s, err)))
            break;
        int step = sqlite3_step(s);
        if (step == SQLITE_ROW) {
            *n[i] = sqlite3_column_int64(s, 0);
            *b[i] = (uint64_t)sqlite3_column_int64(s, 1);
            if (i == 0)
                u->updates_pruned = sqlite3_column_int64(s, 2);
        } else {
            rc = db_fail(st, step, "usage", err);
        }
        release(st, s);
    }
    return rc;
}
