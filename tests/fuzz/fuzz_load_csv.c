/* Fuzz target: the CSV loader (fk_load with format csv) on arbitrary bytes, and the affine
 * map files (fk_affine_load: a CSV of two rows) read through it. */
#include "common/data/source.h"
#include "tests/fuzz/fuzz_load.h"

static void affine(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return;
    fk_affine a;
    fk_err err = {0};
    if (fk_affine_load(&a, path, &err) == FK_OK) {
        if (a.d == 0 || !a.shift || !a.scale)
            __builtin_trap(); /* a loaded map has both rows */
        fk_affine_close(&a);
    } else if (!err.msg[0]) {
        __builtin_trap();
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_load_opts o = {.format = FK_FORMAT_CSV};
    /* the first byte picks label position (first, last, none, default or a column number
     * 1..8) and header, the rest is the file */
    if (size == 0)
        return 0;
    o.label = (fk_label_pos)(data[0] % 5);
    o.header = (data[0] >> 2) & 1;
    if (o.label == FK_LABEL_INDEX)
        o.label_col = (size_t)(data[0] >> 5) + 1;
    data++;
    size--;
    fuzz_load(data, size, &o);
    affine(data, size);
    return 0;
}
