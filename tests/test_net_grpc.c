#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "common/net/grpc.h"
#include "common/net/limits.h"

static void timeout_units(void **state)
{
    (void)state;
    uint64_t ms;
    assert_int_equal(fk_grpc_timeout_parse("1H", 2, &ms), 0);
    assert_int_equal(ms, 3600000);
    assert_int_equal(fk_grpc_timeout_parse("2M", 2, &ms), 0);
    assert_int_equal(ms, 120000);
    assert_int_equal(fk_grpc_timeout_parse("3S", 2, &ms), 0);
    assert_int_equal(ms, 3000);
    assert_int_equal(fk_grpc_timeout_parse("250m", 4, &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(fk_grpc_timeout_parse("1500u", 5, &ms), 0);
    assert_int_equal(ms, 2); /* rounded up: never a shorter deadline than asked */
    assert_int_equal(fk_grpc_timeout_parse("1n", 2, &ms), 0);
    assert_int_equal(ms, 1);
    assert_int_equal(fk_grpc_timeout_parse("99999999S", 9, &ms), 0);
    assert_int_equal(ms, 99999999000ull);
}

static void timeout_malformed(void **state)
{
    (void)state;
    uint64_t ms;
    const char *bad[] = {"", "S", "10", "10x", "123456789S", "-1S", "1 S", "1s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(fk_grpc_timeout_parse(bad[i], strlen(bad[i]), &ms), -1);
}

static void timeout_format_roundtrip(void **state)
{
    (void)state;
    uint64_t in[] = {1, 999, 99999999, 100000000, 3600000000ull, 99999999ull * 3600000ull};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char buf[24];
        uint64_t ms;
        fk_grpc_timeout_format(in[i], buf, sizeof buf);
        assert_true(strlen(buf) <= 9);
        assert_int_equal(fk_grpc_timeout_parse(buf, strlen(buf), &ms), 0);
        uint64_t slack = in[i] / 1000 + 60000; /* coarser units round down by < one unit */
        assert_true(ms <= in[i] && ms + slack >= in[i]);
    }
}

static void message_percent_encoding(void **state)
{
    (void)state;
    char enc[64], dec[64];
    fk_grpc_message_encode("50% done\n\xc3\xa9", enc, sizeof enc);
    assert_string_equal(enc, "50%25 done%0A%C3%A9");
    fk_grpc_message_decode(enc, strlen(enc), dec, sizeof dec);
    assert_string_equal(dec, "50% done\n\xc3\xa9");
    fk_grpc_message_decode("bad %zz %4", 10, dec, sizeof dec); /* invalid escapes kept verbatim */
    assert_string_equal(dec, "bad %zz %4");
    fk_grpc_message_encode("%%%%", enc, 8); /* truncates on a whole escape */
    assert_string_equal(enc, "%25%25");
}

static void status_names(void **state)
{
    (void)state;
    assert_string_equal(fk_grpc_status_name(FK_GRPC_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
    assert_string_equal(fk_grpc_status_name(FK_GRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
    assert_string_equal(fk_grpc_status_name(99), "UNKNOWN");
    uint8_t p[5];
    fk_grpc_prefix_encode(p, 0x01020304);
    assert_memory_equal(p, "\x00\x01\x02\x03\x04", 5);
}

static void limits_from_params(void **state)
{
    (void)state;
    fk_net_limits l;
    fk_params p;
    fk_err err;
    fk_net_limits_default(&l);
    assert_int_equal(l.max_message, 32u << 20);
    fk_params_init(&p);
    fk_params_set(&p, "net.max_message", "1000");
    fk_params_set(&p, "net.max_streams", "4");
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_OK);
    assert_int_equal(l.max_message, 1000);
    assert_int_equal(l.max_streams, 4);
    fk_params_set(&p, "net.max_streams", "0");
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "net.max_streams"));
    fk_params_set(&p, "net.max_streams", "8");
    fk_params_set(&p, "net.max_message", "4294967296");
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "net.max_message"));
    fk_params_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timeout_units),         cmocka_unit_test(timeout_malformed),
        cmocka_unit_test(timeout_format_roundtrip), cmocka_unit_test(message_percent_encoding),
        cmocka_unit_test(status_names),          cmocka_unit_test(limits_from_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
