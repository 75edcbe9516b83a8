#include "common/net/grpc_frame.h"

#include <stdlib.h>
#include <string.h>

/* Grow the receive buffer with the data, not with the announcement, so a peer
 * that announces a large message and stalls pins little memory. */
#define FRAME_FIRST_ALLOC 65536

void fk_grpc_frame_init(fk_grpc_frame_parser *p, size_t max_size)
{
    memset(p, 0, sizeof *p);
    p->max_size = max_size;
}

void fk_grpc_frame_close(fk_grpc_frame_parser *p)
{
    fk_grpc_frame_alloc_cb alloc = p->alloc;
    if (!alloc)
        free(p->msg);
    fk_grpc_frame_init(p, p->max_size);
    p->alloc = alloc;
}

void fk_grpc_frame_set_alloc(fk_grpc_frame_parser *p, fk_grpc_frame_alloc_cb alloc)
{
    p->alloc = alloc;
}

int fk_grpc_frame_partial(const fk_grpc_frame_parser *p)
{
    return p->hdr_len > 0;
}

size_t fk_grpc_frame_buffered(const fk_grpc_frame_parser *p)
{
    return p->msg_cap;
}

FK_CHECKRETURN static int fail(fk_grpc_frame_parser *p, fk_err *err, int code, const char *what,
                               size_t n)
{
    p->failed = 1;
    if (code == FK_ELIMIT)
        return fk_err_set(err, code,
                          "gRPC message of %zu bytes exceeds the maximum message size %zu; "
                          "raise max_message_size or send the payload in chunks",
                          n, p->max_size);
    return fk_err_set(err, code, "gRPC framing: %s", what);
}

/* Parse a complete prefix: flag and length; start the message. */
FK_CHECKRETURN static int start_message(fk_grpc_frame_parser *p, void *ctx, fk_err *err)
{
    uint8_t flag = p->hdr[0];
    size_t len = (size_t)p->hdr[1] << 24 | (size_t)p->hdr[2] << 16 | (size_t)p->hdr[3] << 8 |
                 (size_t)p->hdr[4];
    if (flag == 1)
        return fail(p, err, FK_EFORMAT,
                    "compressed message received but no grpc-encoding was negotiated", 0);
    if (flag != 0)
        return fail(p, err, FK_EFORMAT, "invalid compressed-flag byte in message prefix", 0);
    p->msg_len = len;
    if (len > p->max_size)
        return fail(p, err, FK_ELIMIT, NULL, len);
    p->msg_have = 0;
    p->msg_cap = 0;
    p->msg = NULL;
    if (p->alloc) {
        int rc = p->alloc(ctx, len, &p->msg);
        if (rc != FK_OK) {
            p->msg = NULL;
            p->failed = 1;
            if (err && err->code == FK_OK)
                fk_err_set(err, rc, "gRPC message of %zu bytes refused by the receiver", len);
            return rc;
        }
        if (!p->msg && len > 0) {
            p->failed = 1;
            return fk_err_set(err, FK_ENOMEM, "gRPC framing: no buffer for a %zu-byte message", len);
        }
        p->msg_cap = len;
    }
    return FK_OK;
}

/* Make room for `more` bytes of the message in progress. */
FK_CHECKRETURN static int reserve(fk_grpc_frame_parser *p, size_t more, fk_err *err)
{
    size_t need = p->msg_have + more;
    if (need <= p->msg_cap && (p->msg || p->alloc))
        return FK_OK;
    size_t cap = p->msg_cap ? p->msg_cap : FRAME_FIRST_ALLOC;
    while (cap < need)
        cap *= 2;
    if (cap > p->msg_len)
        cap = p->msg_len;
    uint8_t *n = realloc(p->msg, cap ? cap : 1);
    if (!n) {
        p->failed = 1;
        return fk_err_set(err, FK_ENOMEM, "gRPC framing: out of memory for a %zu-byte message",
                          p->msg_len);
    }
    p->msg = n;
    p->msg_cap = cap;
    return FK_OK;
}

/* Hand the finished message over and reset for the next prefix. */
FK_CHECKRETURN static int deliver(fk_grpc_frame_parser *p, fk_grpc_frame_cb cb, void *ctx,
                                  fk_err *err)
{
    uint8_t *msg = p->msg;
    size_t len = p->msg_len;
    if (!msg && !p->alloc && reserve(p, 0, err) != FK_OK)
        return FK_ENOMEM;
    msg = p->msg;
    p->msg = NULL;
    p->msg_cap = 0;
    p->msg_have = 0;
    p->msg_len = 0;
    p->hdr_len = 0;
    int rc = cb(ctx, msg, len);
    if (rc != FK_OK) {
        p->failed = 1;
        if (err && err->code == FK_OK)
            fk_err_set(err, rc, "gRPC message handler failed (%s)", fk_status_name(rc));
    }
    return rc;
}

int fk_grpc_frame_feed(fk_grpc_frame_parser *p, const uint8_t *data, size_t len,
                       fk_grpc_frame_cb cb, void *ctx, fk_err *err)
{
    if (p->failed)
        return fk_err_set(err, FK_ESTATE, "gRPC framing: stream already failed; reset it");
    if (err)
        fk_err_clear(err);
    while (len > 0) {
        if (p->hdr_len < FK_GRPC_PREFIX_LEN) {
            size_t n = FK_GRPC_PREFIX_LEN - p->hdr_len;
            if (n > len)
                n = len;
            memcpy(p->hdr + p->hdr_len, data, n);
            p->hdr_len += n;
            data += n;
            len -= n;
            if (p->hdr_len < FK_GRPC_PREFIX_LEN)
                return FK_OK;
            int rc = start_message(p, ctx, err);
            if (rc != FK_OK)
                return rc;
        }
        size_t n = p->msg_len - p->msg_have;
        if (n > len)
            n = len;
        if (n) {
            if (reserve(p, n, err) != FK_OK)
                return FK_ENOMEM;
            memcpy(p->msg + p->msg_have, data, n);
            p->msg_have += n;
            data += n;
            len -= n;
        }
        if (p->msg_have < p->msg_len)
            return FK_OK;
        int rc = deliver(p, cb, ctx, err);
        if (rc != FK_OK)
            return rc;
    }
    return FK_OK;
}

int fk_grpc_frame_prefix(uint8_t out[FK_GRPC_PREFIX_LEN], size_t len, fk_err *err)
{
    if (len > UINT32_MAX)
        return fk_err_set(err, FK_ELIMIT,
                          "gRPC message of %zu bytes does not fit the 32-bit length prefix; "
                          "send it in chunks",
                          len);
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
    return FK_OK;
}
