#include "server/offload.h"

#include <assert.h>
#include <time.h>

#include "common/base/uvcheck.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The thread pool's side. The times are the item's: written here, read by the loop only after
 * the pool handed the request back (libuv's queue orders the two). */
static void work_cb(uv_work_t *req)
{
    fk_offload_item *it = req->data;
    it->started = mono();
    it->run(it);
    it->ended = mono();
}

static void start(fk_offload *o);

static void after_cb(uv_work_t *req, int status)
{
    fk_offload_item *it = req->data;
    fk_offload *o = it->o;
    assert(o->running == it && status == 0); /* never cancelled: uv_cancel is not used */
    (void)status;
    o->running = NULL;
    o->pending--;
    o->completed++;
    o->run_seconds += it->ended - it->started;
    o->wait_seconds += it->started - it->queued;
    start(o); /* the next one runs while this one's done() works on the loop */
    it->done(it);
}

static void start(fk_offload *o)
{
    if (o->running || !o->head)
        return;
    fk_offload_item *it = o->head;
    o->head = it->next;
    if (!o->head)
        o->tail = NULL;
    it->next = NULL;
    o->running = it;
    it->req.data = it;
    FK_UV_MUST(uv_queue_work(o->loop, &it->req, work_cb, after_cb));
}

void fk_offload_init(fk_offload *o, uv_loop_t *loop)
{
    *o = (fk_offload){.loop = loop};
}

void fk_offload_submit(fk_offload *o, fk_offload_item *it)
{
    assert(it->run && it->done);
    it->o = o;
    it->next = NULL;
    it->queued = mono();
    if (o->tail)
        o->tail->next = it;
    else
        o->head = it;
    o->tail = it;
    o->pending++;
    start(o);
}

int fk_offload_pending(const fk_offload *o)
{
    return o->pending;
}
