/* "HOST:PORT" and "[IPv6]:PORT" text, as the daemons' and the CLI's flags take it. */
#ifndef FK_NET_HOSTPORT_H
#define FK_NET_HOSTPORT_H

#include <stddef.h>

/* Split s at its last ':' into host (brackets removed, at most cap-1 characters,
 * not empty) and port (0..65535); 0, or -1 when s is not of that form. */
int fk_hostport_split(const char *s, char *host, size_t cap, int *port);

#endif
