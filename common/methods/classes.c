/* One class list per job, by raw label value (classes.h). */
#include "common/methods/classes.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Count the words of s (separated by commas and blanks). */
static size_t count_words(const char *s)
{
    size_t n = 0;
    int in = 0;
    for (; *s; s++) {
        int sep = *s == ',' || isspace((unsigned char)*s);
        n += !sep && !in;
        in = !sep;
    }
    return n;
}

/* "A..B" with integers A and B: fills lo, hi and returns 1; 0 when s is not a range. */
static int parse_range(const char *s, double *lo, double *hi)
{
    const char *dots = strstr(s, "..");
    if (!dots)
        return 0;
    char *end;
    errno = 0;
    long long a = strtoll(s, &end, 10); /* strtod would read "1." of "1..10" */
    if (end != dots || errno)
        return 0;
    long long b = strtoll(dots + 2, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (end == dots + 2 || *end || errno || llabs(a) > 1000000000000000LL ||
        llabs(b) > 1000000000000000LL)
        return 0;
    *lo = (double)a;
    *hi = (double)b;
    return 1;
}

FK_CHECKRETURN static int parse_values(fk_classes *c, const char *s, long max, fk_err *err)
{
    double lo, hi;
    size_t n;
    if (parse_range(s, &lo, &hi)) {
        if (!(hi > lo) || hi - lo + 1 > (double)max)
            return fk_err_set(err, FK_EINVAL,
                              "classes = '%s': a range A..B needs A < B and at most %ld values", s,
                              max);
        n = (size_t)(hi - lo + 1);
    } else {
        n = count_words(s);
        if (n > (size_t)max)
            return fk_err_set(err, FK_EINVAL, "classes = '%s' lists %zu values (at most %ld)", s, n,
                              max);
    }
    c->v = malloc((n ? n : 1) * sizeof *c->v);
    if (!c->v)
        return fk_err_set(err, FK_ENOMEM, "classes: out of memory for %zu values", n);
    if (parse_range(s, &lo, &hi)) {
        for (size_t i = 0; i < n; i++)
            c->v[i] = lo + (double)i;
    } else {
        const char *q = s;
        for (size_t i = 0; i < n; i++) {
            while (*q == ',' || isspace((unsigned char)*q))
                q++;
            char *end;
            c->v[i] = strtod(q, &end);
            if (end == q || (*end && *end != ',' && !isspace((unsigned char)*end)) ||
                !isfinite(c->v[i]))
                return fk_err_set(err, FK_EINVAL,
                                  "classes = '%s': value %zu ('%.*s') is not a finite number; "
                                  "write the raw label values, e.g. classes = 0,1,2 or 1..10",
                                  s, i + 1, (int)strcspn(q, ", \t"), q);
            q = end;
        }
        qsort(c->v, n, sizeof *c->v, cmp_double);
        for (size_t i = 1; i < n; i++)
            if (c->v[i] == c->v[i - 1])
                return fk_err_set(err, FK_EINVAL, "classes = '%s' lists %.17g twice", s, c->v[i]);
    }
    if (n < 2)
        return fk_err_set(err, FK_EINVAL,
                          "classes = '%s': list at least 2 raw label values (or give a count)", s);
    c->n = (int)n;
    c->listed = 1;
    return FK_OK;
}

/* A count C of kind RANGE is the list 0..C-1. */
FK_CHECKRETURN static int count_values(fk_classes *c, long C, fk_err *err)
{
    c->n = (int)C;
    if (c->count != FK_CLASSES_COUNT_RANGE || C == 0)
        return FK_OK;
    c->v = malloc((size_t)C * sizeof *c->v);
    if (!c->v)
        return fk_err_set(err, FK_ENOMEM, "classes: out of memory for %ld values", C);
    for (long i = 0; i < C; i++)
        c->v[i] = (double)i;
    c->listed = 1;
    return FK_OK;
}

int fk_classes_parse(fk_classes *c, const fk_params *p, long dflt, long max, fk_classes_count count,
                     fk_err *err)
{
    memset(c, 0, sizeof *c);
    c->count = count;
    const char *s = fk_params_get(p, "classes");
    long C = dflt;
    int rc = FK_OK;
    /* one word is a count (a list needs two values); fk_params_int marks the key used */
    if (!s || count_words(s) <= 1) {
        if (s && parse_range(s, &(double){0}, &(double){0}))
            rc = parse_values(c, s, max, err);
        else if (!(rc = fk_params_int(p, "classes", dflt, 0, max, &C, err)))
            rc = count_values(c, C, err);
        if (!rc && s && c->n < 2)
            rc = fk_err_set(err, FK_EINVAL, "classes = '%s': a job needs at least 2 classes", s);
    } else {
        rc = parse_values(c, s, max, err);
    }
    if (rc)
        fk_classes_close(c);
    return rc;
}

int fk_classes_count_of(const fk_params *p, long dflt, long max, fk_classes_count count, long *n,
                        fk_err *err)
{
    fk_classes c;
    int rc = fk_classes_parse(&c, p, dflt, max, count, err);
    *n = rc ? 0 : c.n;
    fk_classes_close(&c);
    return rc;
}

void fk_classes_close(fk_classes *c)
{
    free(c->v);
    memset(c, 0, sizeof *c);
}

double fk_classes_raw(const fk_dataset *ds, size_t i)
{
    if (ds->y_raw)
        return ds->y_raw[i];
    return ds->classes ? ds->classes[ds->y[i]] : (double)ds->y[i];
}

int fk_classes_find(const fk_classes *c, double v)
{
    int lo = 0, hi = c->v ? c->n - 1 : -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->v[mid] == v)
            return mid;
        if (c->v[mid] < v)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* "1, 2, 3, ... (10 values)" into buf: the list for messages (at most cap bytes). */
static void classes_format(const fk_classes *c, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; c->v && i < c->n && at + 1 < cap; i++) {
        if (i == 6 && c->n > 8) {
            at += (size_t)snprintf(buf + at, cap - at, ", ..., %.17g", c->v[c->n - 1]);
            break;
        }
        at += (size_t)snprintf(buf + at, cap - at, "%s%.17g", i ? ", " : "", c->v[i]);
    }
    if (at + 1 < cap)
        snprintf(buf + at, cap - at, " (%d values)", c->n);
}

int fk_classes_index(const fk_classes *c, const fk_dataset *ds, const char *who, int **y,
                     fk_err *err)
{
    *y = NULL;
    size_t n = ds->X.rows;
    if (!ds->y)
        return fk_err_set(err, FK_EINVAL, "%s: data set '%s' has no labels", who, ds->name);
    if (!c->listed && ds->n_classes != c->n) {
        /* a count and a data set's own list only agree with the other clients' lists when every
         * client holds every class: name the values so the job can list them */
        char have[256] = "";
        fk_classes own = {.v = ds->classes, .n = ds->n_classes, .listed = 1};
        classes_format(&own, have, sizeof have);
        return fk_err_set(err, FK_EINVAL,
                          "%s: data set '%s' holds %d of the job's classes = %d (raw labels %s); "
                          "class indices would not mean the same class on every client: list "
                          "the job's classes by raw value, e.g. classes = 1,2,3 or 1..10",
                          who, ds->name, ds->n_classes, c->n, have);
    }
    int *out = malloc((n ? n : 1) * sizeof *out);
    if (!out)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu labels", who, n);
    for (size_t i = 0; i < n; i++) {
        if (!c->listed) {
            out[i] = ds->y[i];
            continue;
        }
        double v = fk_classes_raw(ds, i);
        int k = fk_classes_find(c, v);
        if (k < 0) {
            char list[256];
            classes_format(c, list, sizeof list);
            free(out);
            return fk_err_set(err, FK_EINVAL,
                              "%s: data set '%s': row %zu (1-based) has label %.17g, which is not "
                              "one of the job's classes %s: add it to the job's 'classes' or "
                              "remove the row",
                              who, ds->name, i + 1, v, list);
        }
        out[i] = k;
    }
    *y = out;
    return FK_OK;
}
