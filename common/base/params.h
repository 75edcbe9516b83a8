/* Key/value parameters: job configs, INI files and --key value flags all land here. */
#ifndef FK_PARAMS_H
#define FK_PARAMS_H

#include <stdint.h>
#include <stdio.h>

#include "common/base/err.h"

typedef struct fk_param {
    char *key;
    char *value;
    int used; /* set when read, so unknown keys can be reported */
} fk_param;

typedef struct fk_params {
    fk_param *items;
    int count;
    int cap;
    /* Tests only (NULL otherwise): called with every key a getter looks up, present or not,
     * so a test can check that a method's keys table lists every key it reads. */
    void (*trace)(void *ud, const char *key);
    void *trace_ud;
} fk_params;

/* Option names are lowercase words joined by '_' everywhere: flags, config files and job
 * files. Lookups treat '-' and '_' as the same character, so the '-' spellings of
 * fedkern 0.1 (--log-level, tls-dir = ...) keep working; fk_params_old_spelling says when
 * a key was written that way, for the one-line deprecation warning. */
int fk_params_key_eq(const char *a, const char *b);
/* 1 when key contains a '-' (the old spelling), writing the new one into out. */
int fk_params_old_spelling(const char *key, char *out, size_t cap);

void fk_params_init(fk_params *p);
void fk_params_close(fk_params *p);

/* Set (or replace) key. Copies both strings. FK_OK, or FK_ENOMEM with p unchanged. */
FK_CHECKRETURN int fk_params_set(fk_params *p, const char *key, const char *value);

/* fk_params_set for each pair of kv = {key, value, key, value, ..., NULL}: FK_OK, or FK_ENOMEM
 * (the pairs before the one that failed stay set; the caller closes p either way). */
FK_CHECKRETURN int fk_params_set_all(fk_params *p, const char *const *kv);

/* Parse "key = value" lines; '#' and ';' start comments; "[section]" prefixes
 * following keys as "section.key". */
FK_CHECKRETURN int fk_params_parse_ini(fk_params *p, const char *text, const char *origin,
                                       fk_err *err);
FK_CHECKRETURN int fk_params_load_ini(fk_params *p, const char *path, fk_err *err);

/* Consume "--key value" and "--key=value" pairs from argv[0..argc).
 * Bare "--flag" followed by another option or nothing sets "flag" = "1".
 * Non-option words are left in place: *argc shrinks to the positional count. */
FK_CHECKRETURN int fk_params_parse_args(fk_params *p, int *argc, char **argv, fk_err *err);

const char *fk_params_get(const fk_params *p, const char *key); /* NULL if absent */
const char *fk_params_str(const fk_params *p, const char *key, const char *dflt);

/* Typed getters: absent key gives dflt; present but malformed or out of
 * [lo, hi] gives FK_EINVAL with a message naming the key. */
FK_CHECKRETURN int fk_params_int(const fk_params *p, const char *key, long dflt, long lo, long hi,
                                 long *out, fk_err *err);
FK_CHECKRETURN int fk_params_u64(const fk_params *p, const char *key, uint64_t dflt, uint64_t *out,
                                 fk_err *err);
FK_CHECKRETURN int fk_params_double(const fk_params *p, const char *key, double dflt, double lo,
                                    double hi, double *out, fk_err *err);
FK_CHECKRETURN int fk_params_bool(const fk_params *p, const char *key, int dflt, int *out,
                                  fk_err *err);

/* First key never read by a getter, or NULL: reports typos in configs. */
const char *fk_params_unused(const fk_params *p);

/* One documented key for --help texts: "KEY ARG" and what it means. */
typedef struct fk_param_doc {
    const char *key;
    const char *help;
} fk_param_doc;

/* Print "  --PREFIXKEYSUFFIX  help" for each entry of a NULL-terminated table
 * (prefix and suffix may be NULL), keys in a column of 24. */
void fk_param_docs_print(FILE *out, const fk_param_doc *docs, const char *prefix,
                         const char *suffix);

/* 1 when key is documented by an entry of docs with the given prefix (may be NULL): the
 * entry's first word, '-' and '_' alike. An entry whose name ends in a placeholder segment
 * (".DATASET", ".KEY": a '.' then capitals, 3 or more) stands for every key under it;
 * *under (may be NULL) is then set to 1 (the rest of such a key is a name, not an option). */
int fk_param_docs_has(const fk_param_doc *docs, const char *prefix, const char *key, int *under);

/* The documented key nearest to key by edit distance (see common/base/suggest.h) into out
 * ("" when none is close enough to be a likely typo); out keeps the nearest over calls. */
typedef struct fk_param_near {
    char best[128];
    int dist;
} fk_param_near;
void fk_param_near_init(fk_param_near *n);
void fk_param_docs_near(const fk_param_doc *docs, const char *prefix, const char *key,
                        fk_param_near *n);

#endif
