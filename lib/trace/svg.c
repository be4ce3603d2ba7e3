/*
 * svg.c — the arena over time as an SVG: x = event index, y = address.
 *
 * Two ideas keep the picture legible and small for any trace length:
 *  - The address axis is compressed. Every address range a buffer ever
 *    occupied is collected, overlapping or nearby ranges merge into
 *    islands, and the islands are stacked with a thin gap, so the unused
 *    space between segments disappears while bytes keep one scale.
 *  - Buffers are rasterized, not drawn one by one. Each buffer adds its
 *    fractional coverage of a fixed grid of cells to a 2-D difference array
 *    (a constant number of updates per buffer, whatever its size), one prefix
 *    sum gives the coverage of every cell by colour class, and each cell
 *    gets the colour of its dominant class in one of four shades by how
 *    much of it is covered. Runs of equal cells in a row merge, and equal
 *    runs in consecutive rows merge into one rectangle; rectangles of one
 *    colour share one <path>. When that still gives too many rectangles the
 *    grid is coarsened and drawn again, so the file stays around a few MB.
 * A strip on top charts requested, allocated and reserved bytes over time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/text.h"
#include "base/utf8.h"
#include "carve_trace.h"

#define PLOT_W CARVE_SVG_COLS
#define PLOT_H 600
#define CHART_H 140
#define LEFT 180
#define RIGHT 230
#define TITLE_H 62
#define MID_GAP 40
#define BOTTOM 56
#define PLOT_Y (TITLE_H + CHART_H + MID_GAP)
#define ISLAND_JOIN ((uint64_t)1 << 20) /* ranges closer than this share an island */
#define RECT_BUDGET 120000              /* rectangles before the grid is coarsened */
#define NLEVELS 4
#define MAX_CLASSES 8

static const char *const stream_colors[MAX_CLASSES] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
};
static const char *const size_colors[3] = {"#4e79a7", "#59a14f", "#e15759"};
static const char *const size_names[3] = {"small (up to 1 MiB)", "mid (1 to 10 MiB)",
                                          "large (10 MiB and up)"};
static const double shade_alpha[NLEVELS] = {0.3, 0.55, 0.8, 1.0};

/* ---- the compressed address axis --------------------------------------- */

typedef struct range {
    uint64_t lo, hi;
    double y0;  /* islands: top of the island in pixels */
} range;

static int range_cmp(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

typedef struct layout {
    range *isl;
    size_t n;
    double bpp;     /* bytes per pixel, one scale for every island */
    double gap;     /* pixels between islands */
} layout;

static uint64_t span_of(uint64_t size) {
    uint64_t r = (size + CARVE_ALIGNMENT - 1) / CARVE_ALIGNMENT * CARVE_ALIGNMENT;
    return r < size ? size : r;
}

#define CHUNK ((size_t)1 << 16) /* events decoded at once (a multiple of 4096) */

static int build_layout(const carve_trace *t, const carve_replay_rec *rec, layout *L) {
    memset(L, 0, sizeof(*L));
    size_t n = 0;
    for (size_t k = 0; k < t->nallocs; k++)
        n += rec->addr[k] != 0;
    if (n == 0)
        return 0;
    range *r = malloc(n * sizeof(*r));
    carve_trace_event *buf = malloc(CHUNK * sizeof(*buf));
    if (!r || !buf) {
        free(r);
        free(buf);
        return -1;
    }
    n = 0;
    size_t k = 0; /* allocations seen */
    for (size_t i = 0, got; (got = carve_trace_events(t, i, buf, CHUNK)) > 0; i += got)
        for (size_t j = 0; j < got; j++) {
            const carve_trace_event *e = &buf[j];
            if (e->op != 'a')
                continue;
            uint64_t lo = rec->addr[k++];
            if (lo && e->size) {
                uint64_t sz = span_of(e->size);
                r[n].lo = lo;
                r[n].hi = lo > UINT64_MAX - sz ? UINT64_MAX : lo + sz;
                n++;
            }
        }
    free(buf);
    if (n == 0) {
        free(r);
        return 0;
    }
    qsort(r, n, sizeof(*r), range_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && (r[i].lo <= r[m - 1].hi || r[i].lo - r[m - 1].hi < ISLAND_JOIN)) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    range *shrunk = realloc(r, m * sizeof(*r));
    L->isl = shrunk ? shrunk : r;
    L->n = m;
    double total = 0;
    for (size_t i = 0; i < m; i++)
        total += (double)(L->isl[i].hi - L->isl[i].lo);
    L->gap = m > 1 ? fmin(4.0, 0.15 * PLOT_H / (double)(m - 1)) : 0;
    L->bpp = total / ((double)PLOT_H - L->gap * (double)(m - 1));
    double y = 0;
    for (size_t i = 0; i < m; i++) {
        L->isl[i].y0 = y;
        y += (double)(L->isl[i].hi - L->isl[i].lo) / L->bpp + L->gap;
    }
    return 0;
}

static double addr_y(const layout *L, uint64_t a) {
    size_t lo = 0, hi = L->n; /* last island with isl.lo <= a */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (L->isl[mid].lo <= a)
            lo = mid;
        else
            hi = mid;
    }
    return L->isl[lo].y0 + (double)(a - L->isl[lo].lo) / L->bpp;
}

/* ---- the raster -------------------------------------------------------- */

typedef struct raster {
    int k, w, h, cell;  /* classes, columns, rows, pixels per cell */
    double *d;          /* k planes of (h+1) x (w+1): difference array, then coverage */
} raster;

static inline double *cell_at(const raster *r, int k, int y, int x) {
    return &r->d[((size_t)k * (size_t)(r->h + 1) + (size_t)y) * (size_t)(r->w + 1) + (size_t)x];
}

typedef struct piece {
    int lo, hi;  /* inclusive cell range */
    double w;    /* coverage of each of those cells along this axis */
} piece;

/* Cut [a, b) (in cells) into a partial first cell, full middle cells and a
 * partial last cell, clipped to [0, lim). */
static int cut(double a, double b, int lim, piece p[3]) {
    if (a < 0)
        a = 0;
    if (b > lim)
        b = lim;
    if (!(b > a))
        return 0;
    int ca = (int)a, cb = (int)ceil(b) - 1;
    if (cb >= lim)
        cb = lim - 1;
    if (cb < ca)
        cb = ca;
    if (ca == cb) {
        p[0] = (piece){ca, ca, b - a};
        return 1;
    }
    int n = 0;
    p[n++] = (piece){ca, ca, ca + 1 - a};
    if (cb > ca + 1)
        p[n++] = (piece){ca + 1, cb - 1, 1.0};
    p[n++] = (piece){cb, cb, b - cb};
    return n;
}

static void add_buffer(raster *r, const layout *L, int k, uint64_t addr, uint64_t size,
                       double x0, double x1) {
    double y0 = addr_y(L, addr), y1 = y0 + (double)span_of(size) / L->bpp;
    piece px[3], py[3];
    int nx = cut(x0, x1, r->w, px), ny = cut(y0 / r->cell, y1 / r->cell, r->h, py);
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) {
            double w = py[i].w * px[j].w;
            *cell_at(r, k, py[i].lo, px[j].lo) += w;
            *cell_at(r, k, py[i].lo, px[j].hi + 1) -= w;
            *cell_at(r, k, py[i].hi + 1, px[j].lo) -= w;
            *cell_at(r, k, py[i].hi + 1, px[j].hi + 1) += w;
        }
}

static int buffer_class(const carve_trace_event *e, int by_stream) {
    if (by_stream)
        return (int)(e->stream % MAX_CLASSES);
    return e->size <= ((uint64_t)1 << 20) ? 0 : e->size < ((uint64_t)10 << 20) ? 1 : 2;
}

/* A buffer while it is live: where and when it started. */
typedef struct open_buffer {
    size_t at;      /* its allocation's event index; SIZE_MAX when the slot is empty */
    uint64_t addr, size;
    int cls;
} open_buffer;

/* Fill r with the coverage of every cell. */
static int rasterize(raster *r, const carve_trace *t, const carve_replay_rec *rec, const layout *L,
                     int by_stream) {
    size_t planes = (size_t)r->k * (size_t)(r->h + 1) * (size_t)(r->w + 1);
    r->d = calloc(planes, sizeof(double));
    open_buffer *open = malloc((t->nslots ? t->nslots : 1) * sizeof(*open));
    carve_trace_event *buf = malloc(CHUNK * sizeof(*buf));
    if (!r->d || !open || !buf) {
        free(open);
        free(buf);
        return -1;
    }
    for (size_t s = 0; s < t->nslots; s++)
        open[s].at = SIZE_MAX;
    double xs = (double)r->w / (double)t->n;
    size_t nalloc = 0;
    for (size_t i = 0, got; (got = carve_trace_events(t, i, buf, CHUNK)) > 0; i += got)
        for (size_t j = 0; j < got; j++) {
            const carve_trace_event *e = &buf[j];
            open_buffer *o = &open[e->slot];
            if (e->op == 'a') {
                *o = (open_buffer){i + j, rec->addr[nalloc++], e->size, buffer_class(e, by_stream)};
                continue;
            }
            if (o->addr && o->size)
                add_buffer(r, L, o->cls, o->addr, o->size, (double)o->at * xs, (double)(i + j) * xs);
            o->at = SIZE_MAX;
        }
    free(buf);
    /* Buffers still live at the end run to the right edge. */
    for (size_t s = 0; s < t->nslots; s++) {
        const open_buffer *o = &open[s];
        if (o->at != SIZE_MAX && o->addr && o->size)
            add_buffer(r, L, o->cls, o->addr, o->size, (double)o->at * xs, (double)t->n * xs);
    }
    free(open);
    for (int k = 0; k < r->k; k++) {
        for (int y = 0; y <= r->h; y++)
            for (int x = 1; x <= r->w; x++)
                *cell_at(r, k, y, x) += *cell_at(r, k, y, x - 1);
        for (int y = 1; y <= r->h; y++)
            for (int x = 0; x <= r->w; x++)
                *cell_at(r, k, y, x) += *cell_at(r, k, y - 1, x);
    }
    return 0;
}

/* The colour index of a cell (class * NLEVELS + shade), -1 when empty. */
static int cell_color(const raster *r, int y, int x) {
    double total = 0, best = 0;
    int bk = 0;
    for (int k = 0; k < r->k; k++) {
        double c = *cell_at(r, k, y, x);
        total += c;
        if (c > best) {
            best = c;
            bk = k;
        }
    }
    if (total < 0.02)
        return -1;
    int level = (int)ceil(total * NLEVELS - 1e-9);
    if (level < 1)
        level = 1;
    if (level > NLEVELS)
        level = NLEVELS;
    return bk * NLEVELS + level - 1;
}

typedef struct run {
    int x0, x1, color, y0;  /* columns [x0, x1), first row y0 */
} run;

typedef struct paths {
    carve_strbuf p[MAX_CLASSES * NLEVELS];
    size_t nrects;
} paths;

static void emit(paths *ps, const raster *r, const run *u, int yend) {
    int c = r->cell;
    carve_strbuf_printf(&ps->p[u->color], "M%d %dh%dv%dh-%dz", u->x0 * c, u->y0 * c, (u->x1 - u->x0) * c,
              (yend - u->y0) * c, (u->x1 - u->x0) * c);
    ps->nrects++;
}

/* Turn the coverage into rectangles; -1 when over budget or out of memory. */
static int trace_paths(const raster *r, paths *ps, size_t budget) {
    run *prev = malloc((size_t)r->w * sizeof(run)), *cur = malloc((size_t)r->w * sizeof(run));
    int np = 0, rc = 0;
    if (!prev || !cur) {
        rc = -1;
        goto out;
    }
    for (int y = 0; y < r->h && rc == 0; y++) {
        int nc = 0;
        for (int x = 0; x < r->w;) {
            int col = cell_color(r, y, x), x1 = x + 1;
            while (x1 < r->w && cell_color(r, y, x1) == col)
                x1++;
            if (col >= 0)
                cur[nc++] = (run){x, x1, col, y};
            x = x1;
        }
        /* Continue the runs of the row above that match exactly; close the rest. */
        int i = 0;
        for (int j = 0; j < nc; j++) {
            while (i < np && prev[i].x0 < cur[j].x0)
                emit(ps, r, &prev[i++], y);
            if (i < np && prev[i].x0 == cur[j].x0 && prev[i].x1 == cur[j].x1 &&
                prev[i].color == cur[j].color)
                cur[j].y0 = prev[i++].y0;
        }
        while (i < np)
            emit(ps, r, &prev[i++], y);
        run *tmp = prev;
        prev = cur;
        cur = tmp;
        np = nc;
        if (ps->nrects > budget)
            rc = -1;
    }
    for (int i = 0; i < np && rc == 0; i++)
        emit(ps, r, &prev[i], r->h);
    for (size_t k = 0; k < MAX_CLASSES * NLEVELS; k++)
        if (ps->p[k].oom)
            rc = -1;
out:
    free(prev);
    free(cur);
    return rc;
}

static void paths_free(paths *ps) {
    for (size_t k = 0; k < MAX_CLASSES * NLEVELS; k++)
        free(ps->p[k].p);
    memset(ps, 0, sizeof(*ps));
}

/* ---- writing ----------------------------------------------------------- */

/* s as XML character data; a byte that is not UTF-8 becomes U+FFFD, and
 * control characters (not allowed in XML 1.0) '?'. */
static void xml_text(FILE *out, const char *s) {
    while (s && *s) {
        unsigned char c = (unsigned char)*s;
        size_t n = carve_utf8_char(s);
        if (c == '&')
            fputs("&amp;", out);
        else if (c == '<')
            fputs("&lt;", out);
        else if (c == '>')
            fputs("&gt;", out);
        else if (c == '"')
            fputs("&quot;", out);
        else if (c < 0x20 || c == 0x7f)
            fputc('?', out);
        else if (n == 0 || (n == 3 && c == 0xef && (unsigned char)s[1] == 0xbf && (unsigned char)s[2] >= 0xbe))
            fputs("\xef\xbf\xbd", out); /* not UTF-8, or U+FFFE / U+FFFF (not XML characters) */
        else
            fwrite(s, 1, n, out);
        s += n ? n : 1;
    }
}

static void blend(char *buf, size_t len, const char *hex, double alpha) {
    unsigned rgb = (unsigned)strtoul(hex + 1, NULL, 16);
    unsigned c[3] = {(rgb >> 16) & 255, (rgb >> 8) & 255, rgb & 255};
    for (int i = 0; i < 3; i++)
        c[i] = (unsigned)lround(255.0 - (255.0 - c[i]) * alpha);
    snprintf(buf, len, "#%02x%02x%02x", c[0], c[1], c[2]);
}

static void chart(FILE *out, const carve_replay_rec *rec, uint64_t vmax) {
    static const char *const names[3] = {"requested", "allocated", "reserved"};
    static const char *const colors[3] = {"#1f77b4", "#999999", "#d62728"};
    const uint64_t *series[3] = {rec->requested, rec->allocated, rec->reserved};
    char b1[32];
    fprintf(out, "<g transform=\"translate(%d,%d)\">\n", LEFT, TITLE_H);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n", PLOT_W,
            CHART_H);
    fprintf(out, "<text x=\"-8\" y=\"10\" text-anchor=\"end\">%s</text>\n",
            carve_format_bytes(b1, sizeof(b1), (size_t)vmax));
    fprintf(out, "<text x=\"-8\" y=\"%d\" text-anchor=\"end\">0</text>\n", CHART_H);
    fprintf(out, "<text x=\"-8\" y=\"%d\" text-anchor=\"end\">bytes</text>\n", CHART_H / 2);
    double sx = (double)PLOT_W / (double)rec->ncols;
    for (int s = 0; s < 3; s++) {
        /* Draw reserved last, on top: it is the curve the picture is about. */
        int k = s == 0 ? 1 : s == 1 ? 0 : 2;
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"",
                colors[k], k == 1 ? "1" : "1.5");
        for (size_t c = 0; c < rec->ncols; c++) {
            double v = vmax ? (double)series[k][c] / (double)vmax : 0;
            fprintf(out, "%s%.1f,%.1f", c ? " " : "", ((double)c + 0.5) * sx,
                    CHART_H - v * (CHART_H - 4));
        }
        fputs("\"/>\n", out);
    }
    for (int k = 0; k < 3; k++) {
        int y = 16 + 18 * k;
        fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>",
                PLOT_W + 14, y - 4, PLOT_W + 34, y - 4, colors[k]);
        fprintf(out, "<text x=\"%d\" y=\"%d\">%s bytes</text>\n", PLOT_W + 40, y, names[k]);
    }
    fputs("</g>\n", out);
}

static void axes(FILE *out, size_t n) {
    int y = PLOT_Y + PLOT_H;
    for (int i = 0; i <= 4; i++) {
        int x = LEFT + PLOT_W * i / 4;
        fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>", x, y, x,
                y + 5);
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%zu</text>\n", x, y + 18,
                (size_t)((double)n * i / 4.0));
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">event index</text>\n",
            LEFT + PLOT_W / 2, y + 38);
    fprintf(out,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">"
            "address (used ranges only, stacked)</text>\n",
            18, PLOT_Y + PLOT_H / 2, 18, PLOT_Y + PLOT_H / 2);
}

static void islands(FILE *out, const layout *L) {
    char b[32];
    fprintf(out, "<g transform=\"translate(%d,%d)\">\n", LEFT, PLOT_Y);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\" stroke=\"#ccc\"/>\n", PLOT_W,
            PLOT_H);
    double last_label = -100, band0 = 0, band1 = -10;
    for (size_t i = 0; i < L->n; i++) {
        double h = (double)(L->isl[i].hi - L->isl[i].lo) / L->bpp;
        /* Islands closer than a pixel share one background band, so that a
         * trace with very many segments still gives at most a few hundred. */
        if (L->isl[i].y0 > band1 + 1) {
            if (band1 > band0)
                fprintf(out, "<rect y=\"%.2f\" width=\"%d\" height=\"%.2f\" fill=\"#eceef2\"/>\n",
                        band0, PLOT_W, band1 - band0);
            band0 = L->isl[i].y0;
        }
        band1 = L->isl[i].y0 + h;
        /* Label islands tall enough and not crowding the previous label. */
        if (h >= 11 && L->isl[i].y0 - last_label >= 24) {
            fprintf(out,
                    "<text x=\"-8\" y=\"%.1f\" text-anchor=\"end\">0x%llx</text>"
                    "<text x=\"-8\" y=\"%.1f\" text-anchor=\"end\" fill=\"#666\">%s</text>",
                    L->isl[i].y0 + 10, (unsigned long long)L->isl[i].lo, L->isl[i].y0 + 21,
                    carve_format_bytes(b, sizeof(b), (size_t)L->isl[i].hi - L->isl[i].lo));
            last_label = L->isl[i].y0;
            fputc('\n', out);
        }
    }
    if (band1 > band0)
        fprintf(out, "<rect y=\"%.2f\" width=\"%d\" height=\"%.2f\" fill=\"#eceef2\"/>\n", band0,
                PLOT_W, band1 - band0);
    fputs("</g>\n", out);
}

static void legend(FILE *out, const raster *r, int by_stream, uint32_t nstreams, size_t nisl) {
    int x = LEFT + PLOT_W + 14, y = PLOT_Y + 6;
    char c[16];
    fprintf(out, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">live buffers by %s</text>\n", x,
            y + 4, by_stream ? "stream" : "size");
    int nk = by_stream ? (int)(nstreams < MAX_CLASSES ? nstreams : MAX_CLASSES) : 3;
    for (int k = 0; k < nk; k++) {
        y += 20;
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>", x, y - 6,
                by_stream ? stream_colors[k] : size_colors[k]);
        if (by_stream && nstreams > MAX_CLASSES)
            fprintf(out, "<text x=\"%d\" y=\"%d\">streams %d mod %d</text>\n", x + 20, y + 4, k,
                    MAX_CLASSES);
        else if (by_stream)
            fprintf(out, "<text x=\"%d\" y=\"%d\">stream %d</text>\n", x + 20, y + 4, k);
        else
            fprintf(out, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 20, y + 4, size_names[k]);
    }
    y += 30;
    fprintf(out, "<text x=\"%d\" y=\"%d\">shade: share of a cell</text>\n", x, y);
    fprintf(out, "<text x=\"%d\" y=\"%d\">covered by live buffers</text>\n", x, y + 14);
    y += 24;
    for (int l = 0; l < NLEVELS; l++) {
        blend(c, sizeof(c), size_colors[0], shade_alpha[l]);
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"20\" height=\"12\" fill=\"%s\"/>", x + 24 * l, y,
                c);
    }
    y += 34;
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"#eceef2\"/>", x, y - 10);
    fprintf(out, "<text x=\"%d\" y=\"%d\">address range used</text>\n", x + 20, y);
    fprintf(out, "<text x=\"%d\" y=\"%d\">at some time (free now)</text>\n", x + 20, y + 14);
    y += 36;
    fprintf(out, "<text x=\"%d\" y=\"%d\" fill=\"#666\">%zu island%s, cell %dx%d px</text>\n", x, y,
            nisl, nisl == 1 ? "" : "s", r->cell, r->cell);
}

int carve_svg_write(FILE *out, const carve_trace *t, const carve_replay_rec *rec, const carve_svg_info *info) {
    if (!out || !t || !rec || !info || (t->n && !rec->addr))
        return -1;
    layout L;
    if (build_layout(t, rec, &L) != 0)
        return -1;
    int by_stream = info->color_by_stream != 0;
    raster r = {by_stream ? MAX_CLASSES : 3, PLOT_W, PLOT_H, 1, NULL};
    paths ps;
    memset(&ps, 0, sizeof(ps));
    int ok = 0;
    if (L.n && t->n) {
        /* Coarsen the grid until the rectangles fit the budget. */
        for (int cell = 1; cell <= 8 && !ok; cell *= 2) {
            r.cell = cell;
            r.w = PLOT_W / cell;
            r.h = PLOT_H / cell;
            free(r.d);
            r.d = NULL;
            paths_free(&ps);
            if (rasterize(&r, t, rec, &L, by_stream) != 0)
                break;
            ok = trace_paths(&r, &ps, cell < 8 ? RECT_BUDGET : SIZE_MAX) == 0;
        }
        if (!ok) {
            free(r.d);
            free(L.isl);
            paths_free(&ps);
            return -1;
        }
    }

    uint64_t vmax = 0;
    for (size_t c = 0; c < rec->ncols; c++) {
        if (rec->reserved[c] > vmax)
            vmax = rec->reserved[c];
        if (rec->requested[c] > vmax)
            vmax = rec->requested[c];
    }
    int width = LEFT + PLOT_W + RIGHT, height = PLOT_Y + PLOT_H + BOTTOM;
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            width, height, width, height);
    fputs("<title>carve-replay: ", out);
    xml_text(out, info->trace_name);
    fputs("</title>\n<style>", out);
    char col[16];
    for (int k = 0; k < r.k; k++)
        for (int l = 0; l < NLEVELS; l++) {
            blend(col, sizeof(col), by_stream ? stream_colors[k] : size_colors[k], shade_alpha[l]);
            fprintf(out, ".c%d{fill:%s}", k * NLEVELS + l, col);
        }
    fputs("</style>\n", out);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", width, height);

    char b1[32], b2[32];
    fprintf(out, "<text x=\"%d\" y=\"24\" font-size=\"17\" font-weight=\"bold\">", LEFT);
    xml_text(out, info->trace_name);
    fputs("</text>\n", out);
    fprintf(out, "<text x=\"%d\" y=\"44\" font-size=\"12\">%s backend, %zu events, peak requested %s, "
                 "reserved peak %s, footprint ratio ",
            LEFT, info->backend, t->n, carve_format_bytes(b1, sizeof(b1), (size_t)t->peak_requested),
            carve_format_bytes(b2, sizeof(b2), (size_t)info->reserved_peak));
    if (info->footprint_ratio > 0)
        fprintf(out, "%.3f</text>\n", info->footprint_ratio);
    else
        fputs("n/a</text>\n", out);

    chart(out, rec, vmax);
    islands(out, &L);
    fprintf(out, "<g transform=\"translate(%d,%d)\" shape-rendering=\"crispEdges\">\n", LEFT, PLOT_Y);
    for (int k = 0; k < MAX_CLASSES * NLEVELS; k++)
        if (ps.p[k].len) {
            fprintf(out, "<path class=\"c%d\" d=\"", k);
            fwrite(ps.p[k].p, 1, ps.p[k].len, out);
            fputs("\"/>\n", out);
        }
    fputs("</g>\n", out);
    if (!t->n || !L.n)
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">no buffers</text>\n",
                LEFT + PLOT_W / 2, PLOT_Y + PLOT_H / 2);
    axes(out, t->n);
    legend(out, &r, by_stream, t->nstreams, L.n);
    fputs("</svg>\n", out);

    free(r.d);
    free(L.isl);
    paths_free(&ps);
    return ferror(out) ? -1 : 0;
}
