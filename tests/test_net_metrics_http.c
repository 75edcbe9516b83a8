/* The metrics listener (common/net/metrics_http.h) over loopback HTTP: GET /metrics answers
 * the render callback's text, GET /healthz the health callback's JSON with 200 while it says
 * serving and 503 once it says stopping (a default body without a callback), anything else
 * 404. Requests and answers on the test's own loop, no clock involved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/uvcheck.h"
#include "common/net/metrics_http.h"

typedef struct get {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    char req[128];
    char resp[4096];
    size_t len;
    int done;
} get;

static int serving = 1;

static int render(void *ud, char **buf, size_t *len)
{
    (void)ud;
    size_t cap = 0;
    return fk_metrics_printf(buf, len, &cap, "# TYPE test_up gauge\ntest_up 1\n");
}

static int health(void *ud, char *json, size_t cap)
{
    (void)ud;
    snprintf(json, cap, "{\"status\":\"%s\",\"sessions\":3}", serving ? "serving" : "stopping");
    return serving;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    get *g = h->data;
    buf->base = g->resp + g->len;
    buf->len = sizeof g->resp - 1 - g->len;
}

static void on_closed(uv_handle_t *h)
{
    ((get *)h->data)->done = 1;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    get *g = s->data;
    if (n > 0) {
        g->len += (size_t)n;
        g->resp[g->len] = '\0';
        return;
    }
    if (n < 0) /* the listener closes after its answer */
        uv_close((uv_handle_t *)&g->tcp, on_closed);
}

static void on_written(uv_write_t *w, int status)
{
    assert_int_equal(status, 0);
    get *g = w->data;
    FK_UV_MUST(uv_read_start((uv_stream_t *)&g->tcp, on_alloc, on_read));
}

static void on_connect(uv_connect_t *c, int status)
{
    assert_int_equal(status, 0);
    get *g = c->data;
    uv_buf_t b = uv_buf_init(g->req, (unsigned)strlen(g->req));
    g->wr.data = g;
    FK_UV_MUST(uv_write(&g->wr, (uv_stream_t *)&g->tcp, &b, 1, on_written));
}

/* GET path from the listener on port; the whole answer (status line, headers, body). */
static const char *http_get(uv_loop_t *loop, int port, const char *path, get *g)
{
    memset(g, 0, sizeof *g);
    snprintf(g->req, sizeof g->req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    FK_UV_MUST(uv_tcp_init(loop, &g->tcp));
    g->tcp.data = g->conn.data = g;
    struct sockaddr_in a;
    FK_UV_MUST(uv_ip4_addr("127.0.0.1", port, &a));
    FK_UV_MUST(uv_tcp_connect(&g->conn, &g->tcp, (const struct sockaddr *)&a, on_connect));
    while (!g->done)
        FK_UV_MUST(uv_run(loop, UV_RUN_ONCE));
    return g->resp;
}

static void stopped(void *ud)
{
    *(int *)ud = 1;
}

static void healthz_and_metrics(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    fk_metrics *m;
    fk_err err = {0};
    assert_int_equal(fk_metrics_start(&m, &loop, "127.0.0.1:0", render, NULL, &err), FK_OK);
    int port = fk_metrics_port(m);
    get g;
    /* without a health callback: the loop answers, so it serves */
    const char *r = http_get(&loop, port, "/healthz", &g);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n{\"status\":\"serving\"}\n"));
    fk_metrics_set_health(m, health, NULL);
    r = http_get(&loop, port, "/healthz", &g);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n{\"status\":\"serving\",\"sessions\":3}\n"));
    serving = 0; /* a stop signal: 503 until the listener closes */
    r = http_get(&loop, port, "/healthz?verbose=1", &g);
    assert_non_null(strstr(r, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(r, "{\"status\":\"stopping\",\"sessions\":3}\n"));
    r = http_get(&loop, port, "/metrics", &g);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n# TYPE test_up gauge\ntest_up 1\n"));
    r = http_get(&loop, port, "/healthzz", &g);
    assert_non_null(strstr(r, "HTTP/1.1 404 Not Found\r\n"));
    int closed = 0;
    fk_metrics_close(m, stopped, &closed);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    assert_true(closed);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(healthz_and_metrics)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
