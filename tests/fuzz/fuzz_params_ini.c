/* Fuzz target: the INI parser behind config files and job files. */
#include <stdint.h>
#include <stdlib.h>

#include "common/base/params.h"
#include "common/data/source.h"
#include "tests/fuzz/fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    /* The results do not matter (the target checks memory safety); the lookups also run on
     * what a failed parse left. */
    int rc = fk_params_parse_ini(&p, text, "fuzz", &err);
    long l;
    double d;
    rc |= fk_params_int(&p, "a", 0, -10, 10, &l, &err);
    rc |= fk_params_double(&p, "s.b", 0, -1, 1, &d, &err);
    /* a client's data-set loader options ([data] x.label = ..., x.prep = ...) and the flags */
    fk_source s;
    rc |= fk_source_parse(&s, &p, "data.x.", &err);
    rc |= fk_source_parse(&s, &p, "", &err);
    (void)rc;
    fk_params_close(&p);
    free(text);
    return 0;
}
