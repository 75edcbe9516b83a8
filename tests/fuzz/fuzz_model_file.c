/* Fuzz target: the model-file decoder (a Bundle followed by a ModelInfo, or a bare Bundle),
 * what `fedkern model` reads from disk. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/modelfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_bundle b;
    fk_bundle_init(&b);
    fk_model_info info;
    fk_err err;
    if (fk_modelfile_decode(data, size, &b, &info, &err) == FK_OK) {
        /* every string of the info is terminated inside its array */
        if (!memchr(info.method, 0, sizeof info.method) ||
            !memchr(info.job_id, 0, sizeof info.job_id) ||
            !memchr(info.software, 0, sizeof info.software) || info.round < 0)
            abort();
        for (size_t i = 0; i < b.count; i++) /* and every tensor is readable */
            for (size_t k = 0; k < b.items[i].len; k++)
                (void)*(volatile double *)&b.items[i].data[k];
    }
    fk_bundle_close(&b);
    return 0;
}
