/* The client index (server/clients.c): lookups by identity and by session id stay right
 * across regrowth and thousands of session replacements (the tables are rebuilt without
 * tombstones), a replaced session no longer matches, and last_seen writes are queued once
 * per interval and kept on a failed write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "server/clients.h"

static void session_of(char *out, int client, int gen)
{
    snprintf(out, 33, "%08x%08x%016x", (unsigned)client * 2654435761u, (unsigned)gen, client);
}

static void test_many_clients_and_rejoins(void **state)
{
    (void)state;
    enum { N = 3000, REJOINS = 4 };
    fk_clients c;
    fk_clients_init(&c);
    fk_err err;
    char id[32], sess[33];
    for (int gen = 0; gen < REJOINS; gen++)
        for (int i = 0; i < N; i++) {
            fk_client_rec *r;
            snprintf(id, sizeof id, "client%d", i);
            assert_int_equal(fk_clients_get(&c, id, &r, &err), FK_OK);
            assert_string_equal(r->identity, id);
            session_of(sess, i, gen);
            assert_int_equal(fk_clients_set_session(&c, r, sess, &err), FK_OK);
        }
    assert_int_equal(c.n, N);
    assert_int_equal(c.n_sessions, N);
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "client%d", i);
        session_of(sess, i, REJOINS - 1);
        fk_client_rec *r = fk_clients_by_session(&c, sess);
        assert_non_null(r);
        assert_string_equal(r->identity, id);
        session_of(sess, i, 0); /* replaced: gone */
        assert_null(fk_clients_by_session(&c, sess));
        assert_ptr_equal(fk_clients_find(&c, id), r); /* found, never created */
    }
    assert_null(fk_clients_find(&c, "client-never-seen"));
    assert_int_equal(c.n, N);
    assert_null(fk_clients_by_session(&c, ""));
    assert_null(fk_clients_by_session(&c, "ffffffffffffffffffffffffffffffff"));
    /* the index stays proportional to the clients, not to the joins */
    assert_true(fk_clients_bytes(&c) < (size_t)N * 400);
    fk_clients_close(&c);
}

static void test_seen_queue(void **state)
{
    (void)state;
    fk_clients c;
    fk_clients_init(&c);
    fk_err err;
    fk_client_rec *a, *b;
    assert_int_equal(fk_clients_get(&c, "a", &a, &err), FK_OK);
    assert_int_equal(fk_clients_get(&c, "b", &b, &err), FK_OK);
    a = &c.recs[0]; /* b's creation may have moved the records */
    assert_true(isinf(a->written) && a->written < 0);
    assert_int_equal(fk_clients_mark(&c, a, 100.0, 30.0, 0), 1); /* never written: due */
    assert_int_equal(fk_clients_mark(&c, a, 101.0, 30.0, 0), 1); /* queued once */
    assert_int_equal(c.n_queue, 1);
    fk_clients_queue_done(&c, 0); /* a failed write keeps the queue */
    assert_int_equal(c.n_queue, 1);
    fk_clients_queue_done(&c, 1);
    assert_int_equal(c.n_queue, 0);
    assert_true(a->written == 101.0);
    assert_int_equal(fk_clients_mark(&c, a, 120.0, 30.0, 0), 0); /* written 19 s ago */
    assert_int_equal(fk_clients_mark(&c, a, 120.0, 30.0, 1), 1); /* forced (Join, Leave) */
    assert_int_equal(fk_clients_mark(&c, b, 120.0, 30.0, 0), 1);
    assert_int_equal(c.n_queue, 2);
    assert_string_equal(fk_clients_queued(&c, 1)->identity, "b");
    char longid[FK_IDENTITY_CAP + 8];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_int_equal(fk_clients_get(&c, longid, &a, &err), FK_EINVAL);
    fk_clients_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_clients_and_rejoins),
        cmocka_unit_test(test_seen_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
