/* Chunking: plan/slice, reassembly in any order, idempotent resends, resume
 * from the missing list, memory limit, hash check, and a bundle end to end
 * through PushUpdateRequest messages under a maximum message size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/la/rng.h"
#include "common/net/chunk.h"
#include "common/net/codec.h"

static uint8_t *make_payload(size_t n, uint64_t seed)
{
    fk_rng r;
    fk_rng_init(&r, seed, 1);
    uint8_t *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)fk_rng_u64(&r);
    return p;
}

static void add_chunk(fk_reasm *r, const fk_chunker *c, uint32_t i, int *complete)
{
    fedkern_v1_Chunk h;
    const uint8_t *d;
    size_t n;
    fk_err err;
    assert_int_equal(fk_chunker_get(c, i, &h, &d, &n, &err), FK_OK);
    int rc = fk_reasm_add(r, &h, d, n, complete, &err);
    if (rc != FK_OK)
        fail_msg("chunk %u: %s", i, err.msg);
}

static void any_order_with_duplicates(void **state)
{
    (void)state;
    size_t len = 100003;
    uint8_t *p = make_payload(len, 7);
    fk_chunker c;
    fk_err err;
    assert_int_equal(fk_chunker_init(&c, p, len, 4096, &err), FK_OK);
    assert_int_equal(c.total, 25);
    int order[25];
    for (int i = 0; i < 25; i++)
        order[i] = i;
    fk_rng r;
    fk_rng_init(&r, 3, 0);
    fk_rng_shuffle(&r, order, 25);
    fk_reasm ra;
    fk_reasm_init(&ra, 1 << 20);
    assert_int_equal(fk_reasm_missing(&ra, NULL, 0), 0);
    int complete = 0;
    for (int k = 0; k < 25; k++) {
        assert_false(complete);
        add_chunk(&ra, &c, (uint32_t)order[k], &complete);
        add_chunk(&ra, &c, (uint32_t)order[k], &complete); /* resend: no-op */
        assert_int_equal(fk_reasm_missing(&ra, NULL, 0), 24 - k);
    }
    assert_true(complete);
    uint8_t *out;
    size_t olen;
    assert_int_equal(fk_reasm_take(&ra, &out, &olen, &err), FK_OK);
    assert_int_equal(olen, len);
    assert_memory_equal(out, p, len);
    free(out);
    fk_reasm_close(&ra);
    free(p);
}

static void resume_from_missing_list(void **state)
{
    (void)state;
    size_t len = 10000;
    uint8_t *p = make_payload(len, 9);
    fk_chunker c;
    fk_err err;
    assert_int_equal(fk_chunker_init(&c, p, len, 1000, &err), FK_OK);
    fk_reasm ra;
    fk_reasm_init(&ra, 1 << 20);
    int complete;
    /* the connection drops after chunks 0, 1, 2 and 5 */
    uint32_t sent[] = {0, 1, 2, 5};
    for (int k = 0; k < 4; k++)
        add_chunk(&ra, &c, sent[k], &complete);
    uint32_t missing[16];
    size_t n = fk_reasm_missing(&ra, missing, 16);
    assert_int_equal(n, 6);
    uint32_t want[] = {3, 4, 6, 7, 8, 9};
    assert_memory_equal(missing, want, sizeof want);
    /* a short out array still reports the full count */
    assert_int_equal(fk_reasm_missing(&ra, missing, 2), 6);
    for (size_t k = 0; k < n; k++)
        add_chunk(&ra, &c, want[k], &complete);
    assert_true(complete);
    assert_int_equal(fk_reasm_missing(&ra, missing, 16), 0);
    fk_reasm_close(&ra);
    free(p);
}

static void limits_and_corruption(void **state)
{
    (void)state;
    size_t len = 5000;
    uint8_t *p = make_payload(len, 11);
    fk_chunker c;
    fk_err err;
    assert_int_equal(fk_chunker_init(&c, p, len, 1000, &err), FK_OK);
    fedkern_v1_Chunk h;
    const uint8_t *d;
    size_t n;
    int complete;

    /* over the memory limit: refused before allocating */
    fk_reasm ra;
    fk_reasm_init(&ra, 4000);
    assert_int_equal(fk_chunker_get(&c, 0, &h, &d, &n, &err), FK_OK);
    assert_int_equal(fk_reasm_add(&ra, &h, d, n, &complete, &err), FK_ELIMIT);
    assert_null(ra.buf);
    assert_non_null(strstr(err.msg, "memory limit"));
    fk_reasm_close(&ra);

    /* a chunk of another payload, and a resend with other bytes */
    fk_reasm_init(&ra, 1 << 20);
    assert_int_equal(fk_reasm_add(&ra, &h, d, n, &complete, &err), FK_OK);
    fedkern_v1_Chunk other = h;
    other.index = 1;
    other.sha256[0] ^= 1;
    assert_int_equal(fk_reasm_add(&ra, &other, d, n, &complete, &err), FK_EFORMAT);
    uint8_t changed[1000];
    memcpy(changed, d, 1000);
    changed[10] ^= 0x40;
    assert_int_equal(fk_reasm_add(&ra, &h, changed, n, &complete, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "different bytes"));
    /* a corrupted chunk passes on its own but fails the hash at the end, which resets */
    for (uint32_t i = 1; i < 5; i++) {
        assert_int_equal(fk_chunker_get(&c, i, &h, &d, &n, &err), FK_OK);
        memcpy(changed, d, n);
        if (i == 3)
            changed[0] ^= 1;
        int rc = fk_reasm_add(&ra, &h, changed, n, &complete, &err);
        assert_int_equal(rc, i < 4 ? FK_OK : FK_EFORMAT);
    }
    assert_non_null(strstr(err.msg, "SHA-256"));
    assert_false(ra.started);
    assert_false(complete);
    uint8_t *out;
    size_t olen;
    assert_int_equal(fk_reasm_take(&ra, &out, &olen, &err), FK_ESTATE);
    /* inconsistent header: wrong length for a middle chunk */
    assert_int_equal(fk_chunker_get(&c, 1, &h, &d, &n, &err), FK_OK);
    assert_int_equal(fk_reasm_add(&ra, &h, d, n - 1, &complete, &err), FK_EFORMAT);
    fk_reasm_close(&ra);
    free(p);

    assert_int_equal(fk_chunk_data_max(FK_CHUNK_OVERHEAD, 0), 0);
    assert_int_equal(fk_chunk_data_max(FK_CHUNK_OVERHEAD + 100, 50), 50);
    assert_int_equal(fk_chunker_init(&c, (const uint8_t *)"x", 0, 10, &err), FK_EINVAL);
}

/* A 2.4 MB bundle crosses a 256 KB maximum message size as chunked
 * PushUpdateRequests, every one within the limit, and comes back identical. */
static void bundle_through_messages(void **state)
{
    (void)state;
    fk_bundle b;
    fk_bundle_init(&b);
    uint64_t shape[2] = {300, 1000};
    double *v = fk_bundle_add(&b, "w", 2, shape);
    fk_rng r;
    fk_rng_init(&r, 5, 0);
    for (size_t i = 0; i < 300000; i++)
        v[i] = fk_rng_normal(&r);
    assert_int_equal(fk_bundle_put_scalar(&b, "bias", -1.5), FK_OK);
    uint8_t *payload;
    size_t plen;
    fk_err err;
    assert_int_equal(fk_codec_bundle_encode(&b, &payload, &plen, &err), FK_OK);
    size_t max_msg = 256 * 1024;
    fk_chunker c;
    assert_int_equal(fk_chunker_init(&c, payload, plen, fk_chunk_data_max(max_msg, 0), &err),
                     FK_OK);
    assert_true(c.total >= 10);
    fk_reasm ra;
    fk_reasm_init(&ra, 8 << 20);
    int complete = 0;
    for (uint32_t i = c.total; i-- > 0;) { /* backwards, for good measure */
        fedkern_v1_PushUpdateRequest m = fedkern_v1_PushUpdateRequest_init_zero;
        snprintf(m.update_id, sizeof m.update_id, "%063x", 0xabc);
        snprintf(m.session_id, sizeof m.session_id, "%063d", 1);
        snprintf(m.job_id, sizeof m.job_id, "%063d", 2);
        m.has_report = true;
        memset(m.report.error, 'e', sizeof m.report.error - 1);
        fk_codec_tx tx = {0};
        assert_int_equal(fk_chunker_get(&c, i, &m.chunk, &tx.chunk_data, &tx.chunk_len, &err),
                         FK_OK);
        uint8_t *buf;
        size_t len;
        assert_int_equal(fk_codec_encode_push_update_request(&m, &tx, 1, &buf, &len, &err), FK_OK);
        assert_true(len - 5 <= max_msg);
        fedkern_v1_PushUpdateRequest d;
        fk_codec_rx rx = {0};
        assert_int_equal(fk_codec_decode_push_update_request(buf + 5, len - 5, &d, &rx, &err),
                         FK_OK);
        assert_true(rx.has_chunk);
        assert_int_equal(fk_reasm_add(&ra, &d.chunk, rx.chunk_data, rx.chunk_len, &complete, &err),
                         FK_OK);
        fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &d);
        free(buf);
    }
    assert_true(complete);
    uint8_t *got;
    size_t glen;
    assert_int_equal(fk_reasm_take(&ra, &got, &glen, &err), FK_OK);
    fk_bundle back;
    fk_bundle_init(&back);
    assert_int_equal(fk_codec_bundle_decode(got, glen, &back, &err), FK_OK);
    assert_int_equal(back.count, 2);
    assert_memory_equal(fk_bundle_get(&back, "w")->data, v, 300000 * sizeof(double));
    fk_bundle_close(&back);
    free(got);
    free(payload);
    fk_reasm_close(&ra);
    fk_bundle_close(&b);
}

/* Chunks cut from a bundle on demand equal the chunks of its full encoding. */
static void bundle_chunker_matches_encoding(void **state)
{
    (void)state;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_rng r;
    fk_rng_init(&r, 8, 0);
    uint64_t shape[2] = {70, 50};
    double *v = fk_bundle_add(&b, "big", 2, shape);
    for (size_t i = 0; i < 3500; i++)
        v[i] = fk_rng_normal(&r);
    assert_int_equal(fk_bundle_put_scalar(&b, "s", 3.25), FK_OK);
    uint64_t empty[1] = {0};
    fk_bundle_add(&b, "e", 1, empty);
    double w[3000];
    for (size_t i = 0; i < 3000; i++)
        w[i] = fk_rng_uniform(&r);
    assert_int_equal(fk_bundle_put_vec(&b, "w", 3000, w), FK_OK);
    int dtypes[2] = {FK_DTYPE_F64, FK_DTYPE_F32};
    size_t sizes[3] = {7, 1000, 4096};
    fk_err err;
    for (int d = 0; d < 2; d++) {
        uint8_t *enc;
        size_t len;
        assert_int_equal(fk_codec_bundle_encode_as(&b, dtypes[d], &enc, &len, &err), FK_OK);
        for (int k = 0; k < 3; k++) {
            fk_chunker pc, bc;
            assert_int_equal(fk_chunker_init(&pc, enc, len, sizes[k], &err), FK_OK);
            assert_int_equal(fk_chunker_init_bundle(&bc, &b, dtypes[d], sizes[k], &err), FK_OK);
            assert_int_equal(bc.len, len);
            assert_int_equal(bc.total, pc.total);
            assert_memory_equal(bc.sha256, pc.sha256, 32);
            uint8_t *buf = malloc(sizes[k]);
            /* every chunk for the small size would be slow: sample them */
            for (uint32_t i = 0; i < bc.total; i += sizes[k] < 100 ? 97 : 1) {
                fedkern_v1_Chunk h1, h2;
                const uint8_t *p;
                size_t n1, n2;
                assert_int_equal(fk_chunker_get(&pc, i, &h1, &p, &n1, &err), FK_OK);
                assert_int_equal(fk_chunker_read(&bc, i, &h2, buf, sizes[k], &n2, &err), FK_OK);
                assert_int_equal(n1, n2);
                assert_memory_equal(p, buf, n1);
                assert_memory_equal(&h1, &h2, sizeof h1);
            }
            fedkern_v1_Chunk h;
            const uint8_t *p;
            size_t n;
            assert_int_equal(fk_chunker_get(&bc, 0, &h, &p, &n, &err), FK_ESTATE);
            assert_int_equal(fk_chunker_read(&bc, 0, &h, buf, sizes[k] - 1, &n, &err), FK_EINVAL);
            free(buf);
        }
        free(enc);
    }
    fk_bundle_close(&b);
}

/* The process's address space in bytes (/proc/self/statm, first field in pages). */
static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* Issue 33 row 7: a chunk announcing a large payload costs what arrived, not total_size.
 * Before, the first chunk of any payload allocated its whole total_size: 16 last chunks
 * declaring 1023 MiB each took 16 GiB of address space. */
static void memory_grows_with_the_chunks(void **state)
{
    (void)state;
    enum { N = 16 };
    const uint64_t total_size = (uint64_t)1023 << 20;
    const uint32_t chunk = 1u << 20;
    static uint8_t data[1u << 20];
    memset(data, 7, sizeof data);
    fk_reasm r[N];
    size_t before = vm_size();
    fk_err err;
    for (int i = 0; i < N; i++) {
        fk_reasm_init(&r[i], (size_t)1 << 30);
        fedkern_v1_Chunk h = fedkern_v1_Chunk_init_zero;
        h.total = (uint32_t)(total_size / chunk);
        h.chunk_size = chunk;
        h.total_size = total_size;
        h.index = h.total - 1;
        memset(h.sha256, i + 1, 32);
        int complete = 0;
        assert_int_equal(fk_reasm_add(&r[i], &h, data, chunk, &complete, &err), FK_OK);
        assert_false(complete);
        /* the chunk and an index of a pointer and a bit per chunk */
        assert_true(fk_reasm_held(&r[i]) <= chunk + 1023 * (sizeof(void *) + 1));
        assert_int_equal(fk_reasm_missing(&r[i], NULL, 0), 1022);
    }
    size_t grown = vm_size() - before;
    print_message("16 last chunks of 1023 MiB payloads: address space +%zu MiB\n", grown >> 20);
    assert_true(grown < (size_t)128 << 20);
    for (int i = 0; i < N; i++)
        fk_reasm_close(&r[i]);
    /* an index as large as the limit allows nothing more: 1-byte chunks of a big payload */
    fk_reasm ra;
    fk_reasm_init(&ra, (size_t)64 << 20);
    fedkern_v1_Chunk h = fedkern_v1_Chunk_init_zero;
    h.total = 32u << 20;
    h.chunk_size = 1;
    h.total_size = 32u << 20;
    memset(h.sha256, 1, 32);
    int complete;
    assert_int_equal(fk_reasm_add(&ra, &h, data, 1, &complete, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "memory limit"));
    fk_reasm_close(&ra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(any_order_with_duplicates),
        cmocka_unit_test(resume_from_missing_list),
        cmocka_unit_test(limits_and_corruption),
        cmocka_unit_test(memory_grows_with_the_chunks),
        cmocka_unit_test(bundle_through_messages),
        cmocka_unit_test(bundle_chunker_matches_encoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
