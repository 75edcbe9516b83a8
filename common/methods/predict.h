/* Helpers every job type's predict op shares (common/methods/predict.c): the queries checked
 * once, one clear error for bad input; a seed carried exactly in a model; the optional class
 * list by raw value; the answer's tensors.
 *
 * What a predict op answers (method.h `predict`): "labels" (n), the predicted raw class value,
 * the cluster / component index, or for a regression the predicted value; "distances" (n), a
 * score >= 0 of that prediction where smaller is surer (the op's docs say which); and, named
 * here so the CLI and the docs read them the same way, the optional "regression" (scalar 1:
 * "labels" are values, score them by RMSE), "clustering" (scalar 1: "labels" are cluster ids,
 * score them after the best matching of clusters to classes), "posterior" (n x R) and "scores"
 * (n x C, one column per class, larger is likelier).
 *
 * The queries bundle: "X" (n x p raw rows, as the file holds them; the op applies the model's
 * preprocessing), optionally "y" (n targets: a mixture of regressions needs them to say which
 * component a row belongs to) and "client" (scalar: which client's model to use where each
 * client has its own, e.g. FedGrEM's personalised mixtures). */
#ifndef FK_METHODS_PREDICT_H
#define FK_METHODS_PREDICT_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "common/data/dataset.h"
#include "common/methods/method.h"

/* Most rows one predict call takes; most values of an exported frequency matrix. */
enum { FK_PREDICT_MAX_ROWS = 1 << 24, FK_EXPORT_MAX_VALUES = 1 << 24 };

/* The query rows: "X" present, a matrix of exactly p columns (p = 0: any), at most
 * FK_PREDICT_MAX_ROWS rows, every value finite. *X points into the bundle. who names the job
 * type in the message ("sfl predict: ..."). */
FK_CHECKRETURN int fk_predict_rows(const fk_bundle *queries, size_t p, const char *who,
                                   const double **X, size_t *n, size_t *cols, fk_err *err);
/* The optional targets "y" of the queries (n finite values) into *y (NULL when absent). */
FK_CHECKRETURN int fk_predict_targets(const fk_bundle *queries, size_t n, const char *who,
                                      const double **y, fk_err *err);
/* Which client's model: the queries' "client" (an integer in [0, K)) into *k; absent: -1. */
FK_CHECKRETURN int fk_predict_client(const fk_bundle *queries, int K, const char *who, int *k,
                                     fk_err *err);

/* A 64-bit seed as two exact doubles (high and low 32 bits): a double holds 53 bits. */
FK_CHECKRETURN int fk_model_put_seed(fk_bundle *b, const char *name, uint64_t seed);
FK_CHECKRETURN int fk_model_get_seed(const fk_bundle *b, const char *name, uint64_t *seed,
                                     fk_err *err);
/* A scalar of the model: present, one finite value in [lo, hi] (integral: a whole number). */
FK_CHECKRETURN int fk_model_scalar(const fk_bundle *b, const char *name, double lo, double hi,
                                   int integral, const char *who, double *v, fk_err *err);

/* The job's class list by raw value, if the model holds one: tensor "class_values" (else
 * "classes", as sfl names it) of exactly k
 * finite values (k >= 2) in ascending order; NULL otherwise (e.g. a class count, or a model
 * written before class lists travelled). Class index c predicts the raw value list[c]. */
const double *fk_model_class_list(const fk_bundle *model, size_t k);
/* The raw label of class index c: list[c] with a list, else c itself. */
double fk_model_class_value(const double *list, int c);

/* Add "labels" and "distances" (n each) to out; FK_ENOMEM with who in the message. */
FK_CHECKRETURN int fk_predict_put(fk_bundle *out, const double *labels, const double *dist,
                                  size_t n, const char *who, fk_err *err);

/* Score a predict answer against a labelled data set, the one rule `model eval`, `job predict`
 * and the tests share: "regression" answers get rmse against ds->y_raw; others accuracy (the
 * predicted raw label equals the row's; an answer with scalar "rest_of" = v predicts NaN for
 * "any class but v", right when the row's label is not v) ; "clustering" answers are scored as
 * the jobs score them: misclust and ARI after the best matching of clusters to classes, and
 * accuracy = 1 - misclust (fk_report_score_clusters). r is
 * initialised here; FK_EINVAL when the answer and the data disagree in length or ds holds
 * nothing to score against. */
FK_CHECKRETURN int fk_predict_score(const fk_bundle *res, const fk_dataset *ds, fk_report *r,
                                    fk_err *err);

#endif
