#include "common/sys/memtrim.h"

#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"

static size_t rss_bytes(void)
{
    long pages = 0, size = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &pages) != 2)
            pages = 0;
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

size_t fk_memtrim_free_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.fordblks;
}

size_t fk_memtrim_now(void)
{
    size_t before = rss_bytes();
    malloc_trim(0);
    size_t after = rss_bytes();
    return before > after ? before - after : 0;
}

static void on_tick(uv_timer_t *h)
{
    fk_memtrim *t = h->data;
    /* free chunks stay counted after a trim: only what was freed since counts again */
    size_t free_b = fk_memtrim_free_bytes();
    if (free_b < t->base) /* the heap took some back into use */
        t->base = free_b;
    t->above = free_b - t->base >= t->threshold ? t->above + 1 : 0;
    if (t->above < 2) /* still in the spike, or nothing worth it */
        return;
    size_t got = fk_memtrim_now();
    t->trims++;
    t->released += got;
    t->above = 0;
    t->base = free_b;
    fk_log(FK_LOG_INFO, "memory_trimmed", "heap_free_kb=%zu rss_released_kb=%zu", free_b >> 10,
           got >> 10);
}

int fk_memtrim_start(fk_memtrim *t, uv_loop_t *loop, unsigned interval_ms, size_t threshold)
{
    *t = (fk_memtrim){.threshold = threshold};
    int rc = uv_timer_init(loop, &t->timer);
    if (rc)
        return rc;
    t->timer.data = t;
    uv_unref((uv_handle_t *)&t->timer); /* never keeps the loop alive on its own */
    return uv_timer_start(&t->timer, on_tick, interval_ms, interval_ms);
}

void fk_memtrim_stop(fk_memtrim *t)
{
    FK_UV_MUST(uv_timer_stop(&t->timer)); /* cannot fail on an initialised timer */
    if (!uv_is_closing((uv_handle_t *)&t->timer))
        uv_close((uv_handle_t *)&t->timer, NULL);
}
