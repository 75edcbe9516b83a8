/* Test helpers: a private temp dir and small files written into it (plain or gzip). */
#ifndef FK_TEST_DATA_FIXTURES_H
#define FK_TEST_DATA_FIXTURES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

typedef struct fixture_dir {
    char dir[256];
    char path[512]; /* last path built by fixture_path */
} fixture_dir;

static inline int fixture_open(fixture_dir *f)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/fk_test_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(f->dir) ? 0 : -1;
}

static inline const char *fixture_path(fixture_dir *f, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
    return f->path;
}

/* Write n bytes to dir/name; gzip-compressed when gz != 0. Returns the path. */
static inline const char *fixture_write(fixture_dir *f, const char *name, const void *data, size_t n, int gz)
{
    const char *p = fixture_path(f, name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        if (!g)
            return NULL;
        if (n)
            gzwrite(g, data, (unsigned)n);
        gzclose(g);
    } else {
        FILE *o = fopen(p, "wb");
        if (!o)
            return NULL;
        fwrite(data, 1, n, o);
        fclose(o);
    }
    return p;
}

static inline const char *fixture_text(fixture_dir *f, const char *name, const char *text, int gz)
{
    return fixture_write(f, name, text, strlen(text), gz);
}

/* Remove every file in the dir (one level of subdirectories), then the dir. */
static inline void fixture_close(fixture_dir *f)
{
    DIR *d = opendir(f->dir);
    struct dirent *e;
    char p[1024];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
        if (unlink(p) != 0) {
            DIR *sub = opendir(p);
            struct dirent *s;
            char q[1536];
            while (sub && (s = readdir(sub))) {
                if (s->d_name[0] == '.')
                    continue;
                snprintf(q, sizeof q, "%s/%s", p, s->d_name);
                unlink(q);
            }
            if (sub)
                closedir(sub);
            rmdir(p);
        }
    }
    if (d)
        closedir(d);
    rmdir(f->dir);
}

/* cmocka setup/teardown: a fresh fixture_dir in *state for each test. */
static inline int fixture_setup(void **state)
{
    fixture_dir *f = calloc(1, sizeof *f);
    if (!f || fixture_open(f)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static inline int fixture_teardown(void **state)
{
    fixture_close(*state);
    free(*state);
    return 0;
}

#endif
