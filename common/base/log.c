#include "common/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"error", "warn", "info", "debug"};

/* The one piece of process-wide mutable state: set once at start-up from the config. */
static int log_level = FK_LOG_INFO;

void fk_log_set_level(int level)
{
    log_level = level;
}

int fk_log_level(void)
{
    return log_level;
}

int fk_log_level_from_name(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

void fk_log(int level, const char *event, const char *fmt, ...)
{
    if (level > log_level)
        return;
    char body[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    fprintf(stderr, "level=%s event=%s%s%s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], event,
            *body ? " " : "", body);
}
