/* "Did you mean": the edit distance behind the suggestions of unknown option and job-key
 * errors. */
#ifndef FK_SUGGEST_H
#define FK_SUGGEST_H

#include <stddef.h>

/* Edit distance between a[0..la) and b[0..lb): insert, delete, substitute and swap two
 * neighbours, each 1 (optimal string alignment); '-' and '_' count as the same character,
 * as option names do. Strings longer than 63
 * characters are compared on their first 63 only (the caller's limit is far below). */
int fk_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/* Largest distance that still reads as a typo of a word of length len: 1 up to 4
 * characters, 2 up to 8, 3 beyond. */
int fk_suggest_max_distance(size_t len);

#endif
