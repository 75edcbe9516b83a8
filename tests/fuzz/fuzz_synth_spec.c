/* Fuzz target: synthetic data-set specs (the data.NAME values of a client config). */
#include <stdint.h>
#include <stdlib.h>

#include "common/data/synth_spec.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    fk_synth_spec s;
    fk_err err;
    /* parse only: generation of a valid spec is bounded by its limits, not worth fuzzing */
    int rc = fk_synth_spec_parse(text, &s, &err);
    (void)rc; /* memory safety is the check here, not the verdict */
    fk_synth_spec_is(text);
    free(text);
    return 0;
}
