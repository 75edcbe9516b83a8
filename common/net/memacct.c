#include "common/net/memacct.h"

#include <malloc.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <uv.h>

static int on;
/* Atomic: with net.io_threads > 1 several threads allocate at once. */
static atomic_long live[FK_MEM_PARTS];

static void live_add(fk_mem_part part, long n)
{
    atomic_fetch_add_explicit(&live[part], n, memory_order_relaxed);
}

static void *acct_malloc(fk_mem_part part, size_t n)
{
    void *p = malloc(n);
    if (p)
        live_add(part, (long)malloc_usable_size(p));
    return p;
}

static void *acct_realloc(fk_mem_part part, void *old, size_t n)
{
    size_t was = old ? malloc_usable_size(old) : 0;
    void *p = realloc(old, n);
    if (p || n == 0)
        live_add(part, -((long)was));
    if (p)
        live_add(part, (long)malloc_usable_size(p));
    return p;
}

static void *acct_calloc(fk_mem_part part, size_t k, size_t n)
{
    void *p = calloc(k, n);
    if (p)
        live_add(part, (long)malloc_usable_size(p));
    return p;
}

static void acct_free(fk_mem_part part, void *p)
{
    if (p)
        live_add(part, -((long)malloc_usable_size(p)));
    free(p);
}

static void *ossl_malloc(size_t n, const char *f, int l)
{
    (void)f, (void)l;
    return acct_malloc(FK_MEM_OPENSSL, n);
}
static void *ossl_realloc(void *p, size_t n, const char *f, int l)
{
    (void)f, (void)l;
    return acct_realloc(FK_MEM_OPENSSL, p, n);
}
static void ossl_free(void *p, const char *f, int l)
{
    (void)f, (void)l;
    acct_free(FK_MEM_OPENSSL, p);
}

static void *uv_m(size_t n) { return acct_malloc(FK_MEM_LIBUV, n); }
static void *uv_r(void *p, size_t n) { return acct_realloc(FK_MEM_LIBUV, p, n); }
static void *uv_c(size_t k, size_t n) { return acct_calloc(FK_MEM_LIBUV, k, n); }
static void uv_f(void *p) { acct_free(FK_MEM_LIBUV, p); }

/* nghttp2's blocks of NG_BIG bytes and more come from mmap: the biggest is the 16 KB
 * outbound frame buffer every session allocates up front, of which a unary gRPC call writes
 * the first few hundred bytes. From malloc it would be resident whole (the heap reuses pages
 * that handshakes dirtied); from mmap only the pages written are. A header before the block
 * keeps its size (and that it was mapped). */
enum { NG_BIG = 12u << 10, NG_HDR = 16 };

static void *ng_big(size_t n)
{
    size_t len = n + NG_HDR;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memcpy(p, &len, sizeof len);
    p[NG_HDR - 1] = 1;
    return p + NG_HDR;
}

static size_t ng_len(void *q, int *mapped)
{
    uint8_t *p = (uint8_t *)q - NG_HDR;
    size_t len;
    memcpy(&len, p, sizeof len);
    *mapped = p[NG_HDR - 1];
    return len;
}

static void *ng_m(size_t n, void *ud)
{
    (void)ud;
    if (n >= NG_BIG) {
        void *q = ng_big(n);
        if (q && on)
            live_add(FK_MEM_NGHTTP2_MAPPED, (long)n);
        if (q)
            return q;
        /* no mapping (vm.max_map_count reached): the heap still serves it */
    }
    uint8_t *p = on ? acct_malloc(FK_MEM_NGHTTP2, n + NG_HDR) : malloc(n + NG_HDR);
    if (!p)
        return NULL;
    size_t len = n + NG_HDR;
    memcpy(p, &len, sizeof len);
    p[NG_HDR - 1] = 0;
    return p + NG_HDR;
}

static void ng_f(void *q, void *ud)
{
    (void)ud;
    if (!q)
        return;
    int mapped;
    size_t len = ng_len(q, &mapped);
    uint8_t *p = (uint8_t *)q - NG_HDR;
    if (mapped) {
        if (on)
            live_add(FK_MEM_NGHTTP2_MAPPED, -(long)(len - NG_HDR));
        munmap(p, len);
    } else if (on) {
        acct_free(FK_MEM_NGHTTP2, p);
    } else {
        free(p);
    }
}

static void *ng_c(size_t k, size_t n, void *ud)
{
    if (n && k > SIZE_MAX / n - NG_HDR)
        return NULL;
    void *q = ng_m(k * n, ud);
    int mapped;
    if (q && (ng_len(q, &mapped), !mapped)) /* fresh mappings are zero already */
        memset(q, 0, k * n);
    return q;
}

static void *ng_r(void *q, size_t n, void *ud)
{
    if (!q)
        return ng_m(n, ud);
    if (n == 0) {
        ng_f(q, ud);
        return NULL;
    }
    int mapped;
    size_t had = ng_len(q, &mapped) - NG_HDR;
    void *r = ng_m(n, ud);
    if (!r)
        return NULL;
    memcpy(r, q, had < n ? had : n);
    ng_f(q, ud);
    return r;
}

static nghttp2_mem ng_mem = {NULL, ng_m, ng_f, ng_c, ng_r};

int fk_memacct_install(void)
{
    const char *e = getenv("FEDKERN_MEMACCT");
    if (!e || strcmp(e, "1"))
        return 0;
    /* both refuse once their library has allocated: then nothing is counted for it */
    int ok = CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free) == 1;
    ok &= uv_replace_allocator(uv_m, uv_r, uv_c, uv_f) == 0;
    on = ok;
    return on;
}

int fk_memacct_on(void)
{
    return on;
}

size_t fk_memacct_live(fk_mem_part part)
{
    long v = atomic_load_explicit(&live[part], memory_order_relaxed);
    return v > 0 ? (size_t)v : 0;
}

void fk_memacct_add(fk_mem_part part, long n)
{
    if (on)
        live_add(part, n);
}

void *fk_memacct_nghttp2(void)
{
    return &ng_mem;
}
