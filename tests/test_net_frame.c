/* gRPC length-prefix framing: split feeds, limits before allocation, flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/grpc_frame.h"

typedef struct collected {
    int count;
    size_t lens[16];
    uint8_t first[16];
    int stop_after; /* return FK_ESTATE from the callback after this many */
} collected;

static int collect(void *ctx, uint8_t *msg, size_t len)
{
    collected *c = ctx;
    if (c->count < 16) {
        c->lens[c->count] = len;
        c->first[c->count] = len ? msg[0] : 0;
    }
    c->count++;
    free(msg);
    return c->stop_after && c->count >= c->stop_after ? FK_ESTATE : FK_OK;
}

/* Stream of three messages of lengths 0, 3 and 70000 (crosses the first allocation). */
static uint8_t *make_stream(size_t *len)
{
    size_t lens[3] = {0, 3, 70000};
    size_t total = 0;
    for (int i = 0; i < 3; i++)
        total += FK_GRPC_PREFIX_LEN + lens[i];
    uint8_t *s = malloc(total), *w = s;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fk_grpc_frame_prefix(w, lens[i], NULL), FK_OK);
        w += FK_GRPC_PREFIX_LEN;
        memset(w, 'a' + i, lens[i]);
        w += lens[i];
    }
    *len = total;
    return s;
}

static void whole_and_byte_by_byte(void **state)
{
    (void)state;
    size_t len;
    uint8_t *s = make_stream(&len);
    size_t steps[] = {len, 1, 7, 4096};
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        fk_grpc_frame_parser p;
        fk_grpc_frame_init(&p, 1 << 20);
        collected c = {0};
        fk_err err;
        for (size_t off = 0; off < len; off += steps[k]) {
            size_t n = len - off < steps[k] ? len - off : steps[k];
            assert_int_equal(fk_grpc_frame_feed(&p, s + off, n, collect, &c, &err), FK_OK);
        }
        assert_int_equal(c.count, 3);
        assert_int_equal(c.lens[0], 0);
        assert_int_equal(c.lens[1], 3);
        assert_int_equal(c.first[1], 'b');
        assert_int_equal(c.lens[2], 70000);
        assert_int_equal(c.first[2], 'c');
        assert_false(fk_grpc_frame_partial(&p));
        fk_grpc_frame_close(&p);
    }
    free(s);
}

static void oversized_refused_from_header(void **state)
{
    (void)state;
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 1000);
    uint8_t hdr[5];
    assert_int_equal(fk_grpc_frame_prefix(hdr, 0xFFFFFFF0u, NULL), FK_OK);
    collected c = {0};
    fk_err err;
    assert_int_equal(fk_grpc_frame_feed(&p, hdr, 5, collect, &c, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "maximum message size"));
    /* Nothing was allocated for the announced 4 GB. */
    assert_int_equal(fk_grpc_frame_buffered(&p), 0);
    assert_int_equal(fk_grpc_frame_feed(&p, hdr, 1, collect, &c, &err), FK_ESTATE);
    fk_grpc_frame_close(&p);

    /* Exactly the maximum passes. */
    fk_grpc_frame_init(&p, 1000);
    uint8_t *m = calloc(1005, 1);
    assert_int_equal(fk_grpc_frame_prefix(m, 1000, NULL), FK_OK);
    assert_int_equal(fk_grpc_frame_feed(&p, m, 1005, collect, &c, &err), FK_OK);
    assert_int_equal(c.count, 1);
    free(m);
    fk_grpc_frame_close(&p);
}

static void compressed_flag_rejected(void **state)
{
    (void)state;
    uint8_t hdr[6] = {1, 0, 0, 0, 1, 'x'};
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 100);
    collected c = {0};
    fk_err err;
    assert_int_equal(fk_grpc_frame_feed(&p, hdr, 6, collect, &c, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "compressed"));
    fk_grpc_frame_close(&p);
    hdr[0] = 7;
    fk_grpc_frame_init(&p, 100);
    assert_int_equal(fk_grpc_frame_feed(&p, hdr, 6, collect, &c, &err), FK_EFORMAT);
    fk_grpc_frame_close(&p);
    assert_int_equal(c.count, 0);
}

static void partial_and_callback_stop(void **state)
{
    (void)state;
    size_t len;
    uint8_t *s = make_stream(&len);
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 1 << 20);
    collected c = {0};
    fk_err err;
    assert_int_equal(fk_grpc_frame_feed(&p, s, len - 10, collect, &c, &err), FK_OK);
    assert_true(fk_grpc_frame_partial(&p));
    assert_true(fk_grpc_frame_buffered(&p) >= 70000 - 10);
    fk_grpc_frame_close(&p); /* frees the half message */

    fk_grpc_frame_init(&p, 1 << 20);
    collected stop = {.stop_after = 1};
    assert_int_equal(fk_grpc_frame_feed(&p, s, len, collect, &stop, &err), FK_ESTATE);
    assert_int_equal(stop.count, 1);
    fk_grpc_frame_close(&p);
    free(s);
}

/* The allocation hook: one caller-owned buffer per message, refusals stop the feed. */
typedef struct hooked {
    uint8_t bufs[3][70000];
    int nalloc, ndone, refuse_at;
    size_t lens[3];
    uint8_t *delivered[3];
} hooked;

static int hook_alloc(void *ctx, size_t len, uint8_t **buf)
{
    hooked *h = ctx;
    if (h->refuse_at && h->nalloc + 1 == h->refuse_at)
        return FK_ELIMIT;
    *buf = h->bufs[h->nalloc++];
    return len <= sizeof h->bufs[0] ? FK_OK : FK_ENOMEM;
}

static int hook_done(void *ctx, uint8_t *msg, size_t len)
{
    hooked *h = ctx;
    h->lens[h->ndone] = len;
    h->delivered[h->ndone++] = msg; /* not freed: it is h's */
    return FK_OK;
}

static void alloc_hook(void **state)
{
    (void)state;
    size_t len;
    uint8_t *s = make_stream(&len);
    hooked *h = calloc(1, sizeof *h);
    assert_non_null(h);
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 1 << 20);
    fk_grpc_frame_set_alloc(&p, hook_alloc);
    fk_err err;
    for (size_t off = 0; off < len; off += 4093) {
        size_t n = len - off < 4093 ? len - off : 4093;
        assert_int_equal(fk_grpc_frame_feed(&p, s + off, n, hook_done, h, &err), FK_OK);
    }
    assert_int_equal(h->nalloc, 3);
    assert_int_equal(h->ndone, 3);
    assert_int_equal(h->lens[0], 0);
    assert_int_equal(h->lens[1], 3);
    assert_int_equal(h->lens[2], 70000);
    for (int i = 0; i < 3; i++)
        assert_ptr_equal(h->delivered[i], h->bufs[i]);
    assert_memory_equal(h->bufs[2], s + len - 70000, 70000);
    assert_false(fk_grpc_frame_partial(&p));
    fk_grpc_frame_close(&p);

    memset(h, 0, sizeof *h);
    h->refuse_at = 2;
    fk_grpc_frame_init(&p, 1 << 20);
    fk_grpc_frame_set_alloc(&p, hook_alloc);
    assert_int_equal(fk_grpc_frame_feed(&p, s, len, hook_done, h, &err), FK_ELIMIT);
    assert_int_equal(h->ndone, 1);
    assert_int_equal(fk_grpc_frame_feed(&p, s, 1, hook_done, h, &err), FK_ESTATE);
    fk_grpc_frame_close(&p); /* must not free h's buffers */
    free(h);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_and_byte_by_byte),
        cmocka_unit_test(oversized_refused_from_header),
        cmocka_unit_test(compressed_flag_rejected),
        cmocka_unit_test(partial_and_callback_stop),
        cmocka_unit_test(alloc_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
