#include "common/net/codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "common/net/grpc_frame.h"

/* Values converted per block when the wire format differs from memory. */
#define CONV_BLOCK 1024
#define MAX_DIM ((uint64_t)UINT32_MAX)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

typedef struct tx_ctx {
    const fk_bundle *b;
    int dtype;
    const uint8_t *chunk_data;
    size_t chunk_len;
} tx_ctx;

typedef struct tensor_tx {
    const fk_tensor *t;
    int dtype;
} tensor_tx;

typedef struct rx_ctx {
    fk_bundle *b;
    fk_err err;          /* detailed error set by a callback */
    const uint8_t *base; /* the buffer being decoded: chunk data is viewed in place */
    size_t base_len;
    size_t tensors;
    const uint8_t *chunk_data;
    size_t chunk_len;
    int chunk_seen;
} rx_ctx;

typedef struct tensor_rx {
    rx_ctx *rx;
    const fedkern_v1_Tensor *pt;
    int done;
    pb_size_t ndim_at_data;
    int dtype_at_data;
} tensor_rx;

static size_t dtype_size(int dtype)
{
    return dtype == FK_DTYPE_F64 ? 8 : dtype == FK_DTYPE_F32 ? 4 : 0;
}

/* Record a callback's error and fail the nanopb call. */
static bool rx_fail(rx_ctx *rx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool rx_fail(rx_ctx *rx, int code, const char *fmt, ...)
{
    if (rx->err.code != FK_OK)
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rx->err.msg, sizeof rx->err.msg, fmt, ap);
    va_end(ap);
    rx->err.code = code;
    return false;
}

static int name_ok(const char *name)
{
    if (!name[0])
        return 0;
    for (const char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            return 0;
    return 1;
}

/* Values a shape holds, with the same overflow rule as fk_bundle_add. */
static int shape_values(const uint64_t *shape, size_t ndim, size_t *count)
{
    size_t n = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (shape[i] > MAX_DIM || (shape[i] && n > SIZE_MAX / sizeof(double) / shape[i]))
            return 0;
        n *= (size_t)shape[i];
    }
    *count = n;
    return 1;
}

/* The encoder refuses what the decoder would refuse, so we never write a
 * bundle (or checkpoint) we cannot read back. */
FK_CHECKRETURN static int bundle_check(const fk_bundle *b, int dtype, fk_err *err)
{
    if (!dtype_size(dtype))
        return fk_err_set(err, FK_EINVAL, "bundle encode: unknown wire dtype %d", dtype);
    if (b->count > FK_CODEC_MAX_TENSORS)
        return fk_err_set(err, FK_ELIMIT, "bundle encode: %zu tensors exceed the limit of %d",
                          b->count, FK_CODEC_MAX_TENSORS);
    for (size_t i = 0; i < b->count; i++) {
        const fk_tensor *t = &b->items[i];
        if (!name_ok(t->name))
            return fk_err_set(err, FK_EINVAL,
                              "bundle encode: tensor %zu has an empty or non-printable name", i);
        if (t->ndim < 0 || t->ndim > FK_TENSOR_MAX_DIMS)
            return fk_err_set(err, FK_EINVAL, "bundle encode: tensor '%s' has %d dims", t->name,
                              t->ndim);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] > MAX_DIM)
                return fk_err_set(err, FK_EINVAL, "bundle encode: tensor '%s' dim %d too large",
                                  t->name, d);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(b->items[j].name, t->name))
                return fk_err_set(err, FK_EINVAL, "bundle encode: tensor name '%s' repeated",
                                  t->name);
    }
    return FK_OK;
}

/* ---------------------------------------------------------------- encode */

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* State of a stream feeding an fk_codec_sink. */
typedef struct sink_state {
    fk_codec_sink fn;
    void *ctx;
    uint64_t pos; /* bytes produced so far */
    uint64_t keep_off, keep_end;
    int rc;
} sink_state;

static bool sink_write(pb_ostream_t *s, const pb_byte_t *buf, size_t count)
{
    sink_state *st = s->state;
    st->rc = st->fn(st->ctx, buf, count);
    st->pos += count;
    return st->rc == FK_OK;
}

/* The next n bytes of s fall outside the kept window: skip computing them. */
static int skippable(const pb_ostream_t *s, size_t n)
{
    if (s->callback != sink_write)
        return 0;
    const sink_state *st = s->state;
    return st->pos + n <= st->keep_off || st->pos >= st->keep_end;
}

/* Write the tensor's values in the wire dtype, one block at a time. */
static bool write_values(pb_ostream_t *s, const fk_tensor *t, int dtype)
{
    if (skippable(s, t->len * dtype_size(dtype)))
        return pb_write(s, NULL, t->len * dtype_size(dtype));
    if (dtype == FK_DTYPE_F64 && HOST_LE)
        return pb_write(s, (const pb_byte_t *)t->data, t->len * 8);
    uint8_t block[CONV_BLOCK * 8];
    for (size_t i = 0; i < t->len; i += CONV_BLOCK) {
        size_t n = t->len - i < CONV_BLOCK ? t->len - i : CONV_BLOCK;
        if (skippable(s, n * dtype_size(dtype))) {
            if (!pb_write(s, NULL, n * dtype_size(dtype)))
                return false;
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            if (dtype == FK_DTYPE_F32) {
                float f = (float)t->data[i + k];
                uint32_t u;
                memcpy(&u, &f, 4);
                put_le32(block + 4 * k, u);
            } else {
                uint64_t u;
                memcpy(&u, &t->data[i + k], 8);
                put_le64(block + 8 * k, u);
            }
        }
        if (!pb_write(s, block, n * dtype_size(dtype)))
            return false;
    }
    return true;
}

static bool enc_tensor_data(pb_ostream_t *s, const pb_field_t *f, void *const *arg)
{
    const tensor_tx *tt = *arg;
    size_t n = tt->t->len * dtype_size(tt->dtype);
    if (n == 0)
        return true; /* proto3: empty bytes are not written */
    if (!pb_encode_tag_for_field(s, f) || !pb_encode_varint(s, n))
        return false;
    if (!s->callback)
        return pb_write(s, NULL, n); /* sizing pass: count only */
    return write_values(s, tt->t, tt->dtype);
}

static bool enc_tensors(pb_ostream_t *s, const pb_field_t *f, void *const *arg)
{
    const tx_ctx *tx = *arg;
    for (size_t i = 0; i < tx->b->count; i++) {
        const fk_tensor *t = &tx->b->items[i];
        fedkern_v1_Tensor pt = fedkern_v1_Tensor_init_zero;
        snprintf(pt.name, sizeof pt.name, "%s", t->name);
        pt.shape_count = (pb_size_t)t->ndim;
        for (int d = 0; d < t->ndim; d++)
            pt.shape[d] = t->shape[d];
        pt.dtype = (fedkern_v1_DType)tx->dtype;
        tensor_tx tt = {t, tx->dtype};
        pt.data.funcs.encode = enc_tensor_data;
        pt.data.arg = &tt;
        if (!pb_encode_tag_for_field(s, f) ||
            !pb_encode_submessage(s, fedkern_v1_Tensor_fields, &pt))
            return false;
    }
    return true;
}

static bool enc_chunk_data(pb_ostream_t *s, const pb_field_t *f, void *const *arg)
{
    const tx_ctx *tx = *arg;
    if (tx->chunk_len == 0)
        return true;
    return pb_encode_tag_for_field(s, f) && pb_encode_string(s, tx->chunk_data, tx->chunk_len);
}

int fk_codec_encode(const pb_msgdesc_t *fields, const void *msg, int framed, uint8_t **buf,
                    size_t *len, fk_err *err)
{
    *buf = NULL;
    *len = 0;
    size_t size;
    if (!pb_get_encoded_size(&size, fields, msg))
        return fk_err_set(err, FK_EINVAL, "protobuf encode: cannot size the message");
    size_t head = framed ? FK_GRPC_PREFIX_LEN : 0;
    if (framed) {
        uint8_t prefix[FK_GRPC_PREFIX_LEN];
        if (fk_grpc_frame_prefix(prefix, size, err) != FK_OK)
            return FK_ELIMIT;
    }
    uint8_t *b = malloc(head + size + 1);
    if (!b)
        return fk_err_set(err, FK_ENOMEM, "protobuf encode: out of memory for %zu bytes", size);
    pb_ostream_t os = pb_ostream_from_buffer(b + head, size);
    if (!pb_encode(&os, fields, msg)) {
        free(b);
        return fk_err_set(err, FK_EINVAL, "protobuf encode failed: %s", PB_GET_ERROR(&os));
    }
    if (framed && fk_grpc_frame_prefix(b, size, err) != FK_OK) { /* size was checked above */
        free(b);
        return FK_ELIMIT;
    }
    *buf = b;
    *len = head + size;
    return FK_OK;
}

static void bind_tx(fedkern_v1_Bundle *pb, bool *has_bundle, fedkern_v1_Chunk *pc,
                    bool *has_chunk, tx_ctx *ctx)
{
    *has_bundle = ctx->b != NULL;
    pb->tensors.funcs.encode = enc_tensors;
    pb->tensors.arg = ctx;
    *has_chunk = ctx->chunk_data != NULL;
    pc->data.funcs.encode = enc_chunk_data;
    pc->data.arg = ctx;
}

FK_CHECKRETURN static int tx_prepare(const fk_codec_tx *tx, tx_ctx *ctx, fk_err *err)
{
    *ctx = (tx_ctx){tx->bundle, tx->dtype ? tx->dtype : FK_DTYPE_F64, tx->chunk_data,
                    tx->chunk_len};
    if (ctx->b && ctx->chunk_data)
        return fk_err_set(err, FK_EINVAL, "message encode: both a bundle and a chunk given");
    return ctx->b ? bundle_check(ctx->b, ctx->dtype, err) : FK_OK;
}

/* Encode a message whose payload is a bundle or a chunk (the one tx gives). */
FK_CHECKRETURN static int encode_payload(const pb_msgdesc_t *fields, const void *msg, fedkern_v1_Bundle *pb,
                          bool *has_bundle, fedkern_v1_Chunk *pc, bool *has_chunk,
                          const fk_codec_tx *tx, int framed, uint8_t **buf, size_t *len,
                          fk_err *err)
{
    tx_ctx ctx;
    int rc = tx_prepare(tx, &ctx, err);
    if (rc != FK_OK)
        return rc;
    bind_tx(pb, has_bundle, pc, has_chunk, &ctx);
    return fk_codec_encode(fields, msg, framed, buf, len, err);
}

/* Check b and bind it (as dtype, through ctx) to a fresh Bundle message. */
FK_CHECKRETURN static int bundle_bind(const fk_bundle *b, int dtype, tx_ctx *ctx, fedkern_v1_Bundle *pb,
                       fk_err *err)
{
    *ctx = (tx_ctx){b, dtype, NULL, 0};
    *pb = (fedkern_v1_Bundle)fedkern_v1_Bundle_init_zero;
    pb->tensors.funcs.encode = enc_tensors;
    pb->tensors.arg = ctx;
    return bundle_check(b, dtype, err);
}

int fk_codec_bundle_size(const fk_bundle *b, int dtype, size_t *len, fk_err *err)
{
    tx_ctx ctx;
    fedkern_v1_Bundle pb;
    int rc = bundle_bind(b, dtype, &ctx, &pb, err);
    if (rc != FK_OK)
        return rc;
    if (!pb_get_encoded_size(len, fedkern_v1_Bundle_fields, &pb))
        return fk_err_set(err, FK_EINVAL, "bundle encode: cannot size the bundle");
    return FK_OK;
}

int fk_codec_bundle_encode_as(const fk_bundle *b, int dtype, uint8_t **buf, size_t *len,
                              fk_err *err)
{
    *buf = NULL;
    *len = 0;
    tx_ctx ctx;
    fedkern_v1_Bundle pb;
    int rc = bundle_bind(b, dtype, &ctx, &pb, err);
    if (rc != FK_OK)
        return rc;
    return fk_codec_encode(fedkern_v1_Bundle_fields, &pb, 0, buf, len, err);
}

int fk_codec_bundle_stream(const fk_bundle *b, int dtype, uint64_t keep_off, uint64_t keep_len,
                           fk_codec_sink sink, void *ctx, fk_err *err)
{
    tx_ctx tx;
    fedkern_v1_Bundle pb;
    int rc = bundle_bind(b, dtype, &tx, &pb, err);
    if (rc != FK_OK)
        return rc;
    sink_state st = {sink, ctx, 0, keep_off,
                     keep_len > UINT64_MAX - keep_off ? UINT64_MAX : keep_off + keep_len, FK_OK};
    pb_ostream_t os = {sink_write, &st, SIZE_MAX, 0, NULL};
    if (!pb_encode(&os, fedkern_v1_Bundle_fields, &pb)) {
        if (st.rc != FK_OK)
            return fk_err_set(err, st.rc, "bundle encode: the output sink failed (%s)",
                              fk_status_name(st.rc));
        return fk_err_set(err, FK_EINVAL, "bundle encode failed: %s", PB_GET_ERROR(&os));
    }
    return FK_OK;
}

int fk_codec_bundle_encode(const fk_bundle *b, uint8_t **buf, size_t *len, fk_err *err)
{
    return fk_codec_bundle_encode_as(b, FK_DTYPE_F64, buf, len, err);
}

/* ---------------------------------------------------------------- decode */

static void get_values(double *dst, const uint8_t *src, size_t n, int dtype)
{
    for (size_t k = 0; k < n; k++) {
        if (dtype == FK_DTYPE_F32) {
            uint32_t u = 0;
            for (int i = 0; i < 4; i++)
                u |= (uint32_t)src[4 * k + i] << (8 * i);
            float f;
            memcpy(&f, &u, 4);
            dst[k] = f;
        } else {
            uint64_t u = 0;
            for (int i = 0; i < 8; i++)
                u |= (uint64_t)src[8 * k + i] << (8 * i);
            memcpy(&dst[k], &u, 8);
        }
    }
}

/* Read count values of dtype from the stream into dst. */
static bool read_values(pb_istream_t *s, double *dst, size_t count, int dtype)
{
    if (dtype == FK_DTYPE_F64 && HOST_LE)
        return pb_read(s, (pb_byte_t *)dst, count * 8);
    uint8_t block[CONV_BLOCK * 8];
    size_t es = dtype_size(dtype);
    for (size_t i = 0; i < count; i += CONV_BLOCK) {
        size_t n = count - i < CONV_BLOCK ? count - i : CONV_BLOCK;
        if (!pb_read(s, block, n * es))
            return false;
        get_values(dst + i, block, n, dtype);
    }
    return true;
}

/* Add pt's tensor (name and shape) to rx's bundle; NULL when out of memory. */
static double *add_tensor(rx_ctx *rx, const fedkern_v1_Tensor *pt)
{
    uint64_t shape[FK_TENSOR_MAX_DIMS];
    for (pb_size_t d = 0; d < pt->shape_count; d++)
        shape[d] = pt->shape[d];
    return fk_bundle_add(rx->b, pt->name, pt->shape_count, shape);
}

/* Checks common to tensors with and without data; returns the value count. */
static bool tensor_header_ok(rx_ctx *rx, const fedkern_v1_Tensor *pt, size_t *count)
{
    if (!name_ok(pt->name))
        return rx_fail(rx, FK_EFORMAT, "bundle tensor %zu: empty or non-printable name",
                       rx->tensors);
    if (!dtype_size(pt->dtype))
        return rx_fail(rx, FK_EFORMAT,
                       "tensor '%s': dtype %d unknown or sent after the data (writers must emit "
                       "fields in field-number order)",
                       pt->name, (int)pt->dtype);
    if (fk_bundle_get(rx->b, pt->name))
        return rx_fail(rx, FK_EFORMAT, "tensor name '%s' appears twice in one bundle", pt->name);
    if (!shape_values(pt->shape, pt->shape_count, count))
        return rx_fail(rx, FK_EFORMAT, "tensor '%s': shape too large", pt->name);
    return true;
}

static bool dec_tensor_data(pb_istream_t *s, const pb_field_t *f, void **arg)
{
    (void)f;
    tensor_rx *tr = *arg;
    rx_ctx *rx = tr->rx;
    const fedkern_v1_Tensor *pt = tr->pt;
    if (tr->done)
        return rx_fail(rx, FK_EFORMAT, "tensor '%s': data field repeated", pt->name);
    size_t count;
    if (!tensor_header_ok(rx, pt, &count))
        return false;
    size_t es = dtype_size(pt->dtype);
    if (count > SIZE_MAX / es || count * es != s->bytes_left)
        return rx_fail(rx, FK_EFORMAT,
                       "tensor '%s': %zu data bytes but shape x dtype needs %zu values of %zu bytes",
                       pt->name, s->bytes_left, count, es);
    double *dst = add_tensor(rx, pt);
    if (!dst)
        return rx_fail(rx, FK_ENOMEM, "tensor '%s': out of memory for %zu values", pt->name,
                       count);
    if (!read_values(s, dst, count, pt->dtype))
        return false;
    tr->done = 1;
    tr->ndim_at_data = pt->shape_count;
    tr->dtype_at_data = pt->dtype;
    return true;
}

static bool dec_tensors(pb_istream_t *s, const pb_field_t *f, void **arg)
{
    (void)f;
    rx_ctx *rx = *arg;
    if (!rx->b)
        return rx_fail(rx, FK_EFORMAT, "message carries a bundle where none is expected");
    if (rx->tensors >= FK_CODEC_MAX_TENSORS)
        return rx_fail(rx, FK_ELIMIT, "bundle holds more than %d tensors", FK_CODEC_MAX_TENSORS);
    fedkern_v1_Tensor pt = fedkern_v1_Tensor_init_zero;
    tensor_rx tr = {rx, &pt, 0, 0, 0};
    pt.data.funcs.decode = dec_tensor_data;
    pt.data.arg = &tr;
    if (!pb_decode(s, fedkern_v1_Tensor_fields, &pt))
        return rx_fail(rx, FK_EFORMAT, "bundle tensor %zu: malformed protobuf (%s)", rx->tensors,
                       PB_GET_ERROR(s));
    if (tr.done && (pt.shape_count != tr.ndim_at_data || (int)pt.dtype != tr.dtype_at_data))
        return rx_fail(rx, FK_EFORMAT,
                       "tensor '%s': shape or dtype sent after the data (writers must emit "
                       "fields in field-number order)",
                       pt.name);
    if (!tr.done) {
        size_t count;
        if (!tensor_header_ok(rx, &pt, &count))
            return false;
        if (count != 0)
            return rx_fail(rx, FK_EFORMAT, "tensor '%s': %zu values expected but no data",
                           pt.name, count);
        if (!add_tensor(rx, &pt))
            return rx_fail(rx, FK_ENOMEM, "tensor '%s': out of memory", pt.name);
    }
    rx->tensors++;
    return true;
}

/* Chunk data is not copied: we note where it sits in the input buffer. */
static bool dec_chunk_data(pb_istream_t *s, const pb_field_t *f, void **arg)
{
    (void)f;
    rx_ctx *rx = *arg;
    if (rx->chunk_seen)
        return rx_fail(rx, FK_EFORMAT, "chunk data field repeated");
    uintptr_t p = (uintptr_t)s->state, lo = (uintptr_t)rx->base, hi = lo + rx->base_len;
    if (!rx->base || p < lo || p > hi || s->bytes_left > hi - p)
        return rx_fail(rx, FK_ESTATE, "chunk data: decoder not reading from the message buffer");
    const uint8_t *data = (const uint8_t *)s->state;
    size_t n = s->bytes_left;
    if (!pb_read(s, NULL, n))
        return false;
    rx->chunk_data = data;
    rx->chunk_len = n;
    rx->chunk_seen = 1;
    return true;
}

/* Decode with rx callbacks bound; turns the first recorded error into err. */
FK_CHECKRETURN static int decode_with(const pb_msgdesc_t *fields, void *msg, const uint8_t *buf, size_t len,
                       rx_ctx *rx, const char *what, fk_err *err)
{
    pb_istream_t is = pb_istream_from_buffer(buf, len);
    if (pb_decode(&is, fields, msg))
        return FK_OK;
    if (rx->err.code != FK_OK)
        return fk_err_set(err, rx->err.code, "%s: %s", what, rx->err.msg);
    return fk_err_set(err, FK_EFORMAT, "%s: malformed protobuf (%s)", what, PB_GET_ERROR(&is));
}

int fk_codec_bundle_decode(const uint8_t *buf, size_t len, fk_bundle *out, fk_err *err)
{
    if (out->count)
        return fk_err_set(err, FK_EINVAL, "bundle decode: the output bundle must be empty");
    rx_ctx rx = {.b = out, .base = buf, .base_len = len};
    fedkern_v1_Bundle pb = fedkern_v1_Bundle_init_zero;
    pb.tensors.funcs.decode = dec_tensors;
    pb.tensors.arg = &rx;
    int rc = decode_with(fedkern_v1_Bundle_fields, &pb, buf, len, &rx, "bundle decode", err);
    if (rc != FK_OK)
        fk_bundle_clear(out);
    return rc;
}

int fk_codec_decode(const pb_msgdesc_t *fields, void *msg, const uint8_t *buf, size_t len,
                    fk_err *err)
{
    rx_ctx rx = {0};
    return decode_with(fields, msg, buf, len, &rx, "message decode", err);
}

void fk_codec_release(const pb_msgdesc_t *fields, void *msg)
{
    pb_release(fields, msg);
}

int fk_codec_chunk_check(const fedkern_v1_Chunk *c, size_t data_len, fk_err *err)
{
    if (c->total == 0 || c->index >= c->total)
        return fk_err_set(err, FK_EFORMAT, "chunk %u of %u: index out of range", c->index,
                          c->total);
    if (c->chunk_size == 0 || c->total_size == 0)
        return fk_err_set(err, FK_EFORMAT, "chunk %u: zero chunk_size or total_size", c->index);
    uint64_t total = c->total_size / c->chunk_size + (c->total_size % c->chunk_size != 0);
    if (total != c->total)
        return fk_err_set(err, FK_EFORMAT,
                          "chunk %u: total %u does not match total_size %llu / chunk_size %u",
                          c->index, c->total, (unsigned long long)c->total_size, c->chunk_size);
    uint64_t want = c->index + 1 < c->total
                        ? c->chunk_size
                        : c->total_size - (uint64_t)(c->total - 1) * c->chunk_size;
    if (data_len != want)
        return fk_err_set(err, FK_EFORMAT, "chunk %u of %u: %zu data bytes, expected %llu",
                          c->index, c->total, data_len, (unsigned long long)want);
    static const uint8_t zero[32];
    if (!memcmp(c->sha256, zero, sizeof zero))
        return fk_err_set(err, FK_EFORMAT, "chunk %u: missing sha256 of the payload", c->index);
    return FK_OK;
}

/* ---------------------------------------------------------------- payload messages */

FK_CHECKRETURN static int decode_payload(const pb_msgdesc_t *fields, void *msg, fedkern_v1_Bundle *pb,
                          const bool *has_bundle, fedkern_v1_Chunk *pc, const bool *has_chunk,
                          const uint8_t *buf, size_t len, fk_codec_rx *out, const char *what,
                          fk_err *err)
{
    out->has_bundle = out->has_chunk = 0;
    out->chunk_data = NULL;
    out->chunk_len = 0;
    if (out->bundle && out->bundle->count)
        return fk_err_set(err, FK_EINVAL, "%s: the output bundle must be empty", what);
    rx_ctx rx = {.b = out->bundle, .base = buf, .base_len = len};
    pb->tensors.funcs.decode = dec_tensors;
    pb->tensors.arg = &rx;
    pc->data.funcs.decode = dec_chunk_data;
    pc->data.arg = &rx;
    int rc = decode_with(fields, msg, buf, len, &rx, what, err);
    if (rc == FK_OK && *has_bundle && *has_chunk)
        rc = fk_err_set(err, FK_EFORMAT, "%s: carries both a bundle and a chunk", what);
    if (rc == FK_OK && *has_chunk) {
        rc = fk_codec_chunk_check(pc, rx.chunk_len, err);
        if (rc != FK_OK)
            fk_err_prefix(err, rc, "%s: ", what);
    }
    if (rc != FK_OK) {
        if (out->bundle)
            fk_bundle_clear(out->bundle);
        pb_release(fields, msg);
        return rc;
    }
    out->has_bundle = *has_bundle;
    out->has_chunk = *has_chunk;
    out->chunk_data = rx.chunk_data;
    out->chunk_len = rx.chunk_len;
    return FK_OK;
}

int fk_codec_encode_pull_task_response(fedkern_v1_PullTaskResponse *msg, const fk_codec_tx *tx,
                                       int framed, uint8_t **buf, size_t *len, fk_err *err)
{
    return encode_payload(fedkern_v1_PullTaskResponse_fields, msg, &msg->bundle, &msg->has_bundle, &msg->chunk,
                          &msg->has_chunk, tx, framed, buf, len, err);
}

int fk_codec_decode_pull_task_response(const uint8_t *buf, size_t len,
                                       fedkern_v1_PullTaskResponse *msg, fk_codec_rx *rx,
                                       fk_err *err)
{
    *msg = (fedkern_v1_PullTaskResponse)fedkern_v1_PullTaskResponse_init_zero;
    return decode_payload(fedkern_v1_PullTaskResponse_fields, msg, &msg->bundle, &msg->has_bundle,
                          &msg->chunk, &msg->has_chunk, buf, len, rx, "PullTaskResponse", err);
}

int fk_codec_encode_push_update_request(fedkern_v1_PushUpdateRequest *msg, const fk_codec_tx *tx,
                                        int framed, uint8_t **buf, size_t *len, fk_err *err)
{
    return encode_payload(fedkern_v1_PushUpdateRequest_fields, msg, &msg->bundle, &msg->has_bundle, &msg->chunk,
                          &msg->has_chunk, tx, framed, buf, len, err);
}

int fk_codec_decode_push_update_request(const uint8_t *buf, size_t len,
                                        fedkern_v1_PushUpdateRequest *msg, fk_codec_rx *rx,
                                        fk_err *err)
{
    *msg = (fedkern_v1_PushUpdateRequest)fedkern_v1_PushUpdateRequest_init_zero;
    return decode_payload(fedkern_v1_PushUpdateRequest_fields, msg, &msg->bundle,
                          &msg->has_bundle, &msg->chunk, &msg->has_chunk, buf, len, rx,
                          "PushUpdateRequest", err);
}

int fk_codec_encode_job_result_response(fedkern_v1_JobResultResponse *msg, const fk_codec_tx *tx,
                                        int framed, uint8_t **buf, size_t *len, fk_err *err)
{
    return encode_payload(fedkern_v1_JobResultResponse_fields, msg, &msg->model, &msg->has_model, &msg->chunk,
                          &msg->has_chunk, tx, framed, buf, len, err);
}

int fk_codec_decode_job_result_response(const uint8_t *buf, size_t len,
                                        fedkern_v1_JobResultResponse *msg, fk_codec_rx *rx,
                                        fk_err *err)
{
    *msg = (fedkern_v1_JobResultResponse)fedkern_v1_JobResultResponse_init_zero;
    return decode_payload(fedkern_v1_JobResultResponse_fields, msg, &msg->model, &msg->has_model,
                          &msg->chunk, &msg->has_chunk, buf, len, rx, "JobResultResponse", err);
}

/* Predict messages carry no chunk: a dummy one stands in for the payload helpers. */
FK_CHECKRETURN static int encode_one_bundle(const pb_msgdesc_t *fields, void *msg, fedkern_v1_Bundle *pb,
                             bool *has, const fk_codec_tx *tx, uint8_t **buf, size_t *len,
                             const char *what, fk_err *err)
{
    if (!tx->bundle || tx->chunk_data)
        return fk_err_set(err, FK_EINVAL, "%s carries exactly one inline bundle", what);
    fedkern_v1_Chunk none = fedkern_v1_Chunk_init_zero;
    bool no = false;
    return encode_payload(fields, msg, pb, has, &none, &no, tx, 0, buf, len, err);
}

FK_CHECKRETURN static int decode_one_bundle(const pb_msgdesc_t *fields, void *msg, fedkern_v1_Bundle *pb,
                             const bool *has, const uint8_t *buf, size_t len, fk_bundle *out,
                             const char *what, fk_err *err)
{
    fedkern_v1_Chunk none = fedkern_v1_Chunk_init_zero;
    bool no = false;
    fk_codec_rx rx = {.bundle = out};
    int rc = decode_payload(fields, msg, pb, has, &none, &no, buf, len, &rx, what, err);
    if (rc == FK_OK && !*has) {
        pb_release(fields, msg);
        return fk_err_set(err, FK_EFORMAT, "%s: no bundle", what);
    }
    return rc;
}

int fk_codec_encode_predict_request(fedkern_v1_PredictRequest *msg, const fk_codec_tx *tx,
                                    uint8_t **buf, size_t *len, fk_err *err)
{
    return encode_one_bundle(fedkern_v1_PredictRequest_fields, msg, &msg->queries,
                             &msg->has_queries, tx, buf, len, "PredictRequest", err);
}

int fk_codec_decode_predict_request(const uint8_t *buf, size_t len, fedkern_v1_PredictRequest *msg,
                                    fk_bundle *queries, fk_err *err)
{
    *msg = (fedkern_v1_PredictRequest)fedkern_v1_PredictRequest_init_zero;
    return decode_one_bundle(fedkern_v1_PredictRequest_fields, msg, &msg->queries,
                             &msg->has_queries, buf, len, queries, "PredictRequest", err);
}

int fk_codec_encode_predict_response(fedkern_v1_PredictResponse *msg, const fk_codec_tx *tx,
                                     uint8_t **buf, size_t *len, fk_err *err)
{
    return encode_one_bundle(fedkern_v1_PredictResponse_fields, msg, &msg->result,
                             &msg->has_result, tx, buf, len, "PredictResponse", err);
}

int fk_codec_decode_predict_response(const uint8_t *buf, size_t len,
                                     fedkern_v1_PredictResponse *msg, fk_bundle *result,
                                     fk_err *err)
{
    *msg = (fedkern_v1_PredictResponse)fedkern_v1_PredictResponse_init_zero;
    return decode_one_bundle(fedkern_v1_PredictResponse_fields, msg, &msg->result,
                             &msg->has_result, buf, len, result, "PredictResponse", err);
}

/* --------------------------------------------------- NUL bytes in strings */

static int read_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < len; shift += 7) {
        uint8_t b = buf[(*pos)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

int fk_codec_string_nul(const uint8_t *buf, size_t len, uint32_t field, int *line, size_t *at)
{
    size_t pos = 0;
    while (pos < len) {
        uint64_t key, n;
        if (read_varint(buf, len, &pos, &key))
            return 0;
        switch (key & 7) {
        case 0:
            if (read_varint(buf, len, &pos, &n))
                return 0;
            break;
        case 1:
            pos += 8;
            break;
        case 5:
            pos += 4;
            break;
        case 2: {
            if (read_varint(buf, len, &pos, &n) || n > len - pos)
                return 0;
            const uint8_t *s = buf + pos, *z = (key >> 3) == field ? memchr(s, 0, n) : NULL;
            if (z) {
                *line = 1;
                for (const uint8_t *c = s; c < z; c++)
                    *line += *c == '\n';
                *at = (size_t)(z - s);
                return 1;
            }
            pos += n;
            break;
        }
        default:
            return 0;
        }
    }
    return 0;
}
