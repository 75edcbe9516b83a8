/* Shared fixture pieces of the gRPC loop tests (net_loop, net_mloop): a throw-away PKI under
 * /tmp, TLS contexts from it, and a server that routes /t.T/Echo and /t.T/Hold to the test's
 * handlers. Failures are cmocka assertions. */
#ifndef FK_TEST_SUPPORT_NET_H
#define FK_TEST_SUPPORT_NET_H

#include <stddef.h>
#include <uv.h>

#include "common/net/grpc_server.h"
#include "common/net/limits.h"
#include "common/net/tls.h"

/* mkdtemp(tmpl) into dir (size bytes), then dir/pki: a CA, server certificates "localhost"
 * (also for IP 127.0.0.1) and the NULL-ended extra_servers (may be NULL), client "alice". */
void fk_test_pki_make(char *dir, size_t size, const char *tmpl, const char *const *extra_servers);
/* The context of one certificate of dir's PKI (is_server: role server, else client). */
fk_tls_ctx *fk_test_tls(const char *dir, int is_server, const char *name);
/* rm -rf dir. */
void fk_test_pki_remove(const char *dir);
/* *out: a server on loop with dir's "localhost" certificate, listening on 127.0.0.1:0, with
 * /t.T/Echo and /t.T/Hold routed to echo and hold (ud for both). */
void fk_test_echo_server(fk_grpc_server **out, uv_loop_t *loop, const char *dir,
                         const fk_net_limits *lim, uint64_t drain_ms, int io_threads,
                         fk_grpc_handler echo, fk_grpc_handler hold, void *ud);

#endif
