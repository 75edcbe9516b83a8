#include "cli/plot.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { W = 900, PANEL_H = 260, TOP = 50, GAP = 40, LEFT = 96, RIGHT = 180, BOTTOM = 50 };

static const uint32_t colours[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0x9467bd, 0xff7f0e, 0x8c564b};

/* ---- a canvas: the same drawing as SVG elements or as RGB pixels for PNG ---- */

typedef struct canvas {
    FILE *svg;    /* SVG: elements written here */
    uint8_t *rgb; /* PNG: W x h pixels, 3 bytes each */
    int h;
} canvas;

/* The classic 5 x 8 bitmap font (columns, bit 0 = top row) for ASCII 32..126. */
static const uint8_t font[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},
    {0x36, 0x49, 0x56, 0x20, 0x50}, {0x00, 0x08, 0x07, 0x03, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x2A, 0x1C, 0x7F, 0x1C, 0x2A}, {0x08, 0x08, 0x3E, 0x08, 0x08},
    {0x00, 0x80, 0x70, 0x30, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x00, 0x60, 0x60, 0x00},
    {0x20, 0x10, 0x08, 0x04, 0x02}, {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00},
    {0x72, 0x49, 0x49, 0x49, 0x46}, {0x21, 0x41, 0x49, 0x4D, 0x33}, {0x18, 0x14, 0x12, 0x7F, 0x10},
    {0x27, 0x45, 0x45, 0x45, 0x39}, {0x3C, 0x4A, 0x49, 0x49, 0x31}, {0x41, 0x21, 0x11, 0x09, 0x07},
    {0x36, 0x49, 0x49, 0x49, 0x36}, {0x46, 0x49, 0x49, 0x29, 0x1E}, {0x00, 0x00, 0x14, 0x00, 0x00},
    {0x00, 0x40, 0x34, 0x00, 0x00}, {0x00, 0x08, 0x14, 0x22, 0x41}, {0x14, 0x14, 0x14, 0x14, 0x14},
    {0x00, 0x41, 0x22, 0x14, 0x08}, {0x02, 0x01, 0x59, 0x09, 0x06}, {0x3E, 0x41, 0x5D, 0x59, 0x4E},
    {0x7C, 0x12, 0x11, 0x12, 0x7C}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},
    {0x7F, 0x41, 0x41, 0x41, 0x3E}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x09, 0x01},
    {0x3E, 0x41, 0x41, 0x51, 0x73}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},
    {0x7F, 0x02, 0x1C, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},
    {0x26, 0x49, 0x49, 0x49, 0x32}, {0x03, 0x01, 0x7F, 0x01, 0x03}, {0x3F, 0x40, 0x40, 0x40, 0x3F},
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x3F, 0x40, 0x38, 0x40, 0x3F}, {0x63, 0x14, 0x08, 0x14, 0x63},
    {0x03, 0x04, 0x78, 0x04, 0x03}, {0x61, 0x59, 0x49, 0x4D, 0x43}, {0x00, 0x7F, 0x41, 0x41, 0x41},
    {0x02, 0x04, 0x08, 0x10, 0x20}, {0x00, 0x41, 0x41, 0x41, 0x7F}, {0x04, 0x02, 0x01, 0x02, 0x04},
    {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x03, 0x07, 0x08, 0x00}, {0x20, 0x54, 0x54, 0x78, 0x40},
    {0x7F, 0x28, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x28}, {0x38, 0x44, 0x44, 0x28, 0x7F},
    {0x38, 0x54, 0x54, 0x54, 0x18}, {0x00, 0x08, 0x7E, 0x09, 0x02}, {0x18, 0xA4, 0xA4, 0x9C, 0x78},
    {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00}, {0x20, 0x40, 0x40, 0x3D, 0x00},
    {0x7F, 0x10, 0x28, 0x44, 0x00}, {0x00, 0x41, 0x7F, 0x40, 0x00}, {0x7C, 0x04, 0x78, 0x04, 0x78},
    {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38}, {0xFC, 0x18, 0x24, 0x24, 0x18},
    {0x18, 0x24, 0x24, 0x18, 0xFC}, {0x7C, 0x08, 0x04, 0x04, 0x08}, {0x48, 0x54, 0x54, 0x54, 0x24},
    {0x04, 0x04, 0x3F, 0x44, 0x24}, {0x3C, 0x40, 0x40, 0x20, 0x7C}, {0x1C, 0x20, 0x40, 0x20, 0x1C},
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44}, {0x4C, 0x90, 0x90, 0x90, 0x7C},
    {0x44, 0x64, 0x54, 0x4C, 0x44}, {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x77, 0x00, 0x00},
    {0x00, 0x41, 0x36, 0x08, 0x00}, {0x02, 0x01, 0x02, 0x04, 0x02},
};

static void pixel(canvas *c, int x, int y, uint32_t rgb, double alpha)
{
    if (x < 0 || x >= W || y < 0 || y >= c->h)
        return;
    uint8_t *p = c->rgb + 3 * ((size_t)y * W + (size_t)x);
    for (int k = 0; k < 3; k++) {
        double v = (double)(rgb >> (16 - 8 * k) & 0xff);
        p[k] = (uint8_t)lround(alpha * v + (1 - alpha) * p[k]);
    }
}

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

/* A filled rectangle (fill, opacity) with an optional outline (stroke, 0: none). */
static void cv_rect(canvas *c, double x, double y, double w, double h, int filled, uint32_t fill,
                    double opacity, int stroked, uint32_t stroke)
{
    if (c->svg) {
        fprintf(c->svg, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" ", x, y, w, h);
        if (filled)
            fprintf(c->svg, "fill=\"#%06x\" fill-opacity=\"%.2f\" ", (unsigned)fill, opacity);
        else
            fprintf(c->svg, "fill=\"none\" ");
        if (stroked)
            fprintf(c->svg, "stroke=\"#%06x\" ", (unsigned)stroke);
        fprintf(c->svg, "/>\n");
        return;
    }
    int x0 = (int)lround(x), y0 = (int)lround(y), x1 = (int)lround(x + w), y1 = (int)lround(y + h);
    for (int j = y0; filled && j < y1; j++)
        for (int i = x0; i < x1; i++)
            pixel(c, i, j, fill, opacity);
    for (int i = x0; stroked && i <= x1; i++) {
        pixel(c, i, y0, stroke, 1);
        pixel(c, i, y1, stroke, 1);
    }
    for (int j = y0; stroked && j <= y1; j++) {
        pixel(c, x0, j, stroke, 1);
        pixel(c, x1, j, stroke, 1);
    }
}

static void cv_line(canvas *c, double xa, double ya, double xb, double yb, uint32_t rgb, int width)
{
    if (c->svg) {
        fprintf(c->svg, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#%06x\" "
                        "stroke-width=\"%d\"/>\n", xa, ya, xb, yb, (unsigned)rgb, width);
        return;
    }
    double len = fmax(fabs(xb - xa), fabs(yb - ya));
    int steps = (int)ceil(len) + 1;
    for (int s = 0; s <= steps; s++) { /* dense samples, each a width x width dot */
        double t = (double)s / steps;
        int x = (int)lround(xa + t * (xb - xa)), y = (int)lround(ya + t * (yb - ya));
        for (int dy = 0; dy < width; dy++)
            for (int dx = 0; dx < width; dx++)
                pixel(c, x + dx - width / 2, y + dy - width / 2, rgb, 1);
    }
}

/* anchor: 0 start, 1 middle, 2 end; vertical: rotated -90 degrees about (x, y). Pixels: the
 * bitmap font at twice its size, baseline at y. */
static void cv_text(canvas *c, double x, double y, int size, int anchor, int vertical,
                    const char *s)
{
    if (c->svg) {
        static const char *const an[] = {"start", "middle", "end"};
        fprintf(c->svg, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" text-anchor=\"%s\"", x, y,
                size, an[anchor]);
        if (vertical)
            fprintf(c->svg, " transform=\"rotate(-90 %.2f %.2f)\"", x, y);
        fprintf(c->svg, ">");
        put_text(c->svg, s);
        fprintf(c->svg, "</text>\n");
        return;
    }
    int sc = 2, adv = 6 * sc, n = (int)strlen(s);
    double off = anchor == 0 ? 0 : anchor == 1 ? -0.5 * n * adv : -(double)n * adv;
    for (int k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)s[k];
        const uint8_t *g = font[ch >= 32 && ch < 127 ? ch - 32 : '?' - 32];
        for (int col = 0; col < 5; col++)
            for (int row = 0; row < 8; row++) {
                if (!(g[col] >> row & 1))
                    continue;
                for (int dy = 0; dy < sc; dy++)
                    for (int dx = 0; dx < sc; dx++) {
                        double u = off + k * adv + col * sc + dx, v = (row - 7) * sc + dy;
                        if (vertical) /* (u, v) -> (v, -u) */
                            pixel(c, (int)lround(x + v), (int)lround(y - u), 0x000000, 1);
                        else
                            pixel(c, (int)lround(x + u), (int)lround(y + v), 0x000000, 1);
                    }
            }
    }
}

/* ---- PNG: signature, IHDR, one zlib IDAT of filter-0 rows, IEND ---- */

static int chunk(FILE *f, const char *type, const uint8_t *data, uint32_t len)
{
    uint8_t be[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (len)
        crc = crc32(crc, data, len);
    uint8_t cb[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
    return fwrite(be, 1, 4, f) != 4 || fwrite(type, 1, 4, f) != 4 ||
           (len && fwrite(data, 1, len, f) != len) || fwrite(cb, 1, 4, f) != 4;
}

FK_CHECKRETURN static int write_png(FILE *f, const canvas *c, fk_err *err)
{
    size_t row = 1 + 3 * (size_t)W, raw_len = row * (size_t)c->h;
    uint8_t *raw = malloc(raw_len);
    uLongf zlen = compressBound((uLong)raw_len);
    uint8_t *z = malloc(zlen);
    int rc = raw && z ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory for the PNG");
    for (int y = 0; !rc && y < c->h; y++) {
        raw[row * (size_t)y] = 0; /* filter: none */
        memcpy(raw + row * (size_t)y + 1, c->rgb + 3 * (size_t)W * (size_t)y, 3 * (size_t)W);
    }
    if (!rc && compress2(z, &zlen, raw, (uLong)raw_len, 6) != Z_OK)
        rc = fk_err_set(err, FK_ENOMEM, "PNG: zlib could not compress the image");
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {0, 0, W >> 8, W & 0xff, 0, 0, (uint8_t)(c->h >> 8), (uint8_t)c->h, 8, 2,
                        0, 0, 0};
    if (!rc && (fwrite(sig, 1, 8, f) != 8 || chunk(f, "IHDR", ihdr, 13) ||
                chunk(f, "IDAT", z, (uint32_t)zlen) || chunk(f, "IEND", NULL, 0)))
        rc = fk_err_set(err, FK_EIO, "cannot write the PNG");
    free(raw);
    free(z);
    return rc;
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

static void panel(canvas *c, const fk_plot_panel *pn, int top, double x0, double x1,
                  const char *xlabel, int last)
{
    double y0, y1;
    panel_range(pn, &y0, &y1);
    int pw = W - LEFT - RIGHT, ph = PANEL_H;
#define PX(x) (LEFT + ((x) - x0) / (x1 - x0) * pw)
#define PY(y) (top + ph - ((y) - y0) / (y1 - y0) * ph)
    char num[32];
    double st = tick_step(y1 - y0);
    for (double v = ceil(y0 / st) * st; v <= y1 + 1e-9 * st; v += st) {
        double y = PY(v);
        cv_line(c, LEFT, y, LEFT + pw, y, 0xdddddd, 1);
        snprintf(num, sizeof num, "%.4g", fabs(v) < 1e-12 * st ? 0.0 : v);
        cv_text(c, LEFT - 6, y + 4, 12, 2, 0, num);
    }
    double sx = tick_step(x1 - x0);
    if (sx < 1)
        sx = 1; /* rounds and clients are whole numbers */
    for (double v = ceil(x0 / sx) * sx; v <= x1 + 1e-9; v += sx) {
        double x = PX(v);
        cv_line(c, x, top, x, top + ph, 0xdddddd, 1);
        snprintf(num, sizeof num, "%.6g", v == 0 ? 0.0 : v); /* no "-0" */
        cv_text(c, x, top + ph + 18, 12, 1, 0, num);
    }
    cv_rect(c, LEFT, top, pw, ph, 0, 0, 0, 1, 0x444444);
    cv_text(c, 18, top + ph / 2.0, 13, 1, 1, pn->ylabel);
    if (last)
        cv_text(c, LEFT + pw / 2.0, top + ph + 40, 13, 1, 0, xlabel);
    for (int s = 0; s < pn->n_series; s++) {
        const fk_plot_series *se = &pn->series[s];
        uint32_t col = colours[s % (int)(sizeof colours / sizeof *colours)];
        double bw = 0.6 * pw / (x1 - x0);
        for (int i = 0; i < se->n; i++) {
            double v = se->y[i];
            if (!isfinite(v))
                continue;
            v = fmin(fmax(v, y0), y1);
            if (se->style == FK_PLOT_BARS) {
                double yt = PY(v), yb = PY(fmax(y0, 0.0));
                cv_rect(c, PX(se->x[i]) - bw / 2, fmin(yt, yb), bw, fabs(yb - yt), 1, col, 0.6, 0,
                        0);
                continue;
            }
            double pv = i > 0 ? se->y[i - 1] : NAN; /* a NaN before is a gap: no segment */
            if (!isfinite(pv)) {
                cv_rect(c, PX(se->x[i]) - 2, PY(v) - 2, 4, 4, 1, col, 1, 0, 0); /* a point */
                continue;
            }
            pv = fmin(fmax(pv, y0), y1);
            if (se->style == FK_PLOT_STEPS) {
                cv_line(c, PX(se->x[i - 1]), PY(pv), PX(se->x[i]), PY(pv), col, 2);
                cv_line(c, PX(se->x[i]), PY(pv), PX(se->x[i]), PY(v), col, 2);
            } else {
                cv_line(c, PX(se->x[i - 1]), PY(pv), PX(se->x[i]), PY(v), col, 2);
            }
        }
        cv_rect(c, LEFT + pw + 12, top + 14 + 20 * s, 14, 4, 1, col, 1, 0, 0);
        cv_text(c, LEFT + pw + 32, top + 21 + 20 * s, 12, 0, 0, se->label ? se->label : "");
    }
#undef PX
#undef PY
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n > k && !strcmp(s + n - k, tail);
}

int fk_plot_write(const fk_plot *p, const char *path, fk_err *err)
{
    int png = ends_with(path, ".png");
    if (!png && !ends_with(path, ".svg"))
        return fk_err_set(err, FK_EINVAL, "plot file '%s': the name must end in .svg or .png",
                          path);
    canvas c = {.h = TOP + p->n_panels * (PANEL_H + GAP) + BOTTOM};
    FILE *f = fopen(path, png ? "wb" : "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "cannot write %s: %s", path, strerror(errno));
    if (png) {
        c.rgb = malloc(3 * (size_t)W * (size_t)c.h);
        if (!c.rgb) {
            fclose(f);
            return fk_err_set(err, FK_ENOMEM, "out of memory for the PNG");
        }
        memset(c.rgb, 0xff, 3 * (size_t)W * (size_t)c.h);
    } else {
        c.svg = f;
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
                   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, c.h, W, c.h);
    }
    cv_text(&c, W / 2.0, 30, 16, 1, 0, p->title ? p->title : "");
    double x0, x1;
    data_range(p, &x0, &x1);
    for (int k = 0; k < p->n_panels; k++)
        panel(&c, &p->panels[k], TOP + k * (PANEL_H + GAP), x0, x1, p->xlabel ? p->xlabel : "",
              k == p->n_panels - 1);
    int rc = FK_OK;
    if (png)
        rc = write_png(f, &c, err);
    else
        fprintf(f, "</svg>\n");
    free(c.rgb);
    if ((ferror(f) | fclose(f)) && !rc)
        rc = fk_err_set(err, FK_EIO, "cannot write %s", path);
    return rc;
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
    fk_plot_series who[2] = { /* participants drawn last: on top where they are equal */
        {.label = "planned", .x = x, .y = plan, .n = n, .style = FK_PLOT_STEPS},
        {.label = "participants", .x = x, .y = part, .n = n, .style = FK_PLOT_STEPS}};
    fk_plot_panel panels[4];
    int np = 0;
    if (nq)
        panels[np++] = (fk_plot_panel){.ylabel = "quality", .series = quality, .n_series = nq,
                                       .ymin = qmin - 0.02, .ymax = 1.02}; /* 0, 1 off the frame */
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
