/* Fuzz target: the MAT loader (fk_load with format mat) on arbitrary bytes. */
#include "tests/fuzz/fuzz_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_load_opts o = {.format = FK_FORMAT_MAT};
    o.samples_in_columns = size > 0 && (data[size - 1] & 1);
    fuzz_load(data, size, &o);
    return 0;
}
