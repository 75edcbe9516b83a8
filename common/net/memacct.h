/* Where a connection's memory goes, and nghttp2's allocator: opt-in accounting of the live heap bytes that OpenSSL,
 * nghttp2 and libuv hold, and of our own per-connection structs. Turned on by
 * FEDKERN_MEMACCT=1 in the environment (fedkern bench load sets it); the allocators are then
 * wrapped to add malloc_usable_size of each block, so the sums include malloc's rounding but
 * not its per-chunk header or fragmentation. Off, nothing is wrapped and nothing is counted.
 * The counters are atomic: the server's I/O threads (net.io_threads > 1) count at once. */
#ifndef FK_NET_MEMACCT_H
#define FK_NET_MEMACCT_H

#include <stddef.h>

typedef enum fk_mem_part {
    FK_MEM_OPENSSL, /* SSL objects, record buffers, peer certificates, handshake state */
    FK_MEM_NGHTTP2, /* HTTP/2 sessions: HPACK tables, session state, streams (heap) */
    FK_MEM_NGHTTP2_MAPPED, /* nghttp2's big blocks from mmap (only written pages resident) */
    FK_MEM_LIBUV,   /* libuv's own allocations (handles are inside our structs) */
    FK_MEM_CONN,    /* our connection structs (TLS + HTTP/2 connection, libuv handles) */
    FK_MEM_CALL,    /* our per-call structs and request/response buffers */
    FK_MEM_PARTS
} fk_mem_part;

/* Install the wrappers when FEDKERN_MEMACCT=1; call first in main, before any OpenSSL or
 * libuv call. Returns 1 when accounting is on. */
int fk_memacct_install(void);
int fk_memacct_on(void);
/* Live bytes of a part. */
size_t fk_memacct_live(fk_mem_part part);
/* Count n bytes more (or fewer, n < 0) for a part we allocate ourselves; no-op when off. */
void fk_memacct_add(fk_mem_part part, long n);
/* The nghttp2_mem to give nghttp2 (an nghttp2_mem *): counts when on, and always serves
 * blocks of 12 KB and more from mmap so that their untouched pages are not resident. */
void *fk_memacct_nghttp2(void);

#endif
