#include "cli/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { W = 900, PANEL_H = 260, TOP = 50, GAP = 40, LEFT = 80, RIGHT = 180, BOTTOM = 50 };

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#8c564b"};

/* Text for an SVG element: the five XML specials escaped. */
static void put_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about 5 ticks over span. */
static double tick_step(double span)
{
    if (!(span > 0))
        return 1.0;
    double raw = span / 5.0, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return p * (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0);
}

static void data_range(const fk_plot *p, double *x0, double *x1)
{
    *x0 = INFINITY;
    *x1 = -INFINITY;
    for (int k = 0; k < p->n_panels; k++)
        for (int s = 0; s < p->panels[k].n_series; s++) {
            const fk_plot_series *se = &p->panels[k].series[s];
            for (int i = 0; i < se->n; i++) {
                *x0 = fmin(*x0, se->x[i] - (se->style == FK_PLOT_BARS ? 0.5 : 0.0));
                *x1 = fmax(*x1, se->x[i] + (se->style == FK_PLOT_BARS ? 0.5 : 0.0));
            }
        }
    if (!(*x0 <= *x1)) { /* no points at all */
        *x0 = 0;
        *x1 = 1;
    }
    if (*x1 == *x0)
        *x1 = *x0 + 1;
}

static void panel_range(const fk_plot_panel *pn, double *y0, double *y1)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < pn->n_series; s++)
        for (int i = 0; i < pn->series[s].n; i++) {
            double v = pn->series[s].y[i];
            if (isfinite(v)) {
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        }
    if (pn->series && pn->n_series && pn->series[0].style == FK_PLOT_BARS)
        lo = fmin(lo, 0.0); /* bars stand on zero */
    if (!(lo <= hi)) {
        lo = 0;
        hi = 1;
    }
    if (hi == lo) { /* a flat line sits mid-panel */
        lo -= fabs(lo) > 0 ? 0.1 * fabs(lo) : 0.5;
        hi += fabs(hi) > 0 ? 0.1 * fabs(hi) : 0.5;
    }
    *y0 = isnan(pn->ymin) ? lo : pn->ymin;
    *y1 = isnan(pn->ymax) ? hi : pn->ymax;
    if (!(*y1 > *y0))
        *y1 = *y0 + 1;
}

static void panel(FILE *f, const fk_plot_panel *pn, int top, double x0, double x1,
                  const char *xlabel, int last)
{
    double y0, y1;
    panel_range(pn, &y0, &y1);
    int pw = W - LEFT - RIGHT, ph = PANEL_H;
#define PX(x) (LEFT + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (top + ph - ((y) - y0) / (y1 - y0) * ph)
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444\"/>\n", LEFT, top, pw, ph);
    double st = tick_step(y1 - y0);
    for (double v = ceil(y0 / st) * st; v <= y1 + 1e-9 * st; v += st) {
        double y = PY(v);
        fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#ddd\"/>\n"
                   "<text x=\"%d\" y=\"%.2f\" font-size=\"12\" text-anchor=\"end\">%.4g</text>\n",
                LEFT, y, LEFT + pw, y, LEFT - 6, y + 4, fabs(v) < 1e-12 * st ? 0.0 : v);
    }
    double sx = tick_step(x1 - x0);
    if (sx < 1)
        sx = 1; /* rounds and clients are whole numbers */
    for (double v = ceil(x0 / sx) * sx; v <= x1 + 1e-9; v += sx) {
        double x = PX(v);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#ddd\"/>\n"
                   "<text x=\"%.2f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%.6g</text>\n",
                x, top, x, top + ph, x, top + ph + 16, v);
    }
    fprintf(f, "<text x=\"20\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 20 %d)\">", top + ph / 2, top + ph / 2);
    put_text(f, pn->ylabel);
    fprintf(f, "</text>\n");
    if (last) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\">",
                LEFT + pw / 2, top + ph + 36);
        put_text(f, xlabel);
        fprintf(f, "</text>\n");
    }
    for (int s = 0; s < pn->n_series; s++) {
        const fk_plot_series *se = &pn->series[s];
        const char *c = colours[s % (int)(sizeof colours / sizeof *colours)];
        double bw = se->n > 1 ? 0.6 * pw / (x1 - x0) : 0.6 * pw;
        if (se->style == FK_PLOT_BARS) {
            for (int i = 0; i < se->n; i++)
                if (isfinite(se->y[i])) {
                    double yt = PY(fmax(se->y[i], y0)), yb = PY(fmax(y0, 0.0));
                    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                               "fill=\"%s\" fill-opacity=\"0.6\"/>\n",
                            PX(se->x[i]) - bw / 2, fmin(yt, yb), bw, fabs(yb - yt), c);
                }
        } else {
            int open = 0; /* a NaN ends the current polyline */
            for (int i = 0; i < se->n; i++) {
                double v = se->y[i];
                if (!isfinite(v)) {
                    if (open)
                        fprintf(f, "\"/>\n");
                    open = 0;
                    continue;
                }
                v = fmin(fmax(v, y0), y1);
                if (!open)
                    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                               "points=\"", c);
                else if (se->style == FK_PLOT_STEPS)
                    fprintf(f, "%.2f,%.2f ", PX(se->x[i]), PY(se->y[i - 1] < y0 ? y0 : fmin(se->y[i - 1], y1)));
                fprintf(f, "%.2f,%.2f ", PX(se->x[i]), PY(v));
                if (se->n == 1) /* one point: a visible dot */
                    fprintf(f, "%.2f,%.2f ", PX(se->x[i]) + 1, PY(v));
                open = 1;
            }
            if (open)
                fprintf(f, "\"/>\n");
        }
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>\n"
                   "<text x=\"%d\" y=\"%d\" font-size=\"12\">",
                LEFT + pw + 12, top + 14 + 18 * s, c, LEFT + pw + 32, top + 19 + 18 * s);
        put_text(f, se->label);
        fprintf(f, "</text>\n");
    }
#undef PX
#undef PY
}

int fk_plot_write(const fk_plot *p, const char *path, fk_err *err)
{
    size_t n = strlen(path);
    if (n < 4 || strcmp(path + n - 4, ".svg"))
        return fk_err_set(err, FK_EINVAL,
                          "plot file '%s': the name must end in .svg (the one format drawn; "
                          "convert with rsvg-convert for PNG)",
                          path);
    FILE *f = fopen(path, "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "cannot write %s: %s", path, strerror(errno));
    int h = TOP + p->n_panels * (PANEL_H + GAP) + BOTTOM;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">",
            W, h, W, h, W / 2);
    put_text(f, p->title);
    fprintf(f, "</text>\n");
    double x0, x1;
    data_range(p, &x0, &x1);
    for (int k = 0; k < p->n_panels; k++)
        panel(f, &p->panels[k], TOP + k * (PANEL_H + GAP), x0, x1, p->xlabel,
              k == p->n_panels - 1);
    fprintf(f, "</svg>\n");
    if (ferror(f) | fclose(f))
        return fk_err_set(err, FK_EIO, "cannot write %s", path);
    return FK_OK;
}

static int measured(const fk_plot_round *rows, int n, int f)
{
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].q[f]))
            return 1;
    return 0;
}

int fk_plot_rounds(const char *path, const char *title, const fk_plot_round *rows, int n,
                   fk_err *err)
{
    /* x, then per field, then participants and planned: one allocation */
    double *v = malloc((size_t)(n ? n : 1) * (FK_REPORT_N_FIELDS + 3) * sizeof *v);
    if (!v)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the plot");
    double *x = v, *part = v + (size_t)n * (FK_REPORT_N_FIELDS + 1), *plan = part + n;
    for (int i = 0; i < n; i++) {
        x[i] = rows[i].round;
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
            v[(size_t)n * (f + 1) + i] = rows[i].q[f];
        part[i] = rows[i].participants;
        plan[i] = rows[i].planned;
    }
    fk_plot_series quality[FK_REPORT_N_FIELDS], rmse[1], loss[1];
    int nq = 0, nr = 0, nl = 0;
    double qmin = 0.0;
    for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
        const char *name = fk_report_fields[f].name;
        if (!measured(rows, n, f))
            continue;
        fk_plot_series s = {.label = name, .x = x, .y = v + (size_t)n * (f + 1), .n = n};
        if (!strcmp(name, "accuracy") || !strcmp(name, "misclust") || !strcmp(name, "ari")) {
            quality[nq++] = s;
            for (int i = 0; i < n; i++)
                qmin = fmin(qmin, isfinite(s.y[i]) ? s.y[i] : 0.0); /* ari may be negative */
        } else if (!strcmp(name, "rmse")) {
            rmse[nr++] = s;
        } else if (!strcmp(name, "loss")) {
            loss[nl++] = s;
        }
    }
    fk_plot_series who[2] = {
        {.label = "participants", .x = x, .y = part, .n = n, .style = FK_PLOT_STEPS},
        {.label = "planned", .x = x, .y = plan, .n = n, .style = FK_PLOT_STEPS}};
    fk_plot_panel panels[4];
    int np = 0;
    if (nq)
        panels[np++] = (fk_plot_panel){.ylabel = "quality", .series = quality, .n_series = nq,
                                       .ymin = qmin, .ymax = 1.0};
    if (nr)
        panels[np++] = (fk_plot_panel){.ylabel = "rmse", .series = rmse, .n_series = 1,
                                       .ymin = NAN, .ymax = NAN};
    if (nl)
        panels[np++] = (fk_plot_panel){.ylabel = "loss", .series = loss, .n_series = 1,
                                       .ymin = NAN, .ymax = NAN};
    int most = 1;
    for (int i = 0; i < n; i++)
        most = rows[i].planned > most ? rows[i].planned : most;
    panels[np++] = (fk_plot_panel){.ylabel = "clients", .series = who, .n_series = 2,
                                   .ymin = 0, .ymax = most + 1};
    fk_plot p = {.title = title, .xlabel = "round", .panels = panels, .n_panels = np};
    int rc = fk_plot_write(&p, path, err);
    free(v);
    return rc;
}
