/* Structured logging: key=value lines on stderr (journald picks them up under systemd). */
#ifndef FK_LOG_H
#define FK_LOG_H

enum fk_log_level { FK_LOG_ERROR = 0, FK_LOG_WARN = 1, FK_LOG_INFO = 2, FK_LOG_DEBUG = 3 };

void fk_log_set_level(int level);
int fk_log_level(void);
/* The level named "error", "warn", "info" or "debug", or -1 for any other text. */
int fk_log_level_from_name(const char *name);
/* fk_log(FK_LOG_INFO, "round_closed", "job=%s round=%d", ...) prints
 * "level=info event=round_closed job=... round=..." */
void fk_log(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
