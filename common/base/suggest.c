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
    /* one row of the dynamic programme: row[j] = distance of a[0..i) and b[0..j) */
    int row[MAXLEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + !same(a[i - 1], b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int fk_suggest_max_distance(size_t len)
{
    return len <= 4 ? 1 : len <= 8 ? 2 : 3;
}
