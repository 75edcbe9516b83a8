/* The clients the service has seen, indexed by identity and by session id, so a Heartbeat
 * (find the session, note the client seen) costs the same at 10 clients as at 10,000: the
 * linear scans this replaces made every call O(K), the whole heartbeat load O(K²).
 *
 * A record per identity, never removed (an identity that came once is a client of this
 * server); a new Join replaces the record's session. The session index is rebuilt from the
 * records once replaced sessions outnumber the live ones, so it needs no tombstones.
 * last_seen writes are batched: fk_clients_mark queues a record whose stored last_seen is
 * older than the write interval; the service stores the queue in one transaction a tick. */
#ifndef FK_SERVER_CLIENTS_H
#define FK_SERVER_CLIENTS_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/net/certs.h"

typedef struct fk_client_rec {
    char identity[FK_IDENTITY_CAP];
    char session[33]; /* 128 random bits in hex; "" before the first Join */
    int queued;       /* on the last_seen write queue */
    int gone;         /* its session ended (expired, or Leave) and it has made no call since:
                       * the round engine plans it as a dropout (fk_engine_set_presence) */
    int polls;        /* PullTask calls of it parked now: a client waiting on one is alive */
    double written;   /* last_seen last stored (-INFINITY: never) */
    double seen;      /* last_seen to store */
} fk_client_rec;

typedef struct fk_clients {
    fk_client_rec *recs;
    int n, cap;
    int *by_id, *by_session; /* open addressing, record index or -1; slots a power of two */
    size_t slots;
    int n_session_entries;   /* entries in by_session, replaced sessions included */
    int n_sessions;          /* records with a session */
    int *queue;              /* records whose last_seen waits for a write */
    int n_queue, cap_queue;
} fk_clients;

void fk_clients_init(fk_clients *c);
void fk_clients_close(fk_clients *c);
/* The record of identity, created when absent (FK_ENOMEM then possible). Record pointers are
 * valid until the next call that may create one. */
FK_CHECKRETURN int fk_clients_get(fk_clients *c, const char *identity, fk_client_rec **out,
                                  fk_err *err);
/* The record of identity, or NULL (never creates one). */
fk_client_rec *fk_clients_find(const fk_clients *c, const char *identity);
/* The record whose current session is session, or NULL. */
fk_client_rec *fk_clients_by_session(const fk_clients *c, const char *session);
/* Give r the session (32 hex digits), replacing its old one; FK_OK or FK_ENOMEM. */
FK_CHECKRETURN int fk_clients_set_session(fk_clients *c, fk_client_rec *r, const char *session,
                                          fk_err *err);
/* End r's session (Leave, or no heartbeat for too long): a Heartbeat with it is told to Join. */
void fk_clients_end_session(fk_clients *c, fk_client_rec *r);
/* r was seen at now: queue its last_seen write when force or the stored one is at least
 * interval seconds old. Returns 1 if queued (or already queued). */
int fk_clients_mark(fk_clients *c, fk_client_rec *r, double now, double interval, int force);
/* Records index i of the write queue, and clearing it (after the writes). */
static inline fk_client_rec *fk_clients_queued(const fk_clients *c, int i)
{
    return &c->recs[c->queue[i]];
}
/* Take the queue as written (written = seen) or, with ok == 0, keep it for the next try. */
void fk_clients_queue_done(fk_clients *c, int ok);
/* Bytes held by the index (records, both tables, the queue). */
size_t fk_clients_bytes(const fk_clients *c);

#endif
