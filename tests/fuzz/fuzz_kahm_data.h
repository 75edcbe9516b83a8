/* The two small labelled clients the kahm fuzz targets build their states and models from
 * (fuzz_kahm_msgs.c, fuzz_codec_predict.c): client k holds classes {k, k + 1}. */
#ifndef FK_FUZZ_KAHM_DATA_H
#define FK_FUZZ_KAHM_DATA_H

#include <stdlib.h>

#include "common/data/dataset.h"

enum { FUZZ_KAHM_K = 2, FUZZ_KAHM_N = 12, FUZZ_KAHM_P = 3 };

static inline void fuzz_kahm_data(fk_dataset d[FUZZ_KAHM_K])
{
    enum { N = FUZZ_KAHM_N, P = FUZZ_KAHM_P };
    for (int k = 0; k < FUZZ_KAHM_K; k++) {
        if (fk_dataset_init(&d[k], N, P, 1) != FK_OK)
            abort();
        double y[N];
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < P; j++)
                d[k].X.data[i * P + j] = 0.3 * ((i * 7 + j * 3 + k) % 11) - 1.0 + (i % 2) * j;
            y[i] = (double)(k + i % 2);
        }
        if (fk_dataset_set_labels(&d[k], y, NULL) != FK_OK)
            abort();
    }
}

#endif
