/* Structured logging: key=value lines on stderr (journald picks them up under systemd). */
#ifndef FK_LOG_H
#define FK_LOG_H

enum fk_log_level { FK_LOG_ERROR = 0, FK_LOG_WARN = 1, FK_LOG_INFO = 2, FK_LOG_DEBUG = 3 };

void fk_log_set_level(int level);
int fk_log_level(void);
/* The level named "error", "warn", "info" or "debug", or -1 for any other text. */
int fk_log_level_from_name(const char *name);
/* Timestamps: off (the default, and under journald, which stamps every line itself) or on:
 * each line then starts with "ts=2026-11-26T21:20:38.123Z " (UTC, milliseconds). */
void fk_log_set_timestamps(int on);
/* The daemons' choice: on unless stderr is the journal (JOURNAL_STREAM names its device and
 * inode, as systemd sets it). */
int fk_log_stderr_is_journal(void);
/* fk_log(FK_LOG_INFO, "round_closed", "job=%s round=%d", ...) prints
 * "level=info event=round_closed job=... round=..." */
void fk_log(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
