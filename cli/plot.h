/* Per-round plots (quality metric, participation) as SVG or PNG (a small writer over zlib with
 * a built-in bitmap font), with no plotting program: what
 * `fedkern job plot` and `fedkern demo` draw. A plot is a column of panels sharing the x axis;
 * each panel holds lines, steps or bars. */
#ifndef FK_CLI_PLOT_H
#define FK_CLI_PLOT_H

#include "common/base/err.h"
#include "common/methods/method.h"

enum { FK_PLOT_LINE = 0, FK_PLOT_STEPS = 1, FK_PLOT_BARS = 2 };

typedef struct fk_plot_series {
    const char *label;
    const double *x, *y; /* n points, x ascending; a NaN y is a gap */
    int n;
    int style;           /* FK_PLOT_* */
} fk_plot_series;

typedef struct fk_plot_panel {
    const char *ylabel;
    const fk_plot_series *series;
    int n_series;
    double ymin, ymax; /* NaN: from the data */
} fk_plot_panel;

typedef struct fk_plot {
    const char *title, *xlabel;
    const fk_plot_panel *panels;
    int n_panels;
} fk_plot;

/* One closed round of a job: participation and quality (fk_report_fields order, NaN: not
 * measured). */
typedef struct fk_plot_round {
    int round, participants, planned;
    double q[FK_REPORT_N_FIELDS];
} fk_plot_round;

/* The per-round plot of a job (`fedkern job plot`, the demo): a panel of the [0,1] quality
 * metrics measured (accuracy, misclust, ari), one of rmse and one of the loss when measured,
 * and one of participation (participants and planned clients per round). */
FK_CHECKRETURN int fk_plot_rounds(const char *path, const char *title, const fk_plot_round *rows,
                                  int n, fk_err *err);
/* The same with one more panel (NULL: none) under the quality panels: `job plot`'s quality of
 * each client. */
FK_CHECKRETURN int fk_plot_rounds_with(const char *path, const char *title,
                                       const fk_plot_round *rows, int n,
                                       const fk_plot_panel *extra, fk_err *err);

/* Write the plot to path as SVG or PNG, by its extension; FK_EINVAL for another name (naming
 * the formats), FK_EIO when it cannot be written. */
FK_CHECKRETURN int fk_plot_write(const fk_plot *p, const char *path, fk_err *err);

#endif
