/* Fuzz target: chunk reassembly fed a sequence of PushUpdateRequests (each
 * preceded by a 2-byte big-endian length), under a 64 KB memory limit. */
#include <stdint.h>
#include <stdlib.h>

#include "common/net/chunk.h"
#include "common/net/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_reasm r;
    fk_reasm_init(&r, 65536);
    fk_err err;
    while (size >= 2) {
        size_t n = (size_t)data[0] << 8 | data[1];
        data += 2;
        size -= 2;
        if (n > size)
            n = size;
        fedkern_v1_PushUpdateRequest m;
        fk_codec_rx rx = {0};
        if (fk_codec_decode_push_update_request(data, n, &m, &rx, &err) == FK_OK) {
            int complete;
            /* refusals are expected here: the target checks memory safety */
            if (rx.has_chunk &&
                fk_reasm_add(&r, &m.chunk, rx.chunk_data, rx.chunk_len, &complete, &err) != FK_OK)
                complete = 0;
            uint32_t missing[8];
            fk_reasm_missing(&r, missing, 8);
            fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &m);
        }
        data += n;
        size -= n;
    }
    uint8_t *out;
    size_t len;
    if (fk_reasm_take(&r, &out, &len, &err) == FK_OK)
        free(out);
    fk_reasm_close(&r);
    return 0;
}
