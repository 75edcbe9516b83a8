/* Work off the event loop: heavy steps of the server (a phase's aggregation, the method's
 * solves, the checkpoint encode, a prediction) run on libuv's thread pool, one at a time and
 * in the order they were handed in, while the loop keeps answering every call.
 *
 * One at a time: the method ops call BLAS/LAPACK, and OpenBLAS is safe for calls from the loop
 * plus one more thread; a FIFO also keeps the order of the jobs' steps that of their arrival.
 * An item is owned by the caller (embedded in its own struct); run() touches only what the
 * item owns, done() runs back on the loop once run() returned. A pending item keeps the loop
 * alive (uv_run returns only after the last done()), so a server stopping with SIGTERM
 * finishes the work in flight before it exits. */
#ifndef FK_OFFLOAD_H
#define FK_OFFLOAD_H

#include <stdint.h>
#include <uv.h>

typedef struct fk_offload fk_offload;
typedef struct fk_offload_item fk_offload_item;

struct fk_offload_item {
    void (*run)(fk_offload_item *it);  /* on a worker thread */
    void (*done)(fk_offload_item *it); /* on the loop; may free the item */
    /* private */
    uv_work_t req;
    fk_offload *o;
    fk_offload_item *next;
    double queued, started, ended; /* monotonic seconds: handed in, run() began and ended */
};

struct fk_offload {
    uv_loop_t *loop;
    fk_offload_item *head, *tail; /* waiting for the running one */
    fk_offload_item *running;
    int pending; /* waiting + running */
    /* counters (loop only) */
    uint64_t completed;
    double run_seconds;  /* wall time in run() */
    double wait_seconds; /* from hand-in to the start of run() */
};

void fk_offload_init(fk_offload *o, uv_loop_t *loop);
/* Queue it (run/done set); it starts once the items before it are done. */
void fk_offload_submit(fk_offload *o, fk_offload_item *it);
/* Items handed in and not yet done. */
int fk_offload_pending(const fk_offload *o);

#endif
