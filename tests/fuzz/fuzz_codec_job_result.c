/* Fuzz target: the JobResultResponse decoder (inline bundle or zero-copy chunk). */
#include <stdint.h>
#include <stdlib.h>

#include "common/net/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fedkern_v1_JobResultResponse msg;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_rx rx = {.bundle = &b};
    fk_err err;
    if (fk_codec_decode_job_result_response(data, size, &msg, &rx, &err) == FK_OK) {
        /* A chunk view must lie inside the input. */
        if (rx.has_chunk && rx.chunk_len && (rx.chunk_data < data || rx.chunk_data + rx.chunk_len > data + size))
            abort();
        fk_codec_release(fedkern_v1_JobResultResponse_fields, &msg);
    }
    fk_bundle_close(&b);
    return 0;
}
