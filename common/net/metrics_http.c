#include "common/net/metrics_http.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/uvcheck.h"
#include "common/net/hostport.h"

enum { MAX_REQUEST = 8192, IDLE_MS = 5000 };

typedef struct mconn {
    uv_tcp_t tcp;
    uv_timer_t idle;
    struct fk_metrics *m;
    char req[MAX_REQUEST];
    size_t len;
    char *resp;
    uv_write_t wr;
    int closing, handles;
    struct mconn *next;
} mconn;

struct fk_metrics {
    uv_loop_t *loop;
    uv_tcp_t listener;
    fk_metrics_render render;
    void *ud;
    fk_metrics_health health;
    void *health_ud;
    int port;
    mconn *conns;
    int closing, handles;
    void (*on_closed)(void *);
    void *closed_ud;
};

int fk_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (w < 0)
            return FK_EINVAL;
        if (*buf && (size_t)w < *cap - *len) {
            *len += (size_t)w;
            return FK_OK;
        }
        size_t ncap = (*cap ? *cap * 2 : 4096) + (size_t)w;
        char *g = realloc(*buf, ncap);
        if (!g)
            return FK_ENOMEM;
        *buf = g;
        *cap = ncap;
    }
}

static void maybe_done(struct fk_metrics *m)
{
    if (!m->closing || m->handles > 0 || m->conns)
        return;
    void (*cb)(void *) = m->on_closed;
    void *ud = m->closed_ud;
    free(m);
    if (cb)
        cb(ud);
}

static void conn_handle_closed(uv_handle_t *h)
{
    mconn *c = h->data;
    if (--c->handles > 0)
        return;
    struct fk_metrics *m = c->m;
    for (mconn **p = &m->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    free(c->resp);
    free(c);
    maybe_done(m);
}

static void conn_close(mconn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    FK_UV_MUST(uv_timer_stop(&c->idle));
    uv_close((uv_handle_t *)&c->idle, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void on_written(uv_write_t *wr, int status)
{
    (void)status;
    conn_close(wr->data);
}

static void respond(mconn *c, const char *status, const char *type, const char *body, size_t len)
{
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, type, len);
    c->resp = malloc((size_t)hl + len);
    if (!c->resp) {
        conn_close(c);
        return;
    }
    memcpy(c->resp, head, (size_t)hl);
    if (len)
        memcpy(c->resp + hl, body, len);
    uv_buf_t b = uv_buf_init(c->resp, (unsigned)((size_t)hl + len));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written))
        conn_close(c);
}

void fk_metrics_set_health(fk_metrics *m, fk_metrics_health health, void *ud)
{
    m->health = health;
    m->health_ud = ud;
}

static void answer_health(mconn *c)
{
    char json[512];
    int ok = 1;
    if (c->m->health) {
        json[0] = '\0';
        ok = c->m->health(c->m->health_ud, json, sizeof json - 1);
        json[sizeof json - 2] = '\0';
    } else {
        snprintf(json, sizeof json, "{\"status\":\"serving\"}");
    }
    size_t n = strlen(json);
    json[n++] = '\n';
    respond(c, ok ? "200 OK" : "503 Service Unavailable", "application/json", json, n);
}

static void handle_request(mconn *c)
{
    FK_UV_MUST(uv_read_stop((uv_stream_t *)&c->tcp));
    if (!strncmp(c->req, "GET /healthz ", 13) || !strncmp(c->req, "GET /healthz?", 13)) {
        answer_health(c);
        return;
    }
    if (strncmp(c->req, "GET /metrics ", 13) && strncmp(c->req, "GET /metrics?", 13)) {
        static const char nf[] = "not found: GET /metrics or GET /healthz\n";
        respond(c, "404 Not Found", "text/plain", nf, sizeof nf - 1);
        return;
    }
    char *body = NULL;
    size_t len = 0;
    if (c->m->render(c->m->ud, &body, &len) != FK_OK) {
        free(body);
        static const char err[] = "metrics unavailable\n";
        respond(c, "500 Internal Server Error", "text/plain", err, sizeof err - 1);
        return;
    }
    respond(c, "200 OK", "text/plain; version=0.0.4", body ? body : "", len);
    free(body);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    mconn *c = h->data;
    buf->base = c->req + c->len;
    buf->len = MAX_REQUEST - 1 - c->len;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    mconn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->req[c->len] = '\0';
    if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
        handle_request(c);
    else if (c->len >= MAX_REQUEST - 1)
        conn_close(c);
}

static void on_idle(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct fk_metrics *m = server->data;
    if (status < 0 || m->closing)
        return;
    mconn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->m = m;
    FK_UV_MUST(uv_tcp_init(m->loop, &c->tcp));
    FK_UV_MUST(uv_timer_init(m->loop, &c->idle));
    c->tcp.data = c->idle.data = c;
    c->handles = 2;
    c->next = m->conns;
    m->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)) {
        conn_close(c);
        return;
    }
    FK_UV_MUST(uv_timer_start(&c->idle, on_idle, IDLE_MS, 0));
}

static void listener_closed(uv_handle_t *h)
{
    struct fk_metrics *m = h->data;
    m->handles--;
    maybe_done(m);
}

int fk_metrics_start(fk_metrics **out, uv_loop_t *loop, const char *hostport,
                     fk_metrics_render render, void *ud, fk_err *err)
{
    *out = NULL;
    char host[128];
    int port;
    if (fk_hostport_split(hostport, host, sizeof host, &port))
        return fk_err_set(err, FK_EINVAL, "metrics listener '%s': expected HOST:PORT", hostport);
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr))
        return fk_err_set(err, FK_EINVAL, "metrics listener '%s': not an IP address", hostport);
    struct fk_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the metrics listener");
    m->loop = loop;
    m->render = render;
    m->ud = ud;
    FK_UV_MUST(uv_tcp_init(loop, &m->listener));
    m->listener.data = m;
    m->handles = 1;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    int rc = uv_tcp_bind(&m->listener, (struct sockaddr *)&addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&m->listener, 64, on_connection);
    if (!rc) /* the port actually bound (listen on :0 picks one) */
        rc = uv_tcp_getsockname(&m->listener, (struct sockaddr *)&bound, &blen);
    if (rc) {
        m->closing = 1;
        uv_close((uv_handle_t *)&m->listener, listener_closed);
        return fk_err_set(err, FK_ENET, "metrics listener %s: %s", hostport, uv_strerror(rc));
    }
    m->port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                          : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    *out = m;
    return FK_OK;
}

int fk_metrics_port(const fk_metrics *m)
{
    return m->port;
}

void fk_metrics_close(fk_metrics *m, void (*on_closed)(void *), void *ud)
{
    m->closing = 1;
    m->on_closed = on_closed;
    m->closed_ud = ud;
    for (mconn *c = m->conns; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&m->listener, listener_closed);
}


void fk_metrics_process(double *rss_bytes, double *cpu_seconds)
{
    long size, rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &rss_pages) != 2)
            rss_pages = 0;
        fclose(f);
    }
    *rss_bytes = (double)rss_pages * (double)sysconf(_SC_PAGESIZE);
    uv_rusage_t ru;
    *cpu_seconds = NAN;
    if (uv_getrusage(&ru) == 0)
        *cpu_seconds = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                       (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}
