/* Fuzz target: the IDX loader (fk_load with format idx) on arbitrary bytes. */
#include "tests/fuzz/fuzz_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_load_opts o = {.format = FK_FORMAT_IDX};

    fuzz_load(data, size, &o);
    return 0;
}
