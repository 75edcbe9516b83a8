#include "common/base/params.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/suggest.h"

void fk_params_init(fk_params *p)
{
    p->items = NULL;
    p->count = 0;
    p->cap = 0;
    p->trace = NULL;
    p->trace_ud = NULL;
}

int fk_params_key_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
            return 0;
    return *a == *b;
}

int fk_params_old_spelling(const char *key, char *out, size_t cap)
{
    if (!strchr(key, '-'))
        return 0;
    snprintf(out, cap, "%s", key);
    for (char *c = out; *c; c++)
        if (*c == '-')
            *c = '_';
    return 1;
}

void fk_params_close(fk_params *p)
{
    for (int i = 0; i < p->count; i++) {
        free(p->items[i].key);
        free(p->items[i].value);
    }
    free(p->items);
    fk_params_init(p);
}

static fk_param *find(const fk_params *p, const char *key)
{
    for (int i = 0; i < p->count; i++)
        if (fk_params_key_eq(p->items[i].key, key))
            return &p->items[i];
    return NULL;
}

int fk_params_set(fk_params *p, const char *key, const char *value)
{
    char *v = strdup(value);
    if (!v)
        return FK_ENOMEM;
    fk_param *it = find(p, key);
    if (it) {
        free(it->value);
        it->value = v;
        return FK_OK;
    }
    if (p->count == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        fk_param *n = realloc(p->items, (size_t)cap * sizeof *n);
        if (!n) {
            free(v);
            return FK_ENOMEM;
        }
        p->items = n;
        p->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return FK_ENOMEM;
    }
    p->items[p->count++] = (fk_param){.key = k, .value = v, .used = 0};
    return FK_OK;
}

int fk_params_set_all(fk_params *p, const char *const *kv)
{
    for (; kv[0]; kv += 2)
        if (fk_params_set(p, kv[0], kv[1]))
            return FK_ENOMEM;
    return FK_OK;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int fk_params_parse_ini(fk_params *p, const char *text, const char *origin, fk_err *err)
{
    char section[128] = "";
    int lineno = 0;
    const char *s = text;
    if (!strncmp(s, "\xEF\xBB\xBF", 3)) /* a UTF-8 byte order mark (some editors write one) */
        s += 3;
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char line[1024];
        lineno++;
        if (len >= sizeof line)
            return fk_err_set(err, FK_EFORMAT, "%s:%d: line longer than %zu bytes", origin, lineno,
                              sizeof line - 1);
        memcpy(line, s, len);
        line[len] = '\0';
        s += len + (nl ? 1 : 0);
        char *c = strpbrk(line, "#;");
        if (c)
            *c = '\0';
        char *t = trim(line);
        if (!*t)
            continue;
        if (*t == '[') {
            char *e = strchr(t, ']');
            if (!e || e[1] != '\0' || e - t - 1 >= (long)sizeof section)
                return fk_err_set(err, FK_EFORMAT, "%s:%d: malformed section header '%s'", origin,
                                  lineno, t);
            *e = '\0';
            snprintf(section, sizeof section, "%s", trim(t + 1));
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq)
            return fk_err_set(err, FK_EFORMAT, "%s:%d: expected 'key = value', got '%s'", origin,
                              lineno, t);
        *eq = '\0';
        char *k = trim(t), *v = trim(eq + 1);
        if (!*k)
            return fk_err_set(err, FK_EFORMAT, "%s:%d: empty key", origin, lineno);
        char full[300];
        snprintf(full, sizeof full, "%s%s%s", section, *section ? "." : "", k);
        if (fk_params_set(p, full, v) != FK_OK)
            return fk_err_set(err, FK_ENOMEM, "out of memory reading %s", origin);
    }
    return FK_OK;
}

int fk_params_load_ini(fk_params *p, const char *path, fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot open config: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 8192;
            if (cap > (1u << 24)) {
                free(buf);
                fclose(f);
                return fk_err_set(err, FK_ELIMIT, "%s: config larger than 16 MiB", path);
            }
            char *n = realloc(buf, cap);
            if (!n) {
                free(buf);
                fclose(f);
                return fk_err_set(err, FK_ENOMEM, "out of memory reading %s", path);
            }
            buf = n;
        }
        size_t r = fread(buf + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return fk_err_set(err, FK_EIO, "%s: read error", path);
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        free(buf);
        return fk_err_set(err, FK_EFORMAT, "%s: config contains a NUL byte", path);
    }
    int rc = fk_params_parse_ini(p, buf, path, err);
    free(buf);
    return rc;
}

int fk_params_parse_args(fk_params *p, int *argc, char **argv, fk_err *err)
{
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (i++; i < *argc; i++)
                argv[out++] = argv[i];
            break;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            argv[out++] = a;
            continue;
        }
        char key[256];
        const char *val;
        char *eq = strchr(a + 2, '=');
        if (eq) {
            size_t kl = (size_t)(eq - a - 2);
            if (kl >= sizeof key)
                return fk_err_set(err, FK_EINVAL, "option '%s' is too long", a);
            memcpy(key, a + 2, kl);
            key[kl] = '\0';
            val = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", a + 2);
            if (i + 1 < *argc && strncmp(argv[i + 1], "--", 2) != 0)
                val = argv[++i];
            else
                val = "1";
        }
        if (fk_params_set(p, key, val) != FK_OK)
            return fk_err_set(err, FK_ENOMEM, "out of memory parsing options");
    }
    *argc = out;
    return FK_OK;
}

const char *fk_params_get(const fk_params *p, const char *key)
{
    if (p->trace)
        p->trace(p->trace_ud, key);
    fk_param *it = find(p, key);
    if (!it)
        return NULL;
    it->used = 1;
    return it->value;
}

const char *fk_params_str(const fk_params *p, const char *key, const char *dflt)
{
    const char *v = fk_params_get(p, key);
    return v ? v : dflt;
}

int fk_params_int(const fk_params *p, const char *key, long dflt, long lo, long hi, long *out,
                  fk_err *err)
{
    const char *v = fk_params_get(p, key);
    if (!v) {
        *out = dflt;
        return FK_OK;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0')
        return fk_err_set(err, FK_EINVAL, "parameter '%s': '%s' is not an integer", key, v);
    if (x < lo || x > hi)
        return fk_err_set(err, FK_EINVAL, "parameter '%s' = %ld is out of range [%ld, %ld]", key, x,
                          lo, hi);
    *out = x;
    return FK_OK;
}

int fk_params_u64(const fk_params *p, const char *key, uint64_t dflt, uint64_t *out, fk_err *err)
{
    const char *v = fk_params_get(p, key);
    if (!v) {
        *out = dflt;
        return FK_OK;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v || *end != '\0' || *v == '-')
        return fk_err_set(err, FK_EINVAL, "parameter '%s': '%s' is not an unsigned integer", key,
                          v);
    *out = (uint64_t)x;
    return FK_OK;
}

int fk_params_double(const fk_params *p, const char *key, double dflt, double lo, double hi,
                     double *out, fk_err *err)
{
    const char *v = fk_params_get(p, key);
    if (!v) {
        *out = dflt;
        return FK_OK;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !isfinite(x))
        return fk_err_set(err, FK_EINVAL, "parameter '%s': '%s' is not a finite number", key, v);
    if (x < lo || x > hi)
        return fk_err_set(err, FK_EINVAL, "parameter '%s' = %g is out of range [%g, %g]", key, x,
                          lo, hi);
    *out = x;
    return FK_OK;
}

int fk_params_bool(const fk_params *p, const char *key, int dflt, int *out, fk_err *err)
{
    const char *v = fk_params_get(p, key);
    if (!v) {
        *out = dflt;
        return FK_OK;
    }
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on"))
        *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off"))
        *out = 0;
    else
        return fk_err_set(err, FK_EINVAL, "parameter '%s': '%s' is not a boolean (true/false)",
                          key, v);
    return FK_OK;
}

const char *fk_params_unused(const fk_params *p)
{
    for (int i = 0; i < p->count; i++)
        if (!p->items[i].used)
            return p->items[i].key;
    return NULL;
}

void fk_param_docs_print(FILE *out, const fk_param_doc *docs, const char *prefix,
                         const char *suffix)
{
    for (const fk_param_doc *d = docs; d->key; d++) {
        char k[128];
        snprintf(k, sizeof k, "%s%s%s", prefix ? prefix : "", d->key, suffix ? suffix : "");
        fprintf(out, "  --%-24s %s\n", k, d->help);
    }
}

/* Length of a doc entry's key: its first word. */
static size_t doc_key_len(const char *k)
{
    return strcspn(k, " ");
}

/* Length of the part of a doc key before a trailing placeholder segment (".DATASET"),
 * or 0 when it has none. */
static size_t placeholder_at(const char *k, size_t len)
{
    const char *dot = NULL;
    for (const char *c = k; c < k + len; c++)
        if (*c == '.')
            dot = c;
    if (!dot || k + len - dot - 1 < 3)
        return 0;
    for (const char *c = dot + 1; c < k + len; c++)
        if (!isupper((unsigned char)*c))
            return 0;
    return (size_t)(dot - k) + 1;
}

/* key with prefix removed, or NULL when key does not start with prefix. */
static const char *strip_prefix(const char *key, const char *prefix)
{
    size_t pl = prefix ? strlen(prefix) : 0;
    if (!pl)
        return key;
    for (size_t i = 0; i < pl; i++)
        if (key[i] != prefix[i] &&
            !((key[i] == '-' || key[i] == '_') && (prefix[i] == '-' || prefix[i] == '_')))
            return NULL;
    return key + pl;
}

static int eq_n(const char *a, size_t la, const char *b, size_t lb)
{
    if (la != lb)
        return 0;
    for (size_t i = 0; i < la; i++)
        if (a[i] != b[i] && !((a[i] == '-' || a[i] == '_') && (b[i] == '-' || b[i] == '_')))
            return 0;
    return 1;
}

int fk_param_docs_has(const fk_param_doc *docs, const char *prefix, const char *key, int *under)
{
    const char *rest = strip_prefix(key, prefix);
    if (under)
        *under = 0;
    if (!rest)
        return 0;
    size_t rl = strlen(rest);
    for (const fk_param_doc *d = docs; d->key; d++) {
        size_t l = doc_key_len(d->key), ph = placeholder_at(d->key, l);
        if (ph && rl > ph && eq_n(rest, ph, d->key, ph)) {
            if (under)
                *under = 1;
            return 1;
        }
        if (!ph && eq_n(rest, rl, d->key, l))
            return 1;
    }
    return 0;
}

void fk_param_near_init(fk_param_near *n)
{
    n->best[0] = '\0';
    n->dist = 1 << 30;
}

void fk_param_docs_near(const fk_param_doc *docs, const char *prefix, const char *key,
                        fk_param_near *n)
{
    size_t pl = prefix ? strlen(prefix) : 0, kl = strlen(key);
    for (const fk_param_doc *d = docs; d->key; d++) {
        size_t l = doc_key_len(d->key);
        if (placeholder_at(d->key, l))
            continue; /* a family of keys, not one name to suggest */
        char full[128];
        int w = snprintf(full, sizeof full, "%s%.*s", pl ? prefix : "", (int)l, d->key);
        if (w < 0 || (size_t)w >= sizeof full)
            continue;
        int dist = fk_edit_distance(key, kl, full, (size_t)w);
        if (dist <= fk_suggest_max_distance(kl) && dist < n->dist) {
            n->dist = dist;
            memcpy(n->best, full, (size_t)w + 1);
        }
    }
}
