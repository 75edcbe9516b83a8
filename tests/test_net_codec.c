/* Bundle and payload-message codec: round trips, float32, zero-copy chunks,
 * and the strict decoder refusing malformed bytes with a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/codec.h"
#include "common/net/grpc_frame.h"

/* Raw protobuf writer for hand-made (often invalid) inputs. */
typedef struct wbuf {
    uint8_t b[4096];
    size_t n;
} wbuf;

static void w_varint(wbuf *w, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        w->b[w->n++] = c | (v ? 0x80 : 0);
    } while (v);
}

static void w_uint(wbuf *w, int field, uint64_t v)
{
    w_varint(w, (uint64_t)field << 3);
    w_varint(w, v);
}

static void w_bytes(wbuf *w, int field, const void *p, size_t n)
{
    w_varint(w, (uint64_t)field << 3 | 2);
    w_varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

/* Bundle holding one tensor with the given body. */
static void w_bundle1(wbuf *out, const wbuf *tensor)
{
    out->n = 0;
    w_bytes(out, 1, tensor->b, tensor->n);
}

static void make_bundle(fk_bundle *b)
{
    fk_bundle_init(b);
    double m[6] = {1.5, -2.25, 3e300, -0.0, 1e-310, 42};
    uint64_t shape[2] = {2, 3};
    assert_int_equal(fk_bundle_put(b, "mu", 2, shape, m), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(b, "sigma", 0.125), FK_OK);
    uint64_t empty[2] = {0, 5};
    assert_non_null(fk_bundle_add(b, "none", 2, empty));
    double v[3] = {1, 2, 3};
    assert_int_equal(fk_bundle_put_vec(b, "w", 3, v), FK_OK);
}

static void assert_bundles_equal(const fk_bundle *a, const fk_bundle *b)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const fk_tensor *x = &a->items[i], *y = &b->items[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->ndim, y->ndim);
        assert_int_equal(x->len, y->len);
        for (int d = 0; d < x->ndim; d++)
            assert_int_equal(x->shape[d], y->shape[d]);
        assert_memory_equal(x->data, y->data, x->len * sizeof(double));
    }
}

static void bundle_round_trip_f64(void **state)
{
    (void)state;
    fk_bundle b, c;
    make_bundle(&b);
    uint8_t *buf;
    size_t len, size;
    fk_err err;
    assert_int_equal(fk_codec_bundle_encode(&b, &buf, &len, &err), FK_OK);
    assert_int_equal(fk_codec_bundle_size(&b, FK_DTYPE_F64, &size, &err), FK_OK);
    assert_int_equal(size, len);
    fk_bundle_init(&c);
    assert_int_equal(fk_codec_bundle_decode(buf, len, &c, &err), FK_OK);
    assert_bundles_equal(&b, &c);
    /* Decoding into a non-empty bundle is refused. */
    assert_int_equal(fk_codec_bundle_decode(buf, len, &c, &err), FK_EINVAL);
    fk_bundle_close(&c);
    free(buf);
    /* The empty bundle encodes to zero bytes and back. */
    fk_bundle e;
    fk_bundle_init(&e);
    assert_int_equal(fk_codec_bundle_encode(&e, &buf, &len, &err), FK_OK);
    assert_int_equal(len, 0);
    assert_int_equal(fk_codec_bundle_decode(buf, len, &e, &err), FK_OK);
    assert_int_equal(e.count, 0);
    free(buf);
    fk_bundle_close(&b);
}

static void bundle_round_trip_f32(void **state)
{
    (void)state;
    fk_bundle b, c;
    fk_bundle_init(&b);
    size_t n = 5000; /* spans several conversion blocks */
    uint64_t shape[1] = {n};
    double *v = fk_bundle_add(&b, "x", 1, shape);
    for (size_t i = 0; i < n; i++)
        v[i] = (double)i * 0.1 - 7;
    uint8_t *b32, *b64;
    size_t l32, l64;
    fk_err err;
    assert_int_equal(fk_codec_bundle_encode_as(&b, FK_DTYPE_F32, &b32, &l32, &err), FK_OK);
    assert_int_equal(fk_codec_bundle_encode(&b, &b64, &l64, &err), FK_OK);
    assert_true(l32 < l64 / 2 + 64);
    fk_bundle_init(&c);
    assert_int_equal(fk_codec_bundle_decode(b32, l32, &c, &err), FK_OK);
    const fk_tensor *t = fk_bundle_get(&c, "x");
    assert_non_null(t);
    assert_int_equal(t->len, n);
    for (size_t i = 0; i < n; i++)
        assert_true(t->data[i] == (double)(float)v[i]);
    free(b32);
    free(b64);
    fk_bundle_close(&b);
    fk_bundle_close(&c);
}

static void encoder_refuses_unreadable_bundles(void **state)
{
    (void)state;
    fk_bundle b;
    fk_bundle_init(&b);
    assert_int_equal(fk_bundle_put_scalar(&b, "bad\tname", 1), FK_OK);
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_bundle_encode(&b, &buf, &len, &err), FK_EINVAL);
    assert_null(buf);
    fk_bundle_close(&b);
    fk_bundle_init(&b);
    assert_int_equal(fk_bundle_put_scalar(&b, "a", 1), FK_OK);
    assert_int_equal(fk_codec_bundle_encode_as(&b, 7, &buf, &len, &err), FK_EINVAL);
    fk_bundle_close(&b);
}

/* Decode raw bytes and expect failure with msg containing `want`. */
static void expect_bad(const wbuf *w, int code, const char *want)
{
    fk_bundle out;
    fk_bundle_init(&out);
    fk_err err;
    int rc = fk_codec_bundle_decode(w->b, w->n, &out, &err);
    if (rc != code || !strstr(err.msg, want))
        fail_msg("want %d '%s', got %d '%s'", code, want, rc, err.msg);
    assert_int_equal(out.count, 0);
    fk_bundle_close(&out);
}

static void strict_decoder(void **state)
{
    (void)state;
    wbuf t = {0}, w = {0};
    double two[2] = {1, 2};
    /* valid: name, shape [2], dtype f64, 16 bytes */
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 2, 2);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 16);
    w_bundle1(&w, &t);
    fk_bundle ok;
    fk_bundle_init(&ok);
    fk_err err;
    assert_int_equal(fk_codec_bundle_decode(w.b, w.n, &ok, &err), FK_OK);
    assert_true(fk_bundle_get(&ok, "v")->data[1] == 2);
    fk_bundle_close(&ok);

    /* length mismatch */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 2, 3);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 16);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "shape x dtype");

    /* missing dtype */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 2, 2);
    w_bytes(&t, 4, two, 16);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "dtype");

    /* unknown dtype */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, 9);
    w_bytes(&t, 4, two, 8);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "dtype 9");

    /* dtype changed after data */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_uint(&t, 3, FK_DTYPE_F32);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "after the data");

    /* data repeated */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_bytes(&t, 4, two, 8);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "repeated");

    /* empty name */
    t.n = 0;
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "name");

    /* name too long for the 48-byte field */
    char longname[60];
    memset(longname, 'n', sizeof longname);
    t.n = 0;
    w_bytes(&t, 1, longname, sizeof longname);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "malformed");

    /* five dims */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    for (int i = 0; i < 5; i++)
        w_uint(&t, 2, 1);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "malformed");

    /* non-empty tensor without data */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F32);
    w_bundle1(&w, &t);
    expect_bad(&w, FK_EFORMAT, "no data");

    /* duplicate names */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_bundle1(&w, &t);
    w_bytes(&w, 1, t.b, t.n);
    expect_bad(&w, FK_EFORMAT, "twice");

    /* trailing garbage / truncation inside a tensor */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_bundle1(&w, &t);
    w.n -= 3;
    expect_bad(&w, FK_EFORMAT, "malformed");
    w_bundle1(&w, &t);
    w.b[w.n++] = 0xff;
    expect_bad(&w, FK_EFORMAT, "malformed");

    /* unknown fields are skipped (forward compatibility within v1) */
    t.n = 0;
    w_bytes(&t, 1, "v", 1);
    w_uint(&t, 3, FK_DTYPE_F64);
    w_bytes(&t, 4, two, 8);
    w_uint(&t, 15, 77);
    w_bundle1(&w, &t);
    w_bytes(&w, 9, "future", 6);
    fk_bundle_init(&ok);
    assert_int_equal(fk_codec_bundle_decode(w.b, w.n, &ok, &err), FK_OK);
    assert_int_equal(ok.count, 1);
    fk_bundle_close(&ok);
}

/* Every truncation of a valid encoding either decodes or fails cleanly. */
static void truncations_never_crash(void **state)
{
    (void)state;
    fk_bundle b;
    make_bundle(&b);
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_bundle_encode(&b, &buf, &len, &err), FK_OK);
    int failed = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        fk_bundle c;
        fk_bundle_init(&c);
        if (fk_codec_bundle_decode(copy, cut, &c, &err) != FK_OK) {
            failed++;
            assert_int_equal(c.count, 0);
        } else {
            assert_true(c.count < b.count);
        }
        fk_bundle_close(&c);
        free(copy);
    }
    assert_true(failed > (int)len / 2);
    free(buf);
    fk_bundle_close(&b);
}

static void push_update_inline_bundle(void **state)
{
    (void)state;
    fk_bundle b;
    make_bundle(&b);
    fedkern_v1_PushUpdateRequest m = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(m.session_id, sizeof m.session_id, "s-1");
    snprintf(m.job_id, sizeof m.job_id, "job-7");
    m.round = 3;
    m.phase = 1;
    snprintf(m.update_id, sizeof m.update_id, "00112233445566778899aabbccddeeff");
    m.has_report = true;
    m.report.n_samples = 1234;
    m.report.loss = 0.5;
    fk_codec_tx tx = {.bundle = &b};
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_encode_push_update_request(&m, &tx, 1, &buf, &len, &err), FK_OK);
    /* framed: the prefix announces the rest */
    assert_int_equal(buf[0], 0);
    size_t body = (size_t)buf[1] << 24 | (size_t)buf[2] << 16 | (size_t)buf[3] << 8 | buf[4];
    assert_int_equal(body + 5, len);

    fedkern_v1_PushUpdateRequest d;
    fk_bundle got;
    fk_bundle_init(&got);
    fk_codec_rx rx = {.bundle = &got};
    assert_int_equal(fk_codec_decode_push_update_request(buf + 5, len - 5, &d, &rx, &err), FK_OK);
    assert_true(rx.has_bundle);
    assert_false(rx.has_chunk);
    assert_string_equal(d.job_id, "job-7");
    assert_int_equal(d.round, 3);
    assert_int_equal(d.report.n_samples, 1234);
    assert_string_equal(d.update_id, m.update_id);
    assert_bundles_equal(&b, &got);
    fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &d);
    fk_bundle_close(&got);
    free(buf);
    fk_bundle_close(&b);
}

static void push_update_chunk_zero_copy(void **state)
{
    (void)state;
    uint8_t payload[300];
    for (int i = 0; i < 300; i++)
        payload[i] = (uint8_t)i;
    fedkern_v1_PushUpdateRequest m = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(m.update_id, sizeof m.update_id, "u1");
    m.chunk.index = 2;
    m.chunk.total = 3;
    m.chunk.chunk_size = 128;
    m.chunk.total_size = 300;
    memset(m.chunk.sha256, 0xab, 32);
    fk_codec_tx tx = {.chunk_data = payload + 256, .chunk_len = 44};
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_encode_push_update_request(&m, &tx, 0, &buf, &len, &err), FK_OK);
    fedkern_v1_PushUpdateRequest d;
    fk_bundle got;
    fk_bundle_init(&got);
    fk_codec_rx rx = {.bundle = &got};
    assert_int_equal(fk_codec_decode_push_update_request(buf, len, &d, &rx, &err), FK_OK);
    assert_true(rx.has_chunk);
    assert_false(rx.has_bundle);
    assert_int_equal(rx.chunk_len, 44);
    assert_true(rx.chunk_data > buf && rx.chunk_data + 44 <= buf + len); /* a view, not a copy */
    assert_memory_equal(rx.chunk_data, payload + 256, 44);
    fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &d);
    free(buf);

    /* a short middle chunk is refused */
    m.chunk.index = 1;
    assert_int_equal(fk_codec_encode_push_update_request(&m, &tx, 0, &buf, &len, &err), FK_OK);
    assert_int_equal(fk_codec_decode_push_update_request(buf, len, &d, &rx, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "expected 128"));
    free(buf);
    /* index beyond total */
    m.chunk.index = 3;
    assert_int_equal(fk_codec_encode_push_update_request(&m, &tx, 0, &buf, &len, &err), FK_OK);
    assert_int_equal(fk_codec_decode_push_update_request(buf, len, &d, &rx, &err), FK_EFORMAT);
    free(buf);
    /* both a bundle and a chunk: refused when encoding */
    fk_bundle b;
    make_bundle(&b);
    fk_codec_tx both = {.bundle = &b, .chunk_data = payload, .chunk_len = 1};
    assert_int_equal(fk_codec_encode_push_update_request(&m, &both, 0, &buf, &len, &err),
                     FK_EINVAL);
    fk_bundle_close(&b);
    fk_bundle_close(&got);
}

static void both_payloads_refused_on_decode(void **state)
{
    (void)state;
    /* PushUpdateRequest{bundle: {}, chunk: {...}} built by hand */
    wbuf w = {0}, c = {0};
    uint8_t sha[32];
    memset(sha, 1, 32);
    w_uint(&c, 1, 0);
    w_uint(&c, 2, 1);
    w_uint(&c, 3, 4);
    w_uint(&c, 4, 4);
    w_bytes(&c, 5, sha, 32);
    w_bytes(&c, 6, "abcd", 4);
    w_bytes(&w, 7, "", 0);
    w_bytes(&w, 8, c.b, c.n);
    fedkern_v1_PushUpdateRequest d;
    fk_bundle got;
    fk_bundle_init(&got);
    fk_codec_rx rx = {.bundle = &got};
    fk_err err;
    assert_int_equal(fk_codec_decode_push_update_request(w.b, w.n, &d, &rx, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "both"));
    /* without the bundle it is a valid single-chunk payload */
    w.n = 0;
    w_bytes(&w, 8, c.b, c.n);
    assert_int_equal(fk_codec_decode_push_update_request(w.b, w.n, &d, &rx, &err), FK_OK);
    assert_int_equal(rx.chunk_len, 4);
    fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &d);
    fk_bundle_close(&got);
}

static void pull_task_and_job_result(void **state)
{
    (void)state;
    fk_bundle b;
    make_bundle(&b);
    fedkern_v1_PullTaskResponse m = fedkern_v1_PullTaskResponse_init_zero;
    m.kind = fedkern_v1_TaskKind_TASK_RUN;
    snprintf(m.job_id, sizeof m.job_id, "j");
    snprintf(m.method, sizeof m.method, "rftca");
    char params[] = "rounds = 5\nsigma = 2\n";
    m.params = params;
    fk_codec_tx tx = {.bundle = &b, .dtype = FK_DTYPE_F32};
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_encode_pull_task_response(&m, &tx, 0, &buf, &len, &err), FK_OK);
    fedkern_v1_PullTaskResponse d;
    fk_bundle got;
    fk_bundle_init(&got);
    fk_codec_rx rx = {.bundle = &got};
    assert_int_equal(fk_codec_decode_pull_task_response(buf, len, &d, &rx, &err), FK_OK);
    assert_string_equal(d.params, params);
    assert_string_equal(d.method, "rftca");
    assert_int_equal(got.count, b.count);
    assert_true(fk_bundle_get(&got, "sigma")->data[0] == 0.125);
    fk_codec_release(fedkern_v1_PullTaskResponse_fields, &d);
    assert_null(d.params);
    fk_bundle_close(&got);
    free(buf);

    /* An empty bundle still arrives as "has a bundle". */
    fk_bundle empty;
    fk_bundle_init(&empty);
    fk_codec_tx etx = {.bundle = &empty};
    m.params = NULL;
    assert_int_equal(fk_codec_encode_pull_task_response(&m, &etx, 0, &buf, &len, &err), FK_OK);
    fk_bundle_init(&got);
    assert_int_equal(fk_codec_decode_pull_task_response(buf, len, &d, &rx, &err), FK_OK);
    assert_true(rx.has_bundle);
    assert_int_equal(got.count, 0);
    fk_codec_release(fedkern_v1_PullTaskResponse_fields, &d);
    free(buf);

    fedkern_v1_JobResultResponse r = fedkern_v1_JobResultResponse_init_zero;
    snprintf(r.job_id, sizeof r.job_id, "j");
    r.state = fedkern_v1_JobState_JOB_DONE;
    r.metrics_count = 2;
    snprintf(r.metrics[0].name, sizeof r.metrics[0].name, "nmi");
    r.metrics[0].value = 0.75;
    snprintf(r.metrics[1].name, sizeof r.metrics[1].name, "rounds");
    r.metrics[1].value = 5;
    fk_codec_tx rtx = {.bundle = &b};
    assert_int_equal(fk_codec_encode_job_result_response(&r, &rtx, 0, &buf, &len, &err), FK_OK);
    fedkern_v1_JobResultResponse rd;
    assert_int_equal(fk_codec_decode_job_result_response(buf, len, &rd, &rx, &err), FK_OK);
    assert_true(rx.has_bundle);
    assert_int_equal(rd.metrics_count, 2);
    assert_true(rd.metrics[0].value == 0.75);
    assert_bundles_equal(&b, &got);
    fk_codec_release(fedkern_v1_JobResultResponse_fields, &rd);
    free(buf);
    fk_bundle_close(&got);
    fk_bundle_close(&b);
}

static void plain_messages(void **state)
{
    (void)state;
    fedkern_v1_JoinRequest j = fedkern_v1_JoinRequest_init_zero;
    snprintf(j.name, sizeof j.name, "hospital-a");
    j.protocol_version = 1;
    j.methods_count = 2;
    snprintf(j.methods[0], sizeof j.methods[0], "rftca");
    snprintf(j.methods[1], sizeof j.methods[1], "fedgmm");
    uint8_t *buf;
    size_t len;
    fk_err err;
    assert_int_equal(fk_codec_encode(fedkern_v1_JoinRequest_fields, &j, 0, &buf, &len, &err), FK_OK);
    fedkern_v1_JoinRequest d = fedkern_v1_JoinRequest_init_zero;
    assert_int_equal(fk_codec_decode(fedkern_v1_JoinRequest_fields, &d, buf, len, &err), FK_OK);
    assert_string_equal(d.methods[1], "fedgmm");
    assert_int_equal(d.protocol_version, 1);
    /* the same bytes are no valid message when cut short */
    assert_int_equal(fk_codec_decode(fedkern_v1_JoinRequest_fields, &d, buf, len - 1, &err),
                     FK_EFORMAT);
    free(buf);

    fedkern_v1_SubmitJobRequest s = fedkern_v1_SubmitJobRequest_init_zero;
    char cfg[] = "method = fedgmm\nrounds = 3\n";
    s.config = cfg;
    assert_int_equal(fk_codec_encode(fedkern_v1_SubmitJobRequest_fields, &s, 0, &buf, &len, &err),
                     FK_OK);
    fedkern_v1_SubmitJobRequest sd = fedkern_v1_SubmitJobRequest_init_zero;
    assert_int_equal(fk_codec_decode(fedkern_v1_SubmitJobRequest_fields, &sd, buf, len, &err),
                     FK_OK);
    assert_string_equal(sd.config, cfg);
    fk_codec_release(fedkern_v1_SubmitJobRequest_fields, &sd);
    free(buf);

    /* an empty message framed is just the 5-byte prefix */
    fedkern_v1_LeaveResponse lr = fedkern_v1_LeaveResponse_init_zero;
    assert_int_equal(fk_codec_encode(fedkern_v1_LeaveResponse_fields, &lr, 1, &buf, &len, &err),
                     FK_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "\0\0\0\0\0", 5);
    free(buf);

    fedkern_v1_PushUpdateResponse p = fedkern_v1_PushUpdateResponse_init_zero;
    uint32_t missing[3] = {1, 4, 9};
    p.state = fedkern_v1_UpdateState_UPDATE_PARTIAL;
    p.missing = missing;
    p.missing_count = 3;
    assert_int_equal(fk_codec_encode(fedkern_v1_PushUpdateResponse_fields, &p, 0, &buf, &len, &err),
                     FK_OK);
    fedkern_v1_PushUpdateResponse pd = fedkern_v1_PushUpdateResponse_init_zero;
    assert_int_equal(fk_codec_decode(fedkern_v1_PushUpdateResponse_fields, &pd, buf, len, &err),
                     FK_OK);
    assert_int_equal(pd.missing_count, 3);
    assert_int_equal(pd.missing[2], 9);
    fk_codec_release(fedkern_v1_PushUpdateResponse_fields, &pd);
    free(buf);
}

/* A NUL inside a SubmitJob config (nanopb would end the C string there): found, with its
 * line; none in a clean one; an unparsable buffer is left to the decoder. */
static void string_nul_is_found(void **state)
{
    (void)state;
    const char text[] = "method = fedgrem\ndataset = gmm\nclients = a\0, b\n";
    uint8_t buf[128];
    size_t n = sizeof text - 1;
    buf[0] = 0x0a; /* field 1, length-delimited */
    buf[1] = (uint8_t)n;
    memcpy(buf + 2, text, n);
    int line = 0;
    size_t at = 0;
    assert_int_equal(fk_codec_string_nul(buf, n + 2, fedkern_v1_SubmitJobRequest_config_tag,
                                         &line, &at),
                     1);
    assert_int_equal(line, 3);
    assert_int_equal(at, 42);
    buf[2 + 42] = 'x';
    assert_int_equal(fk_codec_string_nul(buf, n + 2, 1, &line, &at), 0);
    buf[1] = 0x7f; /* longer than the buffer */
    assert_int_equal(fk_codec_string_nul(buf, n + 2, 1, &line, &at), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bundle_round_trip_f64),
        cmocka_unit_test(bundle_round_trip_f32),
        cmocka_unit_test(encoder_refuses_unreadable_bundles),
        cmocka_unit_test(strict_decoder),
        cmocka_unit_test(truncations_never_crash),
        cmocka_unit_test(push_update_inline_bundle),
        cmocka_unit_test(push_update_chunk_zero_copy),
        cmocka_unit_test(both_payloads_refused_on_decode),
        cmocka_unit_test(pull_task_and_job_result),
        cmocka_unit_test(plain_messages),
        cmocka_unit_test(string_nul_is_found),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
