/* See support_net.h. */
#include "tests/support_net.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/net/certs.h"

void fk_test_pki_make(char *dir, size_t size, const char *tmpl, const char *const *extra_servers)
{
    snprintf(dir, size, "%s", tmpl);
    assert_non_null(mkdtemp(dir));
    fk_err err;
    fk_cert_opts o = {.days = 1, .ips = "127.0.0.1"};
    char sub[96];
    snprintf(sub, sizeof sub, "%s/pki", dir);
    assert_int_equal(fk_certs_init_ca(sub, NULL, &o, &err), FK_OK);
    assert_int_equal(fk_certs_issue(sub, FK_ROLE_SERVER, "localhost", &o, &err), FK_OK);
    for (size_t i = 0; extra_servers && extra_servers[i]; i++)
        assert_int_equal(fk_certs_issue(sub, FK_ROLE_SERVER, extra_servers[i], &o, &err), FK_OK);
    o.ips = NULL;
    assert_int_equal(fk_certs_issue(sub, FK_ROLE_CLIENT, "alice", &o, &err), FK_OK);
}

fk_tls_ctx *fk_test_tls(const char *dir, int is_server, const char *name)
{
    char sub[96], ca[256], crt[256], key[256];
    fk_cert_role role = is_server ? FK_ROLE_SERVER : FK_ROLE_CLIENT;
    snprintf(sub, sizeof sub, "%s/pki", dir);
    assert_int_equal(fk_certs_path(ca, 256, sub, FK_ROLE_NONE, NULL, "pem", NULL), FK_OK);
    assert_int_equal(fk_certs_path(crt, 256, sub, role, name, "pem", NULL), FK_OK);
    assert_int_equal(fk_certs_path(key, 256, sub, role, name, "key", NULL), FK_OK);
    fk_tls_files files = {ca, crt, key, NULL, 0};
    fk_tls_ctx *tls = NULL;
    fk_err err;
    assert_int_equal(fk_tls_ctx_new(&tls, is_server, &files, &err), FK_OK);
    return tls;
}

void fk_test_pki_remove(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

void fk_test_echo_server(fk_grpc_server **out, uv_loop_t *loop, const char *dir,
                         const fk_net_limits *lim, uint64_t drain_ms, int io_threads,
                         fk_grpc_handler echo, fk_grpc_handler hold, void *ud)
{
    fk_err err;
    fk_grpc_server_config sc = {.limits = *lim, .drain_ms = drain_ms, .io_threads = io_threads};
    sc.tls = fk_test_tls(dir, 1, "localhost");
    /* *out is set at init, so the test's teardown closes a server whose listen failed */
    assert_int_equal(fk_grpc_server_init(out, loop, &sc, &err), FK_OK);
    fk_grpc_server *srv = *out;
    fk_tls_ctx_unref(sc.tls);
    assert_int_equal(fk_grpc_server_handle(srv, "/t.T/Echo", echo, ud, &err), FK_OK);
    assert_int_equal(fk_grpc_server_handle(srv, "/t.T/Hold", hold, ud, &err), FK_OK);
    assert_int_equal(fk_grpc_server_listen(srv, "127.0.0.1:0", &err), FK_OK);
}
