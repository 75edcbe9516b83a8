/* Fuzz target: the gRPC length-prefix parser, fed the input in two slices
 * split at a position taken from the first byte. */
#include <stdint.h>
#include <stdlib.h>

#include "common/net/grpc_frame.h"

static int sink(void *ctx, uint8_t *msg, size_t len)
{
    size_t *total = ctx;
    *total += len;
    free(msg);
    return FK_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t cut = 1 + data[0] % size;
    fk_grpc_frame_parser p;
    fk_grpc_frame_init(&p, 4096);
    size_t total = 0;
    fk_err err;
    if (fk_grpc_frame_feed(&p, data + 1, cut - 1, sink, &total, &err) == FK_OK)
        fk_grpc_frame_feed(&p, data + cut, size - cut, sink, &total, &err);
    fk_grpc_frame_partial(&p);
    fk_grpc_frame_close(&p);
    return 0;
}
