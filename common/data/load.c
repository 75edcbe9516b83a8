/* fk_load: picks the format by name or suffix and calls its loader (load_int.h). */
#include <string.h>
#include <strings.h>

#include "common/data/load_int.h"

static int has_suffix(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && strncasecmp(s + n - k, suf, k) == 0;
}

fk_format fk_format_from_path(const char *path)
{
    const char *b = fk__load_base_name(path);
    size_t n = strlen(b);
    if (has_suffix(b, n, ".gz"))
        n -= 3;
    static const struct {
        const char *suf;
        fk_format f;
    } map[] = {
        {".csv", FK_FORMAT_CSV},    {".txt", FK_FORMAT_CSV}, {".data", FK_FORMAT_CSV},
        {".tra", FK_FORMAT_CSV},    {".tes", FK_FORMAT_CSV}, {".libsvm", FK_FORMAT_LIBSVM},
        {".svm", FK_FORMAT_LIBSVM}, {".idx", FK_FORMAT_IDX}, {"-ubyte", FK_FORMAT_IDX},
        {".mat", FK_FORMAT_MAT},    {".npy", FK_FORMAT_NPY},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (has_suffix(b, n, map[i].suf))
            return map[i].f;
    return FK_FORMAT_AUTO;
}

static const char *const format_names[] = {"auto", "csv", "libsvm", "idx", "mat", "npy"};

const char *fk_format_name(fk_format f)
{
    return (unsigned)f < sizeof format_names / sizeof format_names[0] ? format_names[f] : "?";
}

fk_format fk_format_parse(const char *name)
{
    for (size_t i = 1; i < sizeof format_names / sizeof format_names[0]; i++)
        if (!strcasecmp(name, format_names[i]))
            return (fk_format)i;
    return FK_FORMAT_AUTO;
}

int fk_load(fk_dataset *ds, const char *path, const fk_load_opts *opts, fk_err *err)
{
    static const fk_load_opts defaults = {0};
    const fk_load_opts *o = opts ? opts : &defaults;
    memset(ds, 0, sizeof *ds);
    fk_format f = o->format != FK_FORMAT_AUTO ? o->format : fk_format_from_path(path);
    switch (f) {
    case FK_FORMAT_CSV: return fk__load_csv(ds, path, o, err);
    case FK_FORMAT_LIBSVM: return fk__load_libsvm(ds, path, o, err);
    case FK_FORMAT_IDX: return fk__load_idx(ds, path, o, err);
    case FK_FORMAT_MAT: return fk__load_mat(ds, path, o, err);
    case FK_FORMAT_NPY: return fk__load_npy(ds, path, o, err);
    default: break;
    }
    return fk_err_set(err, FK_EINVAL,
                      "%s: cannot tell the format from the file name; pass --format "
                      "csv|libsvm|idx|mat|npy",
                      path);
}
