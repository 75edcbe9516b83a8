/* Every libuv result is used. Calls that can fail in normal operation (loop and signal setup,
 * async handles, starting reads, address lookups, closing a loop with handles left) are handled
 * where they are made, e.g. turned into an fk_err with fk_uv_err. Calls that cannot fail by
 * libuv's contract on a live handle (timer, idle, check and TCP handle init; the stops; starting
 * a timer with a callback; uv_run, which reports only whether handles are left) go through
 * FK_UV_MUST: a violation is a bug, logged with the call and its place, not handled.
 * Header-only, for the code that links libuv (fkbase itself does not). */
#ifndef FK_UVCHECK_H
#define FK_UVCHECK_H

#include <uv.h>

#include "common/base/err.h"
#include "common/base/log.h"

/* FK_OK for rc >= 0; else FK_ENET with "CALL: libuv's message" in err. */
FK_CHECKRETURN static inline int fk_uv_err(int rc, const char *call, fk_err *err)
{
    if (rc >= 0)
        return FK_OK;
    return fk_err_set(err, FK_ENET, "%s: %s", call, uv_strerror(rc));
}

static inline void fk__uv_must(int rc, const char *call, const char *file, int line)
{
    if (rc < 0)
        fk_log(FK_LOG_ERROR, "libuv_failed", "call=\"%s\" at=%s:%d error=\"%s\"", call, file, line,
               uv_strerror(rc));
}

#define FK_UV_MUST(call) fk__uv_must((call), #call, __FILE__, __LINE__)

#endif
