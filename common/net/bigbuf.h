/* Message buffers. Large ones (>= 4 MiB) are mapped on 2 MiB boundaries with
 * transparent huge pages requested, and one freed large buffer can be kept in
 * a cache for the next message of similar size: fresh memory costs a page
 * fault and a page clear per 4 KiB, which dominated large-payload receiving. */
#ifndef FK_NET_BIGBUF_H
#define FK_NET_BIGBUF_H

#include <stddef.h>

/* Free p of capacity cap (from fk_bigbuf_alloc). NULL is ignored. */
void fk_bigbuf_free(void *p, size_t cap);

/* A one-slot cache: at most one idle large buffer, so the memory it keeps is
 * bounded by the largest message allowed. */
typedef struct fk_bigbuf_cache {
    void *p;
    size_t cap;
} fk_bigbuf_cache;

/* Like fk_bigbuf_alloc, but reuses the cached buffer when it fits n without
 * wasting more than half of it. */
void *fk_bigbuf_cache_get(fk_bigbuf_cache *c, size_t n, size_t *cap);
/* Keep p (if large) for reuse, freeing what was cached before; small ones are freed. */
void fk_bigbuf_cache_put(fk_bigbuf_cache *c, void *p, size_t cap);
void fk_bigbuf_cache_close(fk_bigbuf_cache *c);

#endif
