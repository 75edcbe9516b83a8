/* Wire limits: every bound the network layer enforces, with sane defaults and
 * one config key each (net.max_message, ...), so no peer can make us allocate
 * or wait without bound. */
#ifndef FK_NET_LIMITS_H
#define FK_NET_LIMITS_H

#include <stdint.h>
#include <stddef.h>

#include "common/base/err.h"
#include "common/base/params.h"

typedef struct fk_net_limits {
    uint64_t max_message;          /* bytes of one gRPC message (request or response) */
    uint32_t max_streams;          /* concurrent streams (calls) per connection */
    uint64_t max_conn_memory;      /* bytes of message buffers held per connection */
    uint64_t idle_timeout_ms;      /* close a connection with no calls and no traffic */
    uint64_t handshake_timeout_ms; /* TCP accept to TLS handshake done */
    uint64_t keepalive_ms;         /* send a PING after this much silence (0 = never) */
    uint64_t keepalive_timeout_ms; /* close when a PING is not answered in time */
} fk_net_limits;

/* One documented key of the limits table, for --help texts (fk_param_docs_print). */
typedef fk_param_doc fk_net_limit_doc;

void fk_net_limits_default(fk_net_limits *l);

/* Read "PREFIX.max_message", ... from p (prefix "net" gives "net.max_message");
 * absent keys keep their current value. */
FK_CHECKRETURN int fk_net_limits_from_params(fk_net_limits *l, const fk_params *p,
                                             const char *prefix, fk_err *err);

/* NULL-terminated list of the limit keys (without prefix) with their meaning and default. */
const fk_net_limit_doc *fk_net_limits_doc(void);

#endif
