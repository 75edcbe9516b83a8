/* Fuzz target: the strict Bundle decoder (wire payloads and on-disk models).
 * A decoded bundle must re-encode and decode to the same tensors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_bundle b, c;
    fk_err err;
    fk_bundle_init(&b);
    fk_bundle_init(&c);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        uint8_t *buf;
        size_t len;
        if (fk_codec_bundle_encode(&b, &buf, &len, &err) != FK_OK)
            abort();
        if (fk_codec_bundle_decode(buf, len, &c, &err) != FK_OK || c.count != b.count)
            abort();
        for (size_t i = 0; i < b.count; i++)
            if (c.items[i].len != b.items[i].len ||
                memcmp(c.items[i].data, b.items[i].data, b.items[i].len * sizeof(double)))
                abort();
        free(buf);
    }
    fk_bundle_close(&b);
    fk_bundle_close(&c);
    return 0;
}
