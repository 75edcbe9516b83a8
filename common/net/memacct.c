#include "common/net/memacct.h"

#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static int on;
static long live[FK_MEM_PARTS];

static void *acct_malloc(fk_mem_part part, size_t n)
{
    void *p = malloc(n);
    if (p)
        live[part] += (long)malloc_usable_size(p);
    return p;
}

static void *acct_realloc(fk_mem_part part, void *old, size_t n)
{
    size_t was = old ? malloc_usable_size(old) : 0;
    void *p = realloc(old, n);
    if (p || n == 0)
        live[part] -= (long)was;
    if (p)
        live[part] += (long)malloc_usable_size(p);
    return p;
}

static void *acct_calloc(fk_mem_part part, size_t k, size_t n)
{
    void *p = calloc(k, n);
    if (p)
        live[part] += (long)malloc_usable_size(p);
    return p;
}

static void acct_free(fk_mem_part part, void *p)
{
    if (p)
        live[part] -= (long)malloc_usable_size(p);
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

static void *ng_m(size_t n, void *ud)
{
    (void)ud;
    return acct_malloc(FK_MEM_NGHTTP2, n);
}
static void *ng_r(void *p, size_t n, void *ud)
{
    (void)ud;
    return acct_realloc(FK_MEM_NGHTTP2, p, n);
}
static void *ng_c(size_t k, size_t n, void *ud)
{
    (void)ud;
    return acct_calloc(FK_MEM_NGHTTP2, k, n);
}
static void ng_f(void *p, void *ud)
{
    (void)ud;
    acct_free(FK_MEM_NGHTTP2, p);
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
    return live[part] > 0 ? (size_t)live[part] : 0;
}

void fk_memacct_add(fk_mem_part part, long n)
{
    if (on)
        live[part] += n;
}

void *fk_memacct_nghttp2(void)
{
    return on ? &ng_mem : NULL;
}
