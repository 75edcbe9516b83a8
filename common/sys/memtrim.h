/* Give freed heap memory back to the system after a load spike. glibc keeps what a burst of
 * connections freed (thousands of TLS handshakes: 14 -> 123 MB RSS that stays, no leak) in its
 * free lists; malloc_trim returns the free pages. A timer checks every interval how much of
 * the heap is free and trims once that stayed above a threshold for two ticks in a row (the
 * spike is over), so a busy server is not trimmed on every tick. */
#ifndef FK_MEMTRIM_H
#define FK_MEMTRIM_H

#include <stddef.h>
#include <uv.h>

typedef struct fk_memtrim {
    uv_timer_t timer;
    size_t threshold; /* free heap bytes worth a trim */
    size_t base;      /* free heap bytes at the last trim (free chunks stay counted) */
    int above;        /* consecutive ticks with threshold more free than base */
    unsigned long trims;
    size_t released;  /* RSS given back by the trims, bytes (as measured around them) */
} fk_memtrim;

/* Free heap bytes right now (glibc mallinfo2: fordblks). */
size_t fk_memtrim_free_bytes(void);
/* Trim now: the bytes of RSS it gave back (0 if none or unknown). */
size_t fk_memtrim_now(void);
/* Start the timer on loop (interval_ms > 0). */
int fk_memtrim_start(fk_memtrim *t, uv_loop_t *loop, unsigned interval_ms, size_t threshold);
/* Stop and close the timer handle (run the loop to finish closing). */
void fk_memtrim_stop(fk_memtrim *t);

#endif
