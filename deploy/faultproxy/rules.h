/* Fault rules of fedkern-faultproxy: the faults of one connection, read from
 * flags (fk_params) or from a rule script (one line of key=value pairs per
 * connection, cycled). */
#ifndef FK_FAULTPROXY_RULES_H
#define FK_FAULTPROXY_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/base/params.h"

enum { FK_FAULT_MAX_RULES = 256 };

typedef struct fk_fault {
    double drop;          /* probability the connection is refused (RST at accept) */
    double latency_ms;    /* added one-way delay of every chunk */
    double jitter_ms;     /* plus a uniform 0..jitter_ms, order kept */
    double rate;          /* bytes/s each direction (0: no cap) */
    uint64_t cut_after;   /* reset both sides after this many bytes (0: never) */
    uint64_t hole_after;  /* stop forwarding after this many bytes (0: never) */
    double corrupt;       /* probability each forwarded byte is flipped */
} fk_fault;

/* Read the fault keys (drop latency-ms jitter-ms rate cut-after blackhole-after
 * corrupt) of p into f; absent keys keep what f holds. */
FK_CHECKRETURN int fk_fault_read(const fk_params *p, fk_fault *f, fk_err *err);

/* Parse a rule script (text of len bytes, need not be NUL-terminated): every
 * non-empty line after '#' comments are cut is one rule, defaults from dflt.
 * Fills out[0..*n); origin names the script in errors. */
FK_CHECKRETURN int fk_fault_parse_script(const char *text, size_t len, const fk_fault *dflt,
                                         fk_fault *out, int max, int *n, const char *origin,
                                         fk_err *err);

#endif
