/* HOST:PORT splitting shared by the client, the CLI and the metrics listener:
 * IPv4, names and bracketed IPv6, and every malformed form refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/net/hostport.h"

static void splits(void **state)
{
    (void)state;
    char host[32];
    int port = -1;
    assert_int_equal(fk_hostport_split("127.0.0.1:7443", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 7443);
    assert_int_equal(fk_hostport_split("[::1]:0", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 0);
    assert_int_equal(fk_hostport_split("server.example:65535", host, sizeof host, &port), 0);
    assert_string_equal(host, "server.example");
    assert_int_equal(port, 65535);
}

static void refuses(void **state)
{
    (void)state;
    char host[8];
    int port = 5;
    const char *bad[] = {"nocolon", ":80", "[]:80", "h:-1", "h:65536", "h:80x",
                         "toolonghost:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(fk_hostport_split(bad[i], host, sizeof host, &port), -1);
    assert_int_equal(port, 5); /* untouched on failure */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splits),
        cmocka_unit_test(refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
