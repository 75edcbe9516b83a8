#include "common/base/suggest.h"

enum { MAXLEN = 63 };

static int same(char x, char y)
{
    return x == y || ((x == '-' || x == '_') && (y == '-' || y == '_'));
}

int fk_edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    if (la > MAXLEN)
        la = MAXLEN;
    if (lb > MAXLEN)
        lb = MAXLEN;
    /* three rows of the dynamic programme (the one before last for transpositions):
     * cur[j] = distance of a[0..i) and b[0..j) */
    int rows[3][MAXLEN + 1];
    int *two = rows[0], *one = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        one[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int best = one[j - 1] + !same(a[i - 1], b[j - 1]);
            if (one[j] + 1 < best)
                best = one[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            /* two neighbours swapped ("dyas" for "days") cost one edit */
            if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]) &&
                two[j - 2] + 1 < best)
                best = two[j - 2] + 1;
            cur[j] = best;
        }
        int *t = two;
        two = one;
        one = cur;
        cur = t;
    }
    return one[lb];
}

int fk_suggest_max_distance(size_t len)
{
    return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}
