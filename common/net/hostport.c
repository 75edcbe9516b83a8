#include "common/net/hostport.h"

#include <stdlib.h>
#include <string.h>

int fk_hostport_split(const char *s, char *host, size_t cap, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return -1;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (*h == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (hl == 0 || hl >= cap || *end || p < 0 || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}
