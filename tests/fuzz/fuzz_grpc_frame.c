/* Fuzz target: the gRPC length-prefix parser, fed the input in two slices
 * split at a position taken from the first byte; an odd first byte also turns
 * on the allocation hook (caller-owned buffers, refusals above 2 KiB), as the
 * gRPC server and client use it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/grpc_frame.h"

typedef struct sink_ctx {
    size_t total;
    uint8_t *cur; /* hook mode: the buffer of the message in progress (ours) */
} sink_ctx;

static int sink(void *ctx, uint8_t *msg, size_t len)
{
    sink_ctx *s = ctx;
    s->total += len;
    if (msg && len)
        s->total += msg[len - 1] & 1; /* touch the last byte: it must be inside the buffer */
    free(msg);
    if (msg == s->cur)
        s->cur = NULL;
    return FK_OK;
}

static int hook(void *ctx, size_t len, uint8_t **buf)
{
    sink_ctx *s = ctx;
    if (len > 2048)
        return FK_ELIMIT;
    s->cur = malloc(len ? len : 1);
    if (!s->cur)
        return FK_ENOMEM;
    *buf = s->cur;
    return FK_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t cut = 1 + data[0] % size;
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 4096);
    if (data[0] & 1)
        fk_grpc_frame_set_alloc(&p, hook);
    sink_ctx s = {0};
    fk_err err;
    if (fk_grpc_frame_feed(&p, data + 1, cut - 1, sink, &s, &err) == FK_OK &&
        fk_grpc_frame_feed(&p, data + cut, size - cut, sink, &s, &err) != FK_OK) {
        /* a refused second half is a verdict, not a fault: partial/close must still be safe */
    }
    fk_grpc_frame_partial(&p);
    fk_grpc_frame_close(&p);
    free(s.cur); /* a half-received message: the parser leaves it to us */
    return 0;
}
