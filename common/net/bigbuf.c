#include "common/net/bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_ALIGN = 2u << 20, BIG_MIN = 4u << 20 };

/* At least n bytes (n = 0 allowed), or NULL; *cap receives the real size. */
static void *bigbuf_alloc(size_t n, size_t *cap)
{
    if (n < BIG_MIN) {
        *cap = n;
        return malloc(n ? n : 1);
    }
    size_t len = (n + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    if (len < n)
        return NULL;
    /* Over-map by one huge page, then trim both ends to a 2 MiB-aligned block. */
    uint8_t *raw = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    uint8_t *p = (uint8_t *)a;
    size_t head = (size_t)(p - raw), tail = HUGE_ALIGN - head;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(p + len, tail);
    madvise(p, len, MADV_HUGEPAGE); /* a hint: without THP this is plain 4 KiB pages */
    *cap = len;
    return p;
}

void fk_bigbuf_free(void *p, size_t cap)
{
    if (!p)
        return;
    if (cap < BIG_MIN)
        free(p);
    else
        munmap(p, cap);
}

void *fk_bigbuf_cache_get(fk_bigbuf_cache *c, size_t n, size_t *cap)
{
    if (c->p && n >= BIG_MIN && c->cap >= n && c->cap / 2 <= n) {
        void *p = c->p;
        *cap = c->cap;
        c->p = NULL;
        c->cap = 0;
        return p;
    }
    return bigbuf_alloc(n, cap);
}

void fk_bigbuf_cache_put(fk_bigbuf_cache *c, void *p, size_t cap)
{
    if (!p)
        return;
    if (cap < BIG_MIN) {
        free(p);
        return;
    }
    fk_bigbuf_free(c->p, c->cap);
    c->p = p;
    c->cap = cap;
}

void fk_bigbuf_cache_close(fk_bigbuf_cache *c)
{
    fk_bigbuf_free(c->p, c->cap);
    c->p = NULL;
    c->cap = 0;
}
