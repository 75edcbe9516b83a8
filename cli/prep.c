/* The rows a user asks predictions for, preprocessed as the job's clients preprocessed
 * theirs (issue 34): `model eval|predict` and `job predict`. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/base/err.h"
#include "common/data/catalog.h"
#include "common/data/prep_model.h"
#include "common/data/source.h"

int fk_cli_load_query(const char *cmd, const char *data, const fk_source *so,
                      const fk_bundle *model, long client, int use_model, fk_dataset *ds,
                      fk_err *err)
{
    int user = so->n_prep > 0 || so->affine;
    fk_prep_record rec = {0};
    if (model && use_model && !user &&
        fk_prep_model_get(model, client < 0 ? -1 : (int)client, &rec, err))
        return FK_EINVAL;
    int rc = fk_source_load(ds, data, so, NULL, err);
    if (rc)
        return rc;
    char what[160];
    fk_prep_record_describe(&rec, what, sizeof what);
    if (!model || !use_model)
        return FK_OK;
    if (user) {
        fk_prep_record mine = {0};
        if (!fk_prep_model_get(model, client < 0 ? -1 : (int)client, &mine, NULL) && mine.known) {
            fk_prep_record_describe(&mine, what, sizeof what);
            fprintf(stderr,
                    "fedkern %s: note: --prep/--affine given: applied instead of the clients' "
                    "preprocessing the model records (%s)\n",
                    cmd, what);
        }
        return FK_OK;
    }
    if (!rec.known) {
        fprintf(stderr,
                "fedkern %s: warning: the model does not record the clients' preprocessing "
                "(made by an older fedkern, or a client did not report it): the rows of %s are "
                "used as loaded; if the clients' data.NAME.prep or data.NAME.affine changed "
                "theirs, give the same --prep/--affine\n",
                cmd, data);
        return FK_OK;
    }
    /* a catalog set was loaded with its own standard steps: apply only what the clients did
     * beyond them; a file, every step */
    int cat[FK_PREP_MODEL_STEPS];
    int n_cat = fk_catalog_steps(data, cat, FK_PREP_MODEL_STEPS);
    int from = 0;
    if (n_cat > 0) {
        int prefix = n_cat <= rec.n;
        for (int i = 0; prefix && i < n_cat; i++)
            prefix = cat[i] == rec.code[i];
        if (!prefix) {
            fprintf(stderr,
                    "fedkern %s: warning: %s is a catalog set loaded with its own "
                    "preprocessing, which is not how the job's clients began theirs (%s); "
                    "the rows are used as loaded\n",
                    cmd, data, what);
            return FK_OK;
        }
        from = n_cat;
    }
    int zscore = 0;
    for (int i = from; i < rec.n; i++)
        zscore |= rec.code[i] == 3;
    if (from < rec.n || rec.d)
        fprintf(stderr, "fedkern %s: applying the clients' preprocessing the model records: %s%s\n",
                cmd, what,
                zscore ? " (the z-score on the file's own mean and std, as each client did on "
                         "its own)"
                       : "");
    rc = fk_prep_record_apply(&rec, from, &ds->X, err);
    if (rc) {
        fk_dataset_close(ds);
        return fk_err_prefix(err, rc, "%s: ", data);
    }
    return FK_OK;
}
