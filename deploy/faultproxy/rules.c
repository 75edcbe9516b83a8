/* Fault rules: flags and rule scripts into fk_fault values. */
#include "deploy/faultproxy/rules.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int fk_fault_read(const fk_params *p, fk_fault *f, fk_err *err)
{
    long cut = (long)f->cut_after, hole = (long)f->hole_after;
    int rc = fk_params_double(p, "drop", f->drop, 0, 1, &f->drop, err);
    if (!rc)
        rc = fk_params_double(p, "latency-ms", f->latency_ms, 0, 600000, &f->latency_ms, err);
    if (!rc)
        rc = fk_params_double(p, "jitter-ms", f->jitter_ms, 0, 600000, &f->jitter_ms, err);
    if (!rc)
        rc = fk_params_double(p, "rate", f->rate, 0, 1e12, &f->rate, err);
    if (!rc)
        rc = fk_params_int(p, "cut-after", cut, 0, LONG_MAX, &cut, err);
    if (!rc)
        rc = fk_params_int(p, "blackhole-after", hole, 0, LONG_MAX, &hole, err);
    if (!rc)
        rc = fk_params_double(p, "corrupt", f->corrupt, 0, 1, &f->corrupt, err);
    if (!rc) {
        f->cut_after = (uint64_t)cut;
        f->hole_after = (uint64_t)hole;
    }
    return rc;
}

/* One rule line (modified in place): whitespace-separated key=value pairs. */
FK_CHECKRETURN static int parse_line(char *line, const fk_fault *dflt, fk_fault *out,
                                     const char *origin, int lineno, fk_err *err)
{
    fk_params p;
    fk_params_init(&p);
    int rc = FK_OK;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\r\n", &save); tok && !rc;
         tok = strtok_r(NULL, " \t\r\n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) {
            rc = fk_err_set(err, FK_EINVAL, "%s:%d: '%.40s' is not key=value", origin, lineno, tok);
            break;
        }
        *eq = '\0';
        if (fk_params_set(&p, tok, eq + 1))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory reading %s", origin);
    }
    *out = *dflt;
    if (!rc)
        rc = fk_fault_read(&p, out, err);
    if (rc && err->msg[0] && strncmp(err->msg, origin, strlen(origin)))
        fk_err_prefix(err, rc, "%s:%d: ", origin, lineno);
    const char *extra = rc ? NULL : fk_params_unused(&p);
    if (extra)
        rc = fk_err_set(err, FK_EINVAL, "%s:%d: unknown key '%.40s'; see --help", origin, lineno,
                        extra);
    fk_params_close(&p);
    return rc;
}

int fk_fault_parse_script(const char *text, size_t len, const fk_fault *dflt, fk_fault *out,
                          int max, int *n, const char *origin, fk_err *err)
{
    *n = 0;
    int lineno = 0, rc = FK_OK;
    size_t pos = 0;
    while (!rc && pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        lineno++;
        size_t l = end - pos;
        char *line = malloc(l + 1);
        if (!line)
            return fk_err_set(err, FK_ENOMEM, "out of memory reading %s", origin);
        memcpy(line, text + pos, l);
        line[l] = '\0';
        pos = end + 1;
        int has_nul = memchr(line, '\0', l) != NULL;
        line[strcspn(line, "#")] = '\0';
        if (has_nul) {
            rc = fk_err_set(err, FK_EINVAL, "%s:%d: NUL byte in a rule line", origin, lineno);
        } else if (strspn(line, " \t\r") != strlen(line)) {
            if (*n == max)
                rc = fk_err_set(err, FK_EINVAL, "%s: more than %d rules", origin, max);
            else
                rc = parse_line(line, dflt, &out[*n], origin, lineno, err);
            if (!rc)
                (*n)++;
        }
        free(line);
    }
    if (!rc && *n == 0)
        rc = fk_err_set(err, FK_EINVAL, "%s: no rules; write one key=value line per connection",
                        origin);
    return rc;
}
