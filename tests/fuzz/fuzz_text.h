/* Shared by the fuzz targets of text parsers: the input as a NUL-terminated
 * string (malloc'd; NULL when out of memory), as a config file or job would be. */
#ifndef FK_FUZZ_TEXT_H
#define FK_FUZZ_TEXT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return NULL;
    memcpy(text, data, size);
    text[size] = '\0';
    return text;
}

#endif
