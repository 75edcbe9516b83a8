#include "common/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *const names[] = {"error", "warn", "info", "debug"};

/* The one piece of process-wide mutable state: set once at start-up from the config. */
static int log_level = FK_LOG_INFO;
static int log_ts; /* set once at start-up too */

void fk_log_set_timestamps(int on)
{
    log_ts = on;
}

int fk_log_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st))
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

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
    char ts[40] = "";
    if (log_ts) {
        struct timespec now;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        size_t n = strftime(ts, sizeof ts, "ts=%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(ts + n, sizeof ts - n, ".%03ldZ ", now.tv_nsec / 1000000);
    }
    fprintf(stderr, "%slevel=%s event=%s%s%s\n", ts, names[level < 0 ? 0 : level > 3 ? 3 : level],
            event, *body ? " " : "", body);
}
