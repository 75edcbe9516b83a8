/* After a load spike freed memory goes back to the system: a burst of small allocations
 * freed in the middle of the heap (a live block pins its top, as the server's long-lived
 * state does) stays resident until fk_memtrim gives it back; the idle timer does that once
 * the free heap stayed above its threshold for two ticks. Skipped where the allocator is not
 * glibc's (ASan's reports no free heap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/sys/memtrim.h"

enum { BLOCKS = 16384, BLOCK = 4000 }; /* 64 MB in small blocks, below mmap's threshold */

static size_t rss(void)
{
    long size = 0, pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &size, &pages), 2);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* The spike: BLOCKS blocks touched, a pin above them, all but the pin freed. */
static void *spike(void)
{
    static void *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        b[i] = malloc(BLOCK);
        assert_non_null(b[i]);
        memset(b[i], 1, BLOCK);
    }
    void *pin = malloc(64);
    assert_non_null(pin);
    for (int i = 0; i < BLOCKS; i++)
        free(b[i]);
    return pin;
}

static void trim_returns_a_spike(void **state)
{
    (void)state;
    void *pin = spike();
    if (fk_memtrim_free_bytes() < (size_t)BLOCKS * BLOCK / 2) {
        free(pin);
        skip(); /* not glibc's allocator */
    }
    size_t before = rss();
    size_t got = fk_memtrim_now();
    size_t after = rss();
    print_message("rss %zu kB -> %zu kB after the trim (released %zu kB)\n", before >> 10,
                  after >> 10, got >> 10);
    assert_true(got >= (size_t)BLOCKS * BLOCK / 2);
    assert_true(before - after >= (size_t)BLOCKS * BLOCK / 2);
    free(pin);
}

static fk_memtrim trim;

static void on_done(uv_timer_t *t)
{
    fk_memtrim_stop(&trim);
    uv_close((uv_handle_t *)t, NULL);
}

static void idle_timer_trims_after_the_spike(void **state)
{
    (void)state;
    void *pin = spike();
    if (fk_memtrim_free_bytes() < (size_t)BLOCKS * BLOCK / 2) {
        free(pin);
        skip();
    }
    size_t before = rss();
    uv_loop_t loop;
    uv_loop_init(&loop);
    assert_int_equal(fk_memtrim_start(&trim, &loop, 10, (size_t)8 << 20), 0);
    uv_timer_t done;
    uv_timer_init(&loop, &done);
    uv_timer_start(&done, on_done, 100, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(trim.trims, 1); /* once: the same free heap is not trimmed again */
    assert_true(trim.released >= (size_t)BLOCKS * BLOCK / 2);
    assert_true(before - rss() >= (size_t)BLOCKS * BLOCK / 2);
    free(pin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trim_returns_a_spike),
        cmocka_unit_test(idle_timer_trims_after_the_spike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
