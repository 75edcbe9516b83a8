/* Fuzz target: the CSV loader (fk_load with format csv) on arbitrary bytes. */
#include "tests/fuzz/fuzz_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_load_opts o = {.format = FK_FORMAT_CSV};
    /* the first byte picks label position and header, the rest is the file */
    if (size == 0)
        return 0;
    o.label = (fk_label_pos)(data[0] % 4);
    o.header = (data[0] >> 2) & 1;
    data++;
    size--;
    fuzz_load(data, size, &o);
    return 0;
}
