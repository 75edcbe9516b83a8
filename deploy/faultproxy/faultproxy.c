/* fedkern-faultproxy: a TCP proxy on libuv that injects network faults between
 * fedkern clients and a server, per connection and reproducibly from a seed:
 * dropped connections, latency and jitter, a bandwidth cap, a cut (RST) after N
 * bytes, a blackhole (no RST, no FIN: forwarding just stops), corrupted bytes,
 * and periodic cuts of every open connection. Connection i draws its faults
 * from fk_rng stream i of the seed, so a run with the same seed and the same
 * connection order injects the same faults. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/la/rng.h"
#include "deploy/faultproxy/rules.h"

enum { MAX_SCRIPT = FK_FAULT_MAX_RULES, QUEUE_HIGH = 4 << 20, READ_CHUNK = 64 << 10 };

typedef fk_fault fault;

typedef struct proxy proxy;
typedef struct conn conn;

/* A chunk waiting for its delivery time. */
typedef struct chunk {
    struct chunk *next;
    uint64_t due_ms;
    size_t len;
    int cut_after; /* reset the connection once this chunk is written */
    char data[];
} chunk;

/* One direction of a connection: bytes read from src are written to dst. */
typedef struct pipe_dir {
    conn *c;
    uv_tcp_t *src, *dst;
    uv_timer_t timer;
    chunk *head, *tail;
    size_t queued;
    uint64_t last_due;
    int eof;       /* src ended: shut dst down once the queue is empty */
    int shut;      /* shutdown of dst issued */
    int reading;
} pipe_dir;

struct conn {
    proxy *p;
    conn *prev, *next;
    uint64_t id;
    fault f;
    fk_rng rng;
    uv_tcp_t down, up; /* client side, server side */
    uv_connect_t connect;
    pipe_dir to_up, to_down;
    uint64_t bytes; /* both directions, as read */
    int open_handles;
    int dead;   /* closing: ignore everything */
    int holed;  /* blackhole reached */
    const char *fate;
};

struct proxy {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t cut_timer, stop_timer;
    uv_signal_t sigint, sigterm;
    struct sockaddr_storage target;
    uint64_t seed;
    fault dflt;
    fault script[MAX_SCRIPT];
    int n_script;
    double cut_every_ms;
    uint64_t next_id;
    conn *conns;
    uint64_t accepted, dropped, cut, holed;
};

typedef struct opt_doc {
    const char *key, *help;
} opt_doc;

static const opt_doc opts[] = {
    {"listen HOST:PORT", "address to accept on (127.0.0.1:0; the chosen port is logged)"},
    {"target HOST:PORT", "where to forward connections (required)"},
    {"seed N", "seed of the fault draws; connection i uses fk_rng stream i (1)"},
    {"drop P", "fraction of connections reset right after accept (0)"},
    {"latency-ms MS", "delay added to every chunk, each direction (0)"},
    {"jitter-ms MS", "plus a uniform 0..MS per chunk; byte order is kept (0)"},
    {"rate BYTES", "bandwidth cap in bytes/s, per connection and direction (0: none)"},
    {"cut-after N", "reset (RST) both sides after N bytes of the connection (0: never)"},
    {"blackhole-after N", "after N bytes forward nothing more, send no FIN and no RST (0: never)"},
    {"corrupt P", "probability that each forwarded byte has one bit flipped (0)"},
    {"cut-every-ms MS", "reset every open connection each MS milliseconds (0: never)"},
    {"script FILE", "per-connection faults: line i (cycled) holds key=value pairs of the keys"
                    " drop latency-ms jitter-ms rate cut-after blackhole-after corrupt for"
                    " connection i; missing keys take the flag values; '#' comments"},
    {"max-seconds S", "exit by itself after S seconds (0: run until SIGINT/SIGTERM)"},
    {"log-level LEVEL", "error, warn, info or debug (info)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-faultproxy --target HOST:PORT [--listen HOST:PORT] [faults]\n"
                 "\n"
                 "TCP fault-injection proxy for testing fedkern deployments: put it between\n"
                 "clients and fedkern-server and point the clients at --listen. Every fault is\n"
                 "drawn per connection from --seed, so runs are reproducible. Logs one\n"
                 "key=value line per connection fate on stderr; prints\n"
                 "'event=proxy_ready listen=ADDR port=PORT' once accepting.\n"
                 "\noptions:\n");
    for (int i = 0; opts[i].key; i++)
        fprintf(out, "  --%-22s %s\n", opts[i].key, opts[i].help);
    fprintf(out, "  --%-22s %s\n  --%-22s %s\n"
                 "\nexample: 30 %% of connections dropped, 500 ms latency, cut every 2 s:\n"
                 "  fedkern-faultproxy --listen 127.0.0.1:7444 --target 127.0.0.1:7443 \\\n"
                 "      --drop 0.3 --latency-ms 500 --cut-every-ms 2000 --seed 7\n",
            "help", "this text", "version", "print the version");
}

static uint64_t now_ms(proxy *p)
{
    return uv_now(p->loop);
}

/* ---- address parsing ---- */

FK_CHECKRETURN static int parse_addr(const char *text, struct sockaddr_storage *out, fk_err *err)
{
    char host[128];
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || (size_t)(colon - text) >= sizeof host)
        return fk_err_set(err, FK_EINVAL, "address '%s' is not HOST:PORT; e.g. 127.0.0.1:7443",
                          text);
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return fk_err_set(err, FK_EINVAL, "port of '%s' is not 0..65535", text);
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        if (!uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)out))
            return FK_OK;
    } else if (!strcmp(host, "localhost")) {
        if (!uv_ip4_addr("127.0.0.1", (int)port, (struct sockaddr_in *)out))
            return FK_OK;
    } else if (!uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out)) {
        return FK_OK;
    }
    return fk_err_set(err, FK_EINVAL, "host of '%s' is not an IPv4 or [IPv6] literal", text);
}

/* ---- fault settings ---- */

FK_CHECKRETURN static int load_script(proxy *px, const char *path, fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fk_err_set(err, FK_EIO, "cannot open script %s: %s", path, strerror(errno));
    enum { MAX_SCRIPT_BYTES = 1 << 20 };
    char *text = malloc(MAX_SCRIPT_BYTES);
    size_t len = text ? fread(text, 1, MAX_SCRIPT_BYTES, f) : 0;
    int big = text && len == MAX_SCRIPT_BYTES;
    fclose(f);
    if (!text)
        return fk_err_set(err, FK_ENOMEM, "out of memory reading %s", path);
    int rc = big ? fk_err_set(err, FK_EINVAL, "script %s is over 1 MiB", path)
                 : fk_fault_parse_script(text, len, &px->dflt, px->script, MAX_SCRIPT,
                                         &px->n_script, path, err);
    free(text);
    return rc;
}

/* ---- connection teardown ---- */

static void free_chunks(pipe_dir *d)
{
    while (d->head) {
        chunk *k = d->head;
        d->head = k->next;
        free(k);
    }
    d->tail = NULL;
    d->queued = 0;
}

static void conn_handle_gone(conn *c)
{
    if (--c->open_handles > 0)
        return;
    free_chunks(&c->to_up);
    free_chunks(&c->to_down);
    free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    conn_handle_gone(h->data);
}

static void on_timer_closed(uv_handle_t *h)
{
    conn_handle_gone(((pipe_dir *)h->data)->c);
}

static void unlink_conn(conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (c->p->conns == c)
        c->p->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Close everything; reset = 1 sends RST on both sockets (a cut), else FIN. */
static void conn_close(conn *c, int reset, const char *fate)
{
    if (c->dead)
        return;
    c->dead = 1;
    if (fate)
        c->fate = fate;
    fk_log(FK_LOG_INFO, "conn_closed", "conn=%" PRIu64 " fate=%s bytes=%" PRIu64, c->id, c->fate,
           c->bytes);
    unlink_conn(c);
    uv_handle_t *hs[] = {(uv_handle_t *)&c->down, (uv_handle_t *)&c->up,
                         (uv_handle_t *)&c->to_up.timer, (uv_handle_t *)&c->to_down.timer};
    for (int i = 0; i < 4; i++) {
        if (!hs[i]->data)
            continue; /* never initialised */
        if (uv_is_closing(hs[i]))
            continue;
        if (reset && hs[i]->type == UV_TCP && uv_tcp_close_reset((uv_tcp_t *)hs[i],
                                                                 on_handle_closed) == 0)
            continue;
        uv_close(hs[i], hs[i]->type == UV_TIMER ? on_timer_closed : on_handle_closed);
    }
}

/* ---- forwarding ---- */

static void pump(pipe_dir *d);

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    buf->base = malloc(READ_CHUNK);
    buf->len = buf->base ? READ_CHUNK : 0;
}

typedef struct wreq {
    uv_write_t req;
    pipe_dir *d;
    chunk *k;
} wreq;

static void on_written(uv_write_t *req, int status)
{
    wreq *w = (wreq *)req;
    pipe_dir *d = w->d;
    int cut = w->k->cut_after;
    free(w->k);
    free(w);
    if (status == UV_ECANCELED)
        return; /* the connection is closing; d may be gone */
    if (d->c->dead)
        return;
    if (status < 0) {
        conn_close(d->c, 1, "write_error");
        return;
    }
    if (cut) {
        d->c->p->cut++;
        conn_close(d->c, 1, "cut_after");
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    free(req);
}

static void start_reading(pipe_dir *d);

static void on_timer(uv_timer_t *t)
{
    pump(t->data);
}

/* Write every chunk whose time has come; arm the timer for the next one. */
static void pump(pipe_dir *d)
{
    conn *c = d->c;
    if (c->dead)
        return;
    uint64_t now = now_ms(c->p);
    while (d->head && d->head->due_ms <= now) {
        chunk *k = d->head;
        d->head = k->next;
        if (!d->head)
            d->tail = NULL;
        d->queued -= k->len;
        wreq *w = malloc(sizeof *w);
        if (!w) {
            free(k);
            conn_close(c, 1, "out_of_memory");
            return;
        }
        w->d = d;
        w->k = k;
        uv_buf_t b = uv_buf_init(k->data, (unsigned)k->len);
        if (uv_write(&w->req, (uv_stream_t *)d->dst, &b, 1, on_written) < 0) {
            free(k);
            free(w);
            conn_close(c, 1, "write_error");
            return;
        }
        if (c->dead)
            return;
    }
    if (d->head) {
        FK_UV_MUST(uv_timer_start(&d->timer, on_timer, d->head->due_ms - now, 0));
    } else if (d->eof && !d->shut) {
        d->shut = 1;
        uv_shutdown_t *s = malloc(sizeof *s);
        if (!s || uv_shutdown(s, (uv_stream_t *)d->dst, on_shutdown) < 0)
            free(s);
    }
    if (!d->reading && !d->eof && d->queued < QUEUE_HIGH / 2)
        start_reading(d);
    /* both directions ended and flushed: a clean close */
    if (c->to_up.shut && c->to_down.shut && !c->to_up.head && !c->to_down.head)
        conn_close(c, 0, "closed");
}

/* Queue len bytes with the connection's delay, rate and corruption. */
static int enqueue(pipe_dir *d, const char *data, size_t len, int cut_after)
{
    conn *c = d->c;
    chunk *k = malloc(sizeof *k + len);
    if (!k)
        return FK_ENOMEM;
    memcpy(k->data, data, len);
    if (c->f.corrupt > 0)
        for (size_t i = 0; i < len; i++)
            if (fk_rng_uniform(&c->rng) < c->f.corrupt)
                k->data[i] ^= (char)(1u << fk_rng_below(&c->rng, 8));
    uint64_t now = now_ms(c->p);
    double delay = c->f.latency_ms;
    if (c->f.jitter_ms > 0)
        delay += c->f.jitter_ms * fk_rng_uniform(&c->rng);
    uint64_t due = now + (uint64_t)delay;
    if (c->f.rate > 0) {
        /* the link is busy until last_due; this chunk needs len/rate more */
        uint64_t start = d->last_due > now ? d->last_due : now;
        uint64_t send = start + (uint64_t)(1000.0 * (double)len / c->f.rate);
        due = send > due ? send : due;
    }
    if (due < d->last_due)
        due = d->last_due;
    d->last_due = due;
    k->due_ms = due;
    k->len = len;
    k->cut_after = cut_after;
    k->next = NULL;
    if (d->tail)
        d->tail->next = k;
    else
        d->head = k;
    d->tail = k;
    d->queued += len;
    return FK_OK;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn *c = s->data;
    pipe_dir *d = (uv_tcp_t *)s == &c->down ? &c->to_up : &c->to_down;
    if (c->dead || n == 0) {
        free(buf->base);
        return;
    }
    if (n < 0) {
        free(buf->base);
        if (c->holed)
            return; /* blackhole: the other side hears nothing */
        if (n != UV_EOF) {
            conn_close(c, 1, "peer_reset");
            return;
        }
        FK_UV_MUST(uv_read_stop(s));
        d->reading = 0;
        d->eof = 1;
        pump(d);
        return;
    }
    if (c->holed) {
        free(buf->base);
        return; /* swallowed */
    }
    size_t len = (size_t)n;
    int cut = 0;
    if (c->f.hole_after && c->bytes + len >= c->f.hole_after) {
        len = (size_t)(c->f.hole_after - c->bytes);
        c->holed = 1;
        c->fate = "blackhole";
        c->p->holed++;
        fk_log(FK_LOG_INFO, "conn_blackholed", "conn=%" PRIu64 " bytes=%" PRIu64, c->id,
               c->f.hole_after);
    }
    if (!c->holed && c->f.cut_after && c->bytes + len >= c->f.cut_after) {
        len = (size_t)(c->f.cut_after - c->bytes);
        cut = 1;
    }
    c->bytes += len;
    if (len > 0 || cut) {
        if (enqueue(d, buf->base, len, cut)) {
            free(buf->base);
            conn_close(c, 1, "out_of_memory");
            return;
        }
    }
    free(buf->base);
    if (cut) {
        FK_UV_MUST(uv_read_stop((uv_stream_t *)c->to_up.src));
        FK_UV_MUST(uv_read_stop((uv_stream_t *)c->to_down.src));
        c->to_up.reading = c->to_down.reading = 0;
    } else if (d->queued >= QUEUE_HIGH) {
        FK_UV_MUST(uv_read_stop(s)); /* back-pressure: resume once the queue drains */
        d->reading = 0;
    }
    pump(d);
}

static void start_reading(pipe_dir *d)
{
    if (uv_read_start((uv_stream_t *)d->src, on_alloc, on_read) == 0)
        d->reading = 1;
}

static void on_upstream(uv_connect_t *req, int status)
{
    conn *c = req->data;
    if (c->dead)
        return;
    if (status < 0) {
        fk_log(FK_LOG_WARN, "target_unreachable", "conn=%" PRIu64 " why=\"%s\"", c->id,
               uv_strerror(status));
        conn_close(c, 1, "target_unreachable");
        return;
    }
    FK_UV_MUST(uv_tcp_nodelay(&c->up, 1));
    start_reading(&c->to_up);
    start_reading(&c->to_down);
}

static void init_pipe(conn *c, pipe_dir *d, uv_tcp_t *src, uv_tcp_t *dst)
{
    d->c = c;
    d->src = src;
    d->dst = dst;
    FK_UV_MUST(uv_timer_init(c->p->loop, &d->timer));
    d->timer.data = d;
    c->open_handles++;
}

/* The fault of connection id: the script line id (cycled), else the flags. */
static const fault *fault_of(const proxy *px, uint64_t id)
{
    return px->n_script ? &px->script[id % (uint64_t)px->n_script] : &px->dflt;
}

static void on_accept(uv_stream_t *server, int status)
{
    proxy *px = server->data;
    if (status < 0)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->p = px;
    c->id = px->next_id++;
    c->f = *fault_of(px, c->id);
    fk_rng_init(&c->rng, px->seed, c->id);
    c->fate = "open";
    FK_UV_MUST(uv_tcp_init(px->loop, &c->down));
    c->down.data = c;
    c->open_handles = 1;
    if (uv_accept(server, (uv_stream_t *)&c->down) < 0) {
        uv_close((uv_handle_t *)&c->down, on_handle_closed);
        return;
    }
    px->accepted++;
    c->next = px->conns;
    if (px->conns)
        px->conns->prev = c;
    px->conns = c;
    /* the drop draw comes first so the other draws do not depend on it */
    if (c->f.drop > 0 && fk_rng_uniform(&c->rng) < c->f.drop) {
        px->dropped++;
        conn_close(c, 1, "dropped");
        return;
    }
    FK_UV_MUST(uv_tcp_nodelay(&c->down, 1));
    FK_UV_MUST(uv_tcp_init(px->loop, &c->up));
    c->up.data = c;
    c->open_handles++;
    init_pipe(c, &c->to_up, &c->down, &c->up);
    init_pipe(c, &c->to_down, &c->up, &c->down);
    c->connect.data = c;
    if (uv_tcp_connect(&c->connect, &c->up, (const struct sockaddr *)&px->target, on_upstream) < 0)
        conn_close(c, 1, "target_unreachable");
    fk_log(FK_LOG_DEBUG, "conn_accepted", "conn=%" PRIu64, c->id);
}

static void on_cut_timer(uv_timer_t *t)
{
    proxy *px = t->data;
    int n = 0;
    while (px->conns) {
        px->cut++;
        conn_close(px->conns, 1, "periodic_cut");
        n++;
    }
    if (n)
        fk_log(FK_LOG_INFO, "periodic_cut", "connections=%d", n);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void stop_proxy(proxy *px, const char *why)
{
    fk_log(FK_LOG_INFO, "proxy_stopping",
           "why=%s accepted=%" PRIu64 " dropped=%" PRIu64 " cut=%" PRIu64 " blackholed=%" PRIu64,
           why, px->accepted, px->dropped, px->cut, px->holed);
    while (px->conns)
        conn_close(px->conns, 0, "proxy_exit");
    uv_close((uv_handle_t *)&px->listener, NULL);
    uv_close((uv_handle_t *)&px->cut_timer, NULL);
    uv_close((uv_handle_t *)&px->stop_timer, NULL);
    uv_close((uv_handle_t *)&px->sigint, NULL);
    uv_close((uv_handle_t *)&px->sigterm, NULL);
}

static void on_stop_timer(uv_timer_t *t)
{
    stop_proxy(t->data, "max_seconds");
}

static void on_signal(uv_signal_t *s, int signum)
{
    stop_proxy(s->data, signum == SIGINT ? "sigint" : "sigterm");
}

FK_CHECKRETURN static int configure(proxy *px, fk_params *p, const char **listen, double *max_s,
                                    fk_err *err)
{
    const char *target = fk_params_get(p, "target");
    if (!target)
        return fk_err_set(err, FK_EINVAL, "--target HOST:PORT is required; see --help");
    int rc = parse_addr(target, &px->target, err);
    *listen = fk_params_str(p, "listen", "127.0.0.1:0");
    if (!rc)
        rc = fk_params_u64(p, "seed", 1, &px->seed, err);
    if (!rc)
        rc = fk_fault_read(p, &px->dflt, err);
    if (!rc)
        rc = fk_params_double(p, "cut-every-ms", 0, 0, 86400000, &px->cut_every_ms, err);
    if (!rc)
        rc = fk_params_double(p, "max-seconds", 0, 0, 86400 * 365, max_s, err);
    const char *level = fk_params_str(p, "log-level", "info");
    int lv = fk_log_level_from_name(level);
    if (!rc && lv < 0)
        rc = fk_err_set(err, FK_EINVAL, "--log-level '%s': use error, warn, info or debug", level);
    if (!rc)
        fk_log_set_level(lv);
    const char *script = fk_params_get(p, "script");
    if (!rc && script)
        rc = load_script(px, script, err);
    const char *extra = rc ? NULL : fk_params_unused(p);
    if (extra)
        rc = fk_err_set(err, FK_EINVAL, "unknown option --%s; see --help", extra);
    return rc;
}

FK_CHECKRETURN static int run(proxy *px, const char *listen, double max_s, fk_err *err)
{
    struct sockaddr_storage la;
    int rc = parse_addr(listen, &la, err);
    if (rc)
        return rc;
    px->loop = uv_default_loop();
    FK_UV_MUST(uv_tcp_init(px->loop, &px->listener));
    px->listener.data = px;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    int r = uv_tcp_bind(&px->listener, (const struct sockaddr *)&la, 0);
    if (!r)
        r = uv_listen((uv_stream_t *)&px->listener, 1024, on_accept);
    if (!r) /* the port actually bound, for the ready line */
        r = uv_tcp_getsockname(&px->listener, (struct sockaddr *)&bound, &blen);
    if (r < 0) {
        uv_close((uv_handle_t *)&px->listener, NULL);
        FK_UV_MUST(uv_run(px->loop, UV_RUN_DEFAULT));
        FK_UV_MUST(uv_loop_close(px->loop));
        return fk_err_set(err, FK_EIO, "cannot listen on %s: %s", listen, uv_strerror(r));
    }
    char host[64] = "";
    int port = 0;
    if (bound.ss_family == AF_INET6) {
        FK_UV_MUST(uv_ip6_name((struct sockaddr_in6 *)&bound, host, sizeof host));
        port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    } else {
        FK_UV_MUST(uv_ip4_name((struct sockaddr_in *)&bound, host, sizeof host));
        port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }
    FK_UV_MUST(uv_timer_init(px->loop, &px->cut_timer));
    px->cut_timer.data = px;
    if (px->cut_every_ms > 0)
        FK_UV_MUST(uv_timer_start(&px->cut_timer, on_cut_timer, (uint64_t)px->cut_every_ms,
                                  (uint64_t)px->cut_every_ms));
    FK_UV_MUST(uv_timer_init(px->loop, &px->stop_timer));
    px->stop_timer.data = px;
    if (max_s > 0)
        FK_UV_MUST(uv_timer_start(&px->stop_timer, on_stop_timer, (uint64_t)(max_s * 1000), 0));
    /* Without a handler the signal's default action ends the proxy at once: logged, not fatal. */
    int s = uv_signal_init(px->loop, &px->sigint);
    px->sigint.data = px;
    if (!s)
        s = uv_signal_start(&px->sigint, on_signal, SIGINT);
    int t = uv_signal_init(px->loop, &px->sigterm);
    px->sigterm.data = px;
    if (!t)
        t = uv_signal_start(&px->sigterm, on_signal, SIGTERM);
    if (s || t)
        fk_log(FK_LOG_ERROR, "signals_unavailable", "error=\"%s\"", uv_strerror(s ? s : t));
    fk_log(FK_LOG_INFO, "proxy_ready", "listen=%s:%d port=%d seed=%" PRIu64, host, port, port,
           px->seed);
    FK_UV_MUST(uv_run(px->loop, UV_RUN_DEFAULT));
    uv_walk(px->loop, close_walk, NULL);
    FK_UV_MUST(uv_run(px->loop, UV_RUN_DEFAULT));
    FK_UV_MUST(uv_loop_close(px->loop));
    return FK_OK;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("fedkern-faultproxy %s\n", FK_VERSION);
            return 0;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int rest = argc - 1;
    if (fk_params_parse_args(&p, &rest, argv + 1, &err)) {
        fprintf(stderr, "fedkern-faultproxy: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    if (rest > 0) {
        fprintf(stderr, "fedkern-faultproxy: unexpected argument '%s'; see --help\n", argv[1]);
        fk_params_close(&p);
        return 2;
    }
    proxy px;
    memset(&px, 0, sizeof px);
    const char *listen = "127.0.0.1:0";
    double max_s = 0;
    int rc = configure(&px, &p, &listen, &max_s, &err);
    if (rc) {
        fprintf(stderr, "fedkern-faultproxy: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    rc = run(&px, listen, max_s, &err);
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern-faultproxy: %s\n", err.msg);
        return 1;
    }
    return 0;
}
