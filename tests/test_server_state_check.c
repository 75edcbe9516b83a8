/* Damaged or unusable state is caught at start (issue 19): the store refuses a directory, a
 * read-only file and a damaged database with one precise message, and a damaged database is
 * never treated like a full disk (FK_EFORMAT with the restore steps, not the FK_EIO the
 * engine waits out). Random bytes over every page of a real state.db in turn: the store
 * either refuses with the path and the restore steps, or opens a database that SQLite's own
 * quick_check passes (a page the damage did not matter for), never silently starts on a
 * database that fails quick_check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/la/rng.h"
#include "server/store.h"

enum { PAGE = 4096 }; /* SQLite's default page size, checked on the file */

typedef struct dir {
    char path[64];
    char db[128];
} dir;

/* The database files, and with all also the pristine copy. */
static void rm_db(const dir *d, int all)
{
    const char *suffix[] = {"", "-wal", "-shm", ".run", ".orig"};
    for (int i = 0; i < 4 + all; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%s", d->db, suffix[i]);
        unlink(p);
    }
}

static int setup(void **state)
{
    dir *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    snprintf(d->path, sizeof d->path, "/tmp/fk-statecheck-XXXXXX");
    if (!mkdtemp(d->path))
        return -1;
    snprintf(d->db, sizeof d->db, "%s/state.db", d->path);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    dir *d = *state;
    if (!d)
        return 0;
    chmod(d->path, 0700);
    rm_db(d, 1);
    char sub[160];
    snprintf(sub, sizeof sub, "%s/sub", d->path);
    rmdir(sub);
    rmdir(d->path);
    free(d);
    return 0;
}

static void state_names_a_directory(void **state)
{
    dir *d = *state;
    fk_store *st = NULL;
    fk_err err;
    assert_int_equal(fk_store_open(&st, d->path, &err), FK_EINVAL);
    assert_null(st);
    assert_non_null(strstr(err.msg, "is a directory"));
    assert_non_null(strstr(err.msg, d->path));
    assert_null(strstr(err.msg, "fix permissions")); /* the old, wrong advice */
}

static void read_only_db_is_refused(void **state)
{
    dir *d = *state;
    fk_store *st;
    fk_err err;
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    fk_store_close(st);
    assert_int_equal(chmod(d->db, 0400), 0);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "read-only"));
    assert_non_null(strstr(err.msg, d->db));
    assert_int_equal(chmod(d->db, 0600), 0);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    fk_store_close(st);
}

/* A state directory the server cannot write: only meaningful when not root. */
static void unwritable_directory_is_refused(void **state)
{
    dir *d = *state;
    if (geteuid() == 0)
        skip();
    char sub[160], db[200];
    snprintf(sub, sizeof sub, "%s/sub", d->path);
    assert_int_equal(mkdir(sub, 0500), 0);
    snprintf(db, sizeof db, "%s/state.db", sub);
    fk_store *st;
    fk_err err;
    assert_int_equal(fk_store_open(&st, db, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not writable"));
}

/* A state.db of several pages: a job, rounds, a few hundred updates with blobs. */
static void make_db(const dir *d, int *pages)
{
    fk_store *st;
    fk_err err;
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    int64_t job;
    assert_int_equal(fk_store_job_insert(st, "fedmean", "method = fedmean\n", 1.0, &job, &err),
                     FK_OK);
    int planned[4] = {0, 1, 2, 3};
    uint8_t blob[700];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (uint8_t)(i * 7);
    for (int r = 1; r <= 40; r++) {
        assert_int_equal(fk_store_begin(st, &err), FK_OK);
        assert_int_equal(fk_store_round_open(st, job, r, 0, planned, 4, 2, 1.0, &err), FK_OK);
        assert_int_equal(fk_store_phase_open(st, job, r, 0, 0, 100.0, &err), FK_OK);
        for (int c = 0; c < 4; c++) {
            char idem[32], who[8];
            snprintf(idem, sizeof idem, "u-%d-%d", r, c);
            snprintf(who, sizeof who, "c%d", c);
            fk_store_update u = {.job = job, .round = r, .phase = 0, .client = c,
                                 .identity = who, .idem = idem, .blob = blob,
                                 .len = sizeof blob, .received = 1.0};
            fk_report_init(&u.report);
            int dup;
            assert_int_equal(fk_store_update_put(st, &u, &dup, &err), FK_OK);
        }
        assert_int_equal(fk_store_commit(st, &err), FK_OK);
    }
    fk_store_close(st); /* the last connection checkpoints the WAL into state.db */
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), PAGE);
    sqlite3_finalize(s);
    sqlite3_close(db);
    struct stat sb;
    assert_int_equal(stat(d->db, &sb), 0);
    *pages = (int)(sb.st_size / PAGE);
    assert_true(*pages >= 20);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        assert_int_equal(fwrite(buf, 1, n, b), n);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

/* SQLite's own verdict on the file, independent of the store. */
static int sqlite_says_ok(const char *path)
{
    sqlite3 *db;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &s, NULL) == SQLITE_OK) {
            ok = sqlite3_step(s) == SQLITE_ROW &&
                 !strcmp((const char *)sqlite3_column_text(s, 0), "ok");
            sqlite3_finalize(s);
        }
    }
    sqlite3_close(db);
    return ok;
}

static void damaged_pages_are_refused_not_waited_for(void **state)
{
    dir *d = *state;
    int pages;
    make_db(d, &pages);
    char orig[160];
    snprintf(orig, sizeof orig, "%s.orig", d->db);
    copy_file(d->db, orig);
    fk_rng rng;
    fk_rng_init(&rng, 19, 0);
    int refused = 0, opened = 0;
    for (int page = 0; page < pages; page++) {
        rm_db(d, 0);
        copy_file(orig, d->db);
        int fd = open(d->db, O_WRONLY);
        assert_true(fd >= 0);
        uint8_t junk[PAGE];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)(fk_rng_u64(&rng) >> 56);
        assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)page * PAGE), (ssize_t)sizeof junk);
        close(fd);
        int verdict = sqlite_says_ok(d->db);
        fk_store *st = NULL;
        fk_err err;
        int rc = fk_store_open(&st, d->db, &err);
        if (rc == FK_OK) {
            opened++;
            fk_store_close(st);
            if (!verdict)
                fail_msg("page %d damaged: the store opened a database that fails "
                         "quick_check",
                         page + 1);
            continue;
        }
        refused++;
        if (rc != FK_EFORMAT)
            fail_msg("page %d damaged: rc %d (want FK_EFORMAT, never the FK_EIO of a full "
                     "disk): %s",
                     page + 1, rc, err.msg);
        assert_non_null(strstr(err.msg, d->db));
        assert_non_null(strstr(err.msg, "docs/operations.md"));
        assert_null(strstr(err.msg, "free space"));
    }
    /* The header page and the schema pages always matter. */
    assert_true(refused >= 2);
    print_message("%d pages: %d damaged copies refused, %d opened (quick_check ok)\n",
                  pages, refused, opened);
}

/* Issue 33 row 4: a file that holds no federation is not taken as a new one. An absent file
 * is new; an empty file or an SQLite database without fedkern's tables is refused naming
 * --init, which then starts a new federation in it; a missing file whose -wal is still there
 * (removed: its last writes are in the -wal, which a new database would replay) is refused
 * even with --init. */
static void empty_or_foreign_file_is_not_a_new_federation(void **state)
{
    dir *d = *state;
    fk_store *st = NULL;
    fk_err err;
    int fd = open(d->db, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_EINVAL);
    assert_null(st);
    assert_non_null(strstr(err.msg, "empty file"));
    assert_non_null(strstr(err.msg, "--init"));
    assert_int_equal(fk_store_open_init(&st, d->db, 1, &err), FK_OK);
    fk_store_close(st);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK); /* fedkern's now */
    fk_store_close(st);
    rm_db(d, 0);

    sqlite3 *db;
    assert_int_equal(sqlite3_open(d->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE photos (id INTEGER PRIMARY KEY)", 0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "without fedkern's tables"));
    assert_non_null(strstr(err.msg, "--init"));
    rm_db(d, 0);

    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", d->db);
    fd = open(wal, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    assert_int_equal(fk_store_open_init(&st, d->db, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "state file was removed"));
    assert_int_equal(access(d->db, F_OK), -1); /* nothing created */
    unlink(wal);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK); /* absent: new */
    fk_store_close(st);
}

/* The open file is kept by identity: removed, the store writes it back with everything the
 * connection held, and goes on; replaced, it tells so. */
static void removed_file_is_written_back(void **state)
{
    dir *d = *state;
    fk_store *st = NULL;
    fk_err err;
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    assert_int_equal(fk_store_set_limit(st, 64u << 20, &err), FK_OK);
    int64_t job;
    assert_int_equal(fk_store_job_insert(st, "fedmean", "method = fedmean\n", 1.0, &job, &err),
                     FK_OK);
    assert_int_equal(fk_store_model_put(st, job, 1, "model", 5, &err), FK_OK);
    assert_int_equal(fk_store_file_state(st), FK_STORE_FILE_OK);
    assert_int_equal(unlink(d->db), 0);
    assert_int_equal(fk_store_file_state(st), FK_STORE_FILE_REMOVED);
    assert_int_equal(fk_store_begin(st, &err), FK_OK); /* not inside a transaction */
    assert_int_equal(fk_store_recreate(st, &err), FK_ESTATE);
    fk_store_rollback(st);
    assert_int_equal(fk_store_recreate(st, &err), FK_OK);
    assert_int_equal(fk_store_file_state(st), FK_STORE_FILE_OK);
    assert_int_equal(access(d->db, F_OK), 0);
    int64_t job2;
    assert_int_equal(fk_store_job_insert(st, "fedmean", "method = fedmean\n", 2.0, &job2, &err),
                     FK_OK);
    fk_store_close(st);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    void *b;
    size_t len;
    assert_int_equal(fk_store_model_get(st, job, -1, &b, &len, NULL, &err), FK_OK);
    assert_memory_equal(b, "model", 5);
    free(b);
    fk_store_job j;
    assert_int_equal(fk_store_job_get(st, job2, &j, &err), FK_OK);
    fk_store_job_free(&j);
    /* another file moved over it: replaced; a copy of ours can be saved beside it */
    char other[160], saved[160];
    snprintf(other, sizeof other, "%s/other.db", d->path);
    snprintf(saved, sizeof saved, "%s/saved.db", d->path);
    int fd = open(other, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rename(other, d->db), 0);
    assert_int_equal(fk_store_file_state(st), FK_STORE_FILE_REPLACED);
    assert_int_equal(fk_store_save_copy(st, saved, &err), FK_OK);
    fk_store_refuse_writes(st, "replaced");
    assert_int_equal(fk_store_begin(st, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "replaced"));
    fk_store_close(st);
    struct stat sb;
    assert_int_equal(stat(d->db, &sb), 0);
    assert_int_equal(sb.st_size, 0); /* the new file left alone */
    rm_db(d, 0);
    assert_int_equal(rename(saved, d->db), 0);
    assert_int_equal(fk_store_open(&st, d->db, &err), FK_OK);
    assert_int_equal(fk_store_job_get(st, job2, &j, &err), FK_OK);
    fk_store_job_free(&j);
    fk_store_close(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(state_names_a_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(read_only_db_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(unwritable_directory_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(empty_or_foreign_file_is_not_a_new_federation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(removed_file_is_written_back, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_pages_are_refused_not_waited_for, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
