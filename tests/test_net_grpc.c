#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/net/grpc.h"
#include "common/net/grpc_server.h"
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
    /* cut after a space: no trailing whitespace, which HTTP/2 peers reset the stream for */
    fk_grpc_message_encode("restore the latest backup", enc, 12);
    assert_string_equal(enc, "restore the");
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
    assert_int_equal(fk_params_set(&p, "net.max_message", "1000"), FK_OK);
    assert_int_equal(fk_params_set(&p, "net.max_streams", "4"), FK_OK);
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_OK);
    assert_int_equal(l.max_message, 1000);
    assert_int_equal(l.max_streams, 4);
    assert_int_equal(fk_params_set(&p, "net.max_streams", "0"), FK_OK);
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "net.max_streams"));
    assert_int_equal(fk_params_set(&p, "net.max_streams", "8"), FK_OK);
    assert_int_equal(fk_params_set(&p, "net.max_message", "4294967296"), FK_OK);
    assert_int_equal(fk_net_limits_from_params(&l, &p, "net", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "net.max_message"));
    fk_params_close(&p);
}

/* ------------------------------------------- a raw HTTP/2 client's bytes */

static size_t frame(uint8_t *out, uint8_t type, uint8_t flags, uint32_t sid, const uint8_t *p,
                    size_t len)
{
    out[0] = (uint8_t)(len >> 16), out[1] = (uint8_t)(len >> 8), out[2] = (uint8_t)len;
    out[3] = type, out[4] = flags;
    out[5] = (uint8_t)(sid >> 24), out[6] = (uint8_t)(sid >> 16), out[7] = (uint8_t)(sid >> 8);
    out[8] = (uint8_t)sid;
    if (len)
        memcpy(out + 9, p, len);
    return 9 + len;
}

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer, (void)deadline, (void)ud;
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len);
}

#define HNV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE}

/* One unary call whose message prefix carries `flag`; the status the server answered, as the
 * name its debug log prints (the raw hook discards the bytes it sends). */
static void status_for_flag(uint8_t flag, char *status, size_t cap)
{
    uint8_t in[1024];
    size_t n = 0;
    memcpy(in, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    n = 24;
    n += frame(in + n, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    nghttp2_hd_deflater *d;
    assert_int_equal(nghttp2_hd_deflate_new(&d, 4096), 0);
    nghttp2_nv nv[] = {HNV(":method", "POST"), HNV(":scheme", "http"),
                       HNV(":path", "/fktest.Echo/Echo"), HNV(":authority", "x"),
                       HNV("content-type", "application/grpc"), HNV("te", "trailers"),
                       HNV("grpc-encoding", "gzip")};
    uint8_t block[256];
    ssize_t bl = nghttp2_hd_deflate_hd(d, block, sizeof block, nv, sizeof nv / sizeof *nv);
    nghttp2_hd_deflate_del(d);
    assert_true(bl > 0);
    n += frame(in + n, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, block, (size_t)bl);
    const uint8_t msg[8] = {flag, 0, 0, 0, 3, 'a', 'b', 'c'};
    n += frame(in + n, NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, msg, sizeof msg);

    uv_loop_t loop;
    uv_loop_init(&loop);
    fk_grpc_server_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    fk_grpc_server *srv;
    fk_err err;
    assert_int_equal(fk_grpc_server_init(&srv, &loop, &cfg, &err), FK_OK);
    assert_int_equal(fk_grpc_server_handle(srv, "/fktest.Echo/Echo", on_echo, NULL, &err), FK_OK);
    fk_tls_peer peer = {.cn = "t", .san = "t", .addr = "raw", .id = "t"};
    /* the answer's status is in the debug log on stderr: catch it in a file */
    char path[] = "/tmp/fk-grpc-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    int level = fk_log_level();
    fk_log_set_level(FK_LOG_DEBUG);
    fk_grpc_server_feed_raw(srv, &peer, in, n);
    fk_log_set_level(level);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fk_grpc_server_close(srv, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    char log[4096] = "";
    ssize_t got = pread(fd, log, sizeof log - 1, 0);
    close(fd);
    unlink(path);
    log[got > 0 ? got : 0] = '\0';
    const char *st = strstr(log, "status=");
    snprintf(status, cap, "%s", st ? st + 7 : "none");
    status[strcspn(status, " ")] = '\0';
}

/* gRPC: a compressed message in an encoding the server does not support is UNIMPLEMENTED (it
 * was INTERNAL); a prefix flag that is neither 0 nor 1 stays INTERNAL. */
static void compressed_message_is_unimplemented(void **state)
{
    (void)state;
    char status[64];
    status_for_flag(1, status, sizeof status);
    assert_string_equal(status, "UNIMPLEMENTED");
    status_for_flag(7, status, sizeof status);
    assert_string_equal(status, "INTERNAL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timeout_units),         cmocka_unit_test(timeout_malformed),
        cmocka_unit_test(timeout_format_roundtrip), cmocka_unit_test(message_percent_encoding),
        cmocka_unit_test(status_names),          cmocka_unit_test(limits_from_params),
        cmocka_unit_test(compressed_message_is_unimplemented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
