#include "client/cstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/net/chunk.h"
#include "common/net/codec.h"

static const char MAGIC[8] = {'F', 'K', 'C', 'S', 'T', 'A', 'T', 'E'};
/* HEAD1: the version-1 header; version 2 adds the two u32 lengths of method and config. */
enum { VERSION = 2, HEAD1 = 8 + 4 + 8 + 4 * 3 + 2 * FK_CSTATE_ID_MAX + 32 + 5 * 8 + 2 * 8,
       HEAD = HEAD1 + 2 * 4 };

void fk_cstate_init(fk_cstate *s)
{
    memset(s, 0, sizeof *s);
    fk_bundle_init(&s->state);
}

void fk_cstate_close(fk_cstate *s)
{
    fk_bundle_close(&s->state);
    free(s->update);
    s->update = NULL;
    s->update_len = 0;
    free(s->method);
    free(s->config);
    s->method = s->config = NULL;
}

int fk_cstate_digest(const char *method, const char *config, uint8_t out[32], fk_err *err)
{
    size_t a = strlen(method), b = strlen(config);
    uint8_t *buf = malloc(a + 1 + b);
    if (!buf)
        return fk_err_set(err, FK_ENOMEM, "client state: out of memory");
    memcpy(buf, method, a + 1);
    memcpy(buf + a + 1, config, b);
    int rc = fk_sha256(buf, a + 1 + b, out, err);
    free(buf);
    return rc;
}

static void put_u32(uint8_t **p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *(*p)++ = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t **p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *(*p)++ = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t **p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(*p)[i] << (8 * i);
    *p += 4;
    return v;
}

static uint64_t get_u64(const uint8_t **p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(*p)[i] << (8 * i);
    *p += 8;
    return v;
}

int fk_cstate_encode(const fk_cstate *s, uint8_t **out, size_t *len, fk_err *err)
{
    *out = NULL;
    *len = 0;
    uint8_t *st = NULL;
    size_t st_len = 0;
    int rc = fk_codec_bundle_encode(&s->state, &st, &st_len, err);
    if (rc)
        return rc;
    /* method and config go together: a file names its job fully or not at all */
    int named = s->method && s->config;
    size_t ml = named ? strlen(s->method) : 0, cl = named ? strlen(s->config) : 0;
    if (ml > FK_CSTATE_METHOD_MAX || cl > FK_CSTATE_CONFIG_MAX) {
        free(st);
        return fk_err_set(err, FK_ELIMIT, "client state: method name (%zu bytes) or job config "
                          "(%zu bytes) too long", ml, cl);
    }
    size_t total = (size_t)HEAD + ml + cl + st_len + s->update_len + 32;
    uint8_t *buf = malloc(total);
    if (!buf) {
        free(st);
        return fk_err_set(err, FK_ENOMEM, "client state: out of memory (%zu bytes)", total);
    }
    uint8_t *p = buf;
    memcpy(p, MAGIC, 8);
    p += 8;
    put_u32(&p, VERSION);
    put_u64(&p, (uint64_t)s->job);
    put_u32(&p, s->client);
    put_u32(&p, s->round);
    put_u32(&p, s->phase);
    memset(p, 0, 2 * FK_CSTATE_ID_MAX);
    snprintf((char *)p, FK_CSTATE_ID_MAX, "%s", s->task_id);
    snprintf((char *)p + FK_CSTATE_ID_MAX, FK_CSTATE_ID_MAX, "%s", s->update_id);
    p += 2 * FK_CSTATE_ID_MAX;
    memcpy(p, s->digest, 32);
    p += 32;
    for (int i = 0; i < 5; i++) {
        uint64_t bits;
        memcpy(&bits, &s->report[i], 8);
        put_u64(&p, bits);
    }
    put_u64(&p, st_len);
    put_u64(&p, s->update_len);
    put_u32(&p, (uint32_t)ml);
    put_u32(&p, (uint32_t)cl);
    if (ml)
        memcpy(p, s->method, ml);
    p += ml;
    if (cl)
        memcpy(p, s->config, cl);
    p += cl;
    memcpy(p, st, st_len);
    p += st_len;
    if (s->update_len)
        memcpy(p, s->update, s->update_len);
    p += s->update_len;
    free(st);
    rc = fk_sha256(buf, (size_t)(p - buf), p, err);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = total;
    return FK_OK;
}

int fk_cstate_decode(const uint8_t *buf, size_t len, fk_cstate *s, fk_err *err)
{
    if (len < (size_t)HEAD1 + 32 + 4 || memcmp(buf, MAGIC, 8) != 0)
        return fk_err_set(err, FK_EFORMAT, "not a fedkern client state file (%zu bytes)", len);
    const uint8_t *p = buf + 8;
    uint32_t version = get_u32(&p);
    if (version != 1 && version != VERSION)
        return fk_err_set(err, FK_EFORMAT, "client state file version %" PRIu32 " (this build reads "
                          "1 and %d)", version, VERSION);
    size_t head = version == 1 ? (size_t)HEAD1 : (size_t)HEAD;
    if (len < head + 32)
        return fk_err_set(err, FK_EFORMAT, "client state file: %zu bytes, shorter than its header",
                          len);
    fk_cstate t;
    fk_cstate_init(&t);
    t.job = (int64_t)get_u64(&p);
    t.client = get_u32(&p);
    t.round = get_u32(&p);
    t.phase = get_u32(&p);
    const uint8_t *ids = p;
    p += 2 * FK_CSTATE_ID_MAX;
    if (!memchr(ids, 0, FK_CSTATE_ID_MAX) || !memchr(ids + FK_CSTATE_ID_MAX, 0, FK_CSTATE_ID_MAX))
        return fk_err_set(err, FK_EFORMAT, "client state file: unterminated task or update id");
    memcpy(t.task_id, ids, FK_CSTATE_ID_MAX);
    memcpy(t.update_id, ids + FK_CSTATE_ID_MAX, FK_CSTATE_ID_MAX);
    memcpy(t.digest, p, 32);
    p += 32;
    for (int i = 0; i < 5; i++) {
        uint64_t bits = get_u64(&p);
        memcpy(&t.report[i], &bits, 8);
    }
    uint64_t st_len = get_u64(&p), up_len = get_u64(&p);
    uint32_t ml = version == 1 ? 0 : get_u32(&p), cl = version == 1 ? 0 : get_u32(&p);
    if (ml > FK_CSTATE_METHOD_MAX || cl > FK_CSTATE_CONFIG_MAX || (!ml && cl))
        return fk_err_set(err, FK_EFORMAT, "client state file: method name %" PRIu32 " or job "
                          "config %" PRIu32 " bytes (out of bounds)", ml, cl);
    size_t room = len - head - 32;
    if (ml + (size_t)cl > room)
        return fk_err_set(err, FK_EFORMAT, "client state file: method and config do not fit its "
                          "%zu bytes (truncated?)", len);
    const uint8_t *mtext = p, *ctext = p + ml;
    p += ml + (size_t)cl;
    room -= ml + (size_t)cl;
    if (st_len > room || up_len > room - st_len || st_len + up_len != room)
        return fk_err_set(err, FK_EFORMAT,
                          "client state file: lengths %" PRIu64 " + %" PRIu64
                          " do not match its %zu bytes (truncated?)",
                          st_len, up_len, len);
    if ((ml && memchr(mtext, 0, ml)) || (cl && memchr(ctext, 0, cl)))
        return fk_err_set(err, FK_EFORMAT, "client state file: a NUL in the method or config");
    if (up_len && !t.update_id[0]) /* an update may be empty (0 bytes), never without its id */
        return fk_err_set(err, FK_EFORMAT, "client state file: an update without its id");
    uint8_t sum[32];
    int rc = fk_sha256(buf, len - 32, sum, err);
    if (rc)
        return rc;
    if (memcmp(sum, buf + len - 32, 32) != 0)
        return fk_err_set(err, FK_EFORMAT, "client state file: checksum mismatch (damaged file)");
    /* The method and config must be the job the digest names (they rebuild it). */
    if (ml) {
        t.method = malloc((size_t)ml + 1);
        t.config = malloc((size_t)cl + 1);
        if (!t.method || !t.config) {
            fk_cstate_close(&t);
            return fk_err_set(err, FK_ENOMEM, "client state: out of memory");
        }
        memcpy(t.method, mtext, ml);
        t.method[ml] = '\0';
        if (cl)
            memcpy(t.config, ctext, cl);
        t.config[cl] = '\0';
        uint8_t d[32];
        rc = fk_cstate_digest(t.method, t.config, d, err);
        if (!rc && memcmp(d, t.digest, 32) != 0)
            rc = fk_err_set(err, FK_EFORMAT, "client state file: the method and config do not "
                            "match the file's job digest");
        if (rc) {
            fk_cstate_close(&t);
            return rc;
        }
    }
    rc = fk_codec_bundle_decode(p, (size_t)st_len, &t.state, err);
    if (!rc && up_len) {
        fk_bundle check; /* the update is resent as is: it must be a valid bundle */
        fk_bundle_init(&check);
        rc = fk_codec_bundle_decode(p + st_len, (size_t)up_len, &check, err);
        fk_bundle_close(&check);
        if (!rc && !(t.update = malloc((size_t)up_len)))
            rc = fk_err_set(err, FK_ENOMEM, "client state: out of memory");
        if (!rc) {
            memcpy(t.update, p + st_len, (size_t)up_len);
            t.update_len = (size_t)up_len;
        }
    }
    if (rc) {
        fk_cstate_close(&t);
        return fk_err_prefix(err, rc, "client state file: ");
    }
    fk_cstate_close(s);
    *s = t;
    return FK_OK;
}

int fk_cstate_path(char *out, size_t cap, const char *dir, int64_t job, fk_err *err)
{
    int w = snprintf(out, cap, "%s/job-%" PRId64 ".state", dir, job);
    if (w < 0 || (size_t)w >= cap)
        return fk_err_set(err, FK_EINVAL, "client state directory path too long: %s", dir);
    return FK_OK;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int fk_cstate_write(const char *dir, const fk_cstate *s, fk_err *err)
{
    char path[4096], tmp[4200];
    int rc = fk_cstate_path(path, sizeof path, dir, s->job, err);
    if (rc)
        return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint8_t *buf;
    size_t len;
    if ((rc = fk_cstate_encode(s, &buf, &len, err)))
        return rc;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = fk_err_set(err, FK_EIO, "cannot create %s: %s (is --state_dir writable?)", tmp,
                        strerror(errno));
        free(buf);
        return rc;
    }
    int bad = write_all(fd, buf, len) || fsync(fd);
    int e = errno;
    free(buf);
    if (close(fd) && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad || rename(tmp, path)) {
        if (!bad)
            e = errno;
        unlink(tmp);
        return fk_err_set(err, FK_EIO, "cannot write %s: %s", path, strerror(e));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* make the rename durable */
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return FK_OK;
}

int fk_cstate_read(const char *dir, int64_t job, fk_cstate *s, fk_err *err)
{
    char path[4096];
    int rc = fk_cstate_path(path, sizeof path, dir, job, err);
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT
                   ? fk_err_set(err, FK_ENOTFOUND, "no client state for job %" PRId64, job)
                   : fk_err_set(err, FK_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < 0 || sb.st_size > FK_CSTATE_MAX_BYTES) {
        close(fd);
        return fk_err_set(err, FK_EFORMAT, "%s: not a regular file of at most 1 GiB", path);
    }
    size_t len = (size_t)sb.st_size, got = 0;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return fk_err_set(err, FK_ENOMEM, "client state: out of memory (%zu bytes)", len);
    }
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    rc = got == len ? fk_cstate_decode(buf, len, s, err)
                    : fk_err_set(err, FK_EIO, "cannot read %s", path);
    free(buf);
    if (rc)
        fk_err_prefix(err, rc, "%s: ", path);
    return rc;
}

int fk_cstate_remove(const char *dir, int64_t job, fk_err *err)
{
    char path[4096];
    int rc = fk_cstate_path(path, sizeof path, dir, job, err);
    if (rc)
        return rc;
    if (unlink(path) && errno != ENOENT)
        return fk_err_set(err, FK_EIO, "cannot remove %s: %s", path, strerror(errno));
    return FK_OK;
}

int fk_cstate_list(const char *dir, int64_t **jobs, int *n, fk_err *err)
{
    *jobs = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return fk_err_set(err, FK_EIO, "cannot list %s: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long id;
        char tail[8];
        if (sscanf(e->d_name, "job-%lld.%7s", &id, tail) != 2 || strcmp(tail, "state"))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            int64_t *g = realloc(*jobs, (size_t)cap * sizeof *g);
            if (!g) {
                closedir(d);
                free(*jobs);
                *jobs = NULL;
                *n = 0;
                return fk_err_set(err, FK_ENOMEM, "client state: out of memory");
            }
            *jobs = g;
        }
        (*jobs)[(*n)++] = (int64_t)id;
    }
    closedir(d);
    return FK_OK;
}
