#include "common/base/err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int fk_err_set(fk_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int fk_err_prefix(fk_err *err, int code, const char *fmt, ...)
{
    /* The code travels as an argument, not through err: with a NULL err (callers that want the
     * code only) the failure must still come back as a failure. */
    assert(code != FK_OK);
    if (!err)
        return code;
    char head[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hl = strlen(head), cap = sizeof err->msg - 1;
    if (hl > cap)
        hl = cap;
    size_t ol = strnlen(err->msg, cap);
    if (hl + ol > cap)
        ol = cap - hl;
    memmove(err->msg + hl, err->msg, ol);
    memcpy(err->msg, head, hl);
    err->msg[hl + ol] = '\0';
    err->code = code;
    return code;
}

void fk_err_clear(fk_err *err)
{
    if (err) {
        err->code = FK_OK;
        err->msg[0] = '\0';
    }
}

const char *fk_status_name(int code)
{
    switch (code) {
    case FK_OK: return "ok";
    case FK_EINVAL: return "invalid argument";
    case FK_ENOMEM: return "out of memory";
    case FK_EIO: return "i/o error";
    case FK_EFORMAT: return "malformed input";
    case FK_ENUMERIC: return "numerical failure";
    case FK_ESTATE: return "invalid state";
    case FK_ENET: return "network error";
    case FK_ELIMIT: return "limit exceeded";
    case FK_ENOTFOUND: return "not found";
    default: return "unknown error";
    }
}
