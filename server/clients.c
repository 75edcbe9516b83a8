#include "server/clients.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a: short printable keys, no adversary control over the slot that matters (a client
 * chooses neither its certificate name nor its session id freely: the CA and the server do). */
static size_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

void fk_clients_init(fk_clients *c)
{
    *c = (fk_clients){0};
}

void fk_clients_close(fk_clients *c)
{
    free(c->recs);
    free(c->by_id);
    free(c->by_session);
    free(c->queue);
    *c = (fk_clients){0};
}

static void put(int *table, size_t slots, const char *key, int idx)
{
    size_t m = slots - 1;
    for (size_t i = hash(key) & m;; i = (i + 1) & m)
        if (table[i] < 0) {
            table[i] = idx;
            return;
        }
}

/* Both tables anew from the records, with room for four times the records (so at least a
 * quarter of the slots are inserted before the next rebuild: amortised O(1) per insert). */
FK_CHECKRETURN static int rebuild(fk_clients *c, fk_err *err)
{
    size_t live = (size_t)c->n + 1, slots = 16;
    while (slots < 4 * live)
        slots *= 2;
    int *a = malloc(slots * sizeof *a), *b = malloc(slots * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return fk_err_set(err, FK_ENOMEM, "server out of memory indexing %d clients", c->n);
    }
    memset(a, 0xff, slots * sizeof *a); /* -1: empty */
    memset(b, 0xff, slots * sizeof *b);
    int with_session = 0;
    for (int i = 0; i < c->n; i++) {
        put(a, slots, c->recs[i].identity, i);
        if (c->recs[i].session[0]) {
            put(b, slots, c->recs[i].session, i);
            with_session++;
        }
    }
    /* n_sessions moves only where a record's session goes from "" to set (set_session) or
     * back (end_session), and rebuild runs before either writes: the count is exact here */
    assert(with_session == c->n_sessions);
    free(c->by_id);
    free(c->by_session);
    c->by_id = a;
    c->by_session = b;
    c->slots = slots;
    c->n_session_entries = c->n_sessions;
    return FK_OK;
}

static int find_id(const fk_clients *c, const char *identity)
{
    if (!c->slots)
        return -1;
    size_t m = c->slots - 1;
    for (size_t i = hash(identity) & m; c->by_id[i] >= 0; i = (i + 1) & m)
        if (!strcmp(c->recs[c->by_id[i]].identity, identity))
            return c->by_id[i];
    return -1;
}

int fk_clients_get(fk_clients *c, const char *identity, fk_client_rec **out, fk_err *err)
{
    int i = find_id(c, identity);
    if (i >= 0) {
        *out = &c->recs[i];
        return FK_OK;
    }
    if (strlen(identity) >= FK_IDENTITY_CAP)
        return fk_err_set(err, FK_EINVAL, "client identity longer than %d bytes",
                          FK_IDENTITY_CAP - 1);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        fk_client_rec *g = realloc(c->recs, (size_t)cap * sizeof *g);
        if (!g)
            return fk_err_set(err, FK_ENOMEM, "server out of memory for client %d", c->n + 1);
        c->recs = g;
        c->cap = cap;
    }
    if ((size_t)(c->n + 1) * 2 > c->slots) {
        int rc = rebuild(c, err); /* before the record exists: a failure leaves c as it was */
        if (rc)
            return rc;
    }
    fk_client_rec *r = &c->recs[c->n];
    *r = (fk_client_rec){.written = -INFINITY};
    snprintf(r->identity, sizeof r->identity, "%s", identity);
    put(c->by_id, c->slots, r->identity, c->n);
    c->n++;
    *out = r;
    return FK_OK;
}

fk_client_rec *fk_clients_find(const fk_clients *c, const char *identity)
{
    int i = find_id(c, identity);
    return i < 0 ? NULL : &c->recs[i];
}

fk_client_rec *fk_clients_by_session(const fk_clients *c, const char *session)
{
    if (!c->slots || !session[0])
        return NULL;
    size_t m = c->slots - 1;
    /* entries of replaced sessions stay until the next rebuild; they never match */
    for (size_t i = hash(session) & m; c->by_session[i] >= 0; i = (i + 1) & m)
        if (!strcmp(c->recs[c->by_session[i]].session, session))
            return &c->recs[c->by_session[i]];
    return NULL;
}

int fk_clients_set_session(fk_clients *c, fk_client_rec *r, const char *session, fk_err *err)
{
    if (strlen(session) >= sizeof r->session)
        return fk_err_set(err, FK_EINVAL, "session id longer than %zu bytes",
                          sizeof r->session - 1);
    int idx = (int)(r - c->recs);
    assert(idx >= 0 && idx < c->n); /* r came from fk_clients_get or a lookup of c */
    int had = r->session[0] != '\0';
    if ((size_t)(c->n_session_entries + 1) * 2 > c->slots) {
        int rc = rebuild(c, err);
        if (rc)
            return rc;
    }
    snprintf(r->session, sizeof r->session, "%s", session);
    put(c->by_session, c->slots, r->session, idx);
    c->n_session_entries++;
    c->n_sessions += !had;
    /* every live session has its entry; replaced ones keep theirs until the next rebuild */
    assert(c->n_sessions <= c->n && c->n_sessions <= c->n_session_entries);
    return FK_OK;
}

void fk_clients_end_session(fk_clients *c, fk_client_rec *r)
{
    if (!r->session[0])
        return;
    /* r had a session, so set_session counted it and nothing uncounted it since */
    assert(c->n_sessions > 0);
    r->session[0] = '\0'; /* its index entry stays until the next rebuild and never matches */
    c->n_sessions--;
}

int fk_clients_mark(fk_clients *c, fk_client_rec *r, double now, double interval, int force)
{
    r->seen = now;
    if (r->queued)
        return 1;
    if (!force && now - r->written < interval)
        return 0;
    if (c->n_queue == c->cap_queue) {
        int cap = c->cap_queue ? 2 * c->cap_queue : 64;
        int *g = realloc(c->queue, (size_t)cap * sizeof *g);
        if (!g)
            return 0; /* the next heartbeat queues it again */
        c->queue = g;
        c->cap_queue = cap;
    }
    c->queue[c->n_queue++] = (int)(r - c->recs);
    r->queued = 1;
    return 1;
}

void fk_clients_queue_done(fk_clients *c, int ok)
{
    if (!ok)
        return;
    for (int i = 0; i < c->n_queue; i++) {
        fk_client_rec *r = &c->recs[c->queue[i]];
        assert(r->queued); /* mark queues a record once, and only this loop unqueues it */
        r->written = r->seen;
        r->queued = 0;
    }
    c->n_queue = 0;
}

size_t fk_clients_bytes(const fk_clients *c)
{
    return (size_t)c->cap * sizeof *c->recs + 2 * c->slots * sizeof(int) +
           (size_t)c->cap_queue * sizeof(int);
}
