/*
 * args.c — the kernels' argument checks that need no device (args.h), for
 * the CUDA build and the build without CUDA alike.
 *
 * The one idea of the overlap test: a matrix's bytes are a periodic set, so
 * whether another matrix's rows touch it is a question about residues.
 * Rows of y are [y0 + j*sy, +wy) for j < ry; a byte t in [y0, y_end) is
 * y's iff (t - y0) mod sy < wy. A row of x lying inside [y0, y_end) at
 * offset r = (x_i - y0) mod sy misses y iff wy <= r <= sy - wx, i.e. iff
 * (r + wx - 1) mod sy >= wx + wy - 1. Over the rows i the offsets form the
 * arithmetic progression c + i*sx, and the number of its terms whose
 * residue falls below a bound is a difference of two floor sums
 * (sum floor((a*i + b) / m)), which the Euclid-like reduction computes in
 * O(log m) steps. The first and last rows of x, which may stick out of y's
 * ends, are tested on their own. So a C placed in the padding columns of A
 * (lda > k) is accepted, and one byte shared anywhere is refused, at any
 * size, without walking the rows.
 */
#include "kernels/args.h"

#include <limits.h>

#include "engine/error.h"
#include "kernels/tiles.h"

__extension__ typedef unsigned __int128 u128; /* addresses plus spans of up to 2^63 bytes, and their products */

/* sum over i in [0, n) of floor((a*i + b) / m), m > 0. Each round takes the
 * whole multiples of m out of a and b, then swaps the roles of the slope
 * and the modulus, as Euclid's algorithm does. */
static u128 floor_sum(u128 n, u128 m, u128 a, u128 b) {
    u128 sum = 0;
    for (;;) {
        if (a >= m) {
            sum += n * (n - 1) / 2 * (a / m);
            a %= m;
        }
        if (b >= m) {
            sum += n * (b / m);
            b %= m;
        }
        u128 top = a * n + b;
        if (top < m)
            return sum;
        n = top / m;
        b = top % m;
        u128 t = m;
        m = a;
        a = t;
    }
}

/* How many i in [0, n) have (c + i*a) mod m < t, for 0 <= t <= m:
 * [x mod m < t] = floor(x / m) - floor((x + m - t) / m) + 1. */
static u128 count_residues_below(u128 n, u128 m, u128 a, u128 c, u128 t) {
    return floor_sum(n, m, a, c) + n - floor_sum(n, m, a, c + m - t);
}

/* Whether [a, a + len) meets y (rows [y0 + j*sy, +wy) up to y_end). */
static int run_meets(u128 a, u128 len, u128 y0, u128 y_end, u128 sy, u128 wy) {
    u128 lo = a > y0 ? a : y0, hi = a + len < y_end ? a + len : y_end;
    if (lo >= hi)
        return 0;
    u128 r = (lo - y0) % sy;
    /* lo itself is y's, or the run reaches the start of y's next row (which
     * lies before hi <= y_end, so that row exists). */
    return r < wy || r + (hi - lo) > sy;
}

int carve_k_bytes_overlap(const carve_k_bytes *px, const carve_k_bytes *py) {
    carve_k_bytes x = *px, y = *py;
    if (!x.rows || !x.width || !y.rows || !y.width)
        return 0;
    /* Rows that touch or overlap one another are one run; one row's
     * stride is its width. */
    if (x.rows == 1 || x.stride <= x.width) {
        x.width = (x.rows - 1) * x.stride + x.width;
        x.rows = 1;
        x.stride = x.width;
    }
    if (y.rows == 1 || y.stride <= y.width) {
        y.width = (y.rows - 1) * y.stride + y.width;
        y.rows = 1;
        y.stride = y.width;
    }
    const u128 x0 = x.base, sx = x.stride, wx = x.width;
    const u128 y0 = y.base, sy = y.stride, wy = y.width;
    const u128 x_end = x0 + (u128)(x.rows - 1) * sx + wx, y_end = y0 + (u128)(y.rows - 1) * sy + wy;
    if (x_end <= y0 || y_end <= x0)
        return 0;
    /* The rows of x that reach into [y0, y_end): i in [lo, hi). */
    const u128 lo = x0 + wx > y0 ? 0 : (y0 - x0 - wx) / sx + 1;
    u128 hi = (y_end - 1 - x0) / sx + 1;
    if (hi > x.rows)
        hi = x.rows;
    if (lo >= hi)
        return 0;
    if (run_meets(x0 + lo * sx, wx, y0, y_end, sy, wy) ||
        (hi - 1 > lo && run_meets(x0 + (hi - 1) * sx, wx, y0, y_end, sy, wy)))
        return 1;
    if (hi - lo <= 2)
        return 0;
    /* Rows lo+1 .. hi-2 lie inside [y0, y_end), where y's gaps are
     * sy - wy bytes long: a longer row always meets y. */
    if (wx + wy > sy)
        return 1;
    const u128 first = x0 + (lo + 1) * sx - y0;
    return count_residues_below(hi - lo - 2, sy, sx, first + wx - 1, wx + wy - 1) > 0;
}

/* ---- shared pieces of the checks ------------------------------------------ */

static carve_status check_aligned(const char *fn, const char *what, const void *p, unsigned align, const char *type) {
    if ((uintptr_t)p % align == 0)
        return CARVE_OK;
    return carve_fail(NULL, CARVE_ERR_INVALID,
                      "%s: %s (%p) is not aligned to %u bytes, the size of its %s elements", fn, what, p, align,
                      type);
}

static carve_status check_grid(const char *fn, int m, int n, int tile_m, int tile_n) {
    const int64_t blocks = carve_grid(m, n, tile_m, tile_n);
    if (blocks <= CARVE_MAX_GRID)
        return CARVE_OK;
    return carve_fail(NULL, CARVE_ERR_INVALID,
                      "%s: m=%d by n=%d needs %lld thread blocks of %d x %d, more than a grid holds (%lld)", fn, m,
                      n, (long long)blocks, tile_m, tile_n, (long long)CARVE_MAX_GRID);
}

/* The kernels take memory from the arena and hand it to the device: its
 * memory must be device memory (cuda or cuda_driver backend). */
static carve_status check_arena_kind(const char *fn, const carve_arena *arena) {
    carve_config cfg;
    carve_status st = carve_arena_get_config(arena, &cfg);
    if (st != CARVE_OK)
        return st;
    if (cfg.backend == CARVE_BACKEND_CUDA || cfg.backend == CARVE_BACKEND_CUDA_DRIVER)
        return CARVE_OK;
    return carve_fail(NULL, CARVE_ERR_INVALID,
                      "%s: the arena's backend is %s, whose memory no kernel can use (cuda or cuda_driver needed)",
                      fn, carve_backend_str(cfg.backend));
}

static carve_k_bytes matrix_bytes(const void *p, int outer, int inner, int ld, unsigned elem) {
    carve_k_bytes b = {(uintptr_t)p, (uint64_t)outer, (uint64_t)ld * elem, (uint64_t)inner * elem};
    return b;
}

/* ---- the three entry points ----------------------------------------------- */

carve_status carve_k_check_gemm_f32(const char *fn, int m, int n, int k, const float *A, int lda, const float *B,
                                    int ldb, const float *C, int ldc, int tile_m, int tile_n) {
    if (m <= 0 || n <= 0 || k <= 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: m=%d n=%d k=%d must all be positive", fn, m, n, k);
    if (lda < k || ldb < n || ldc < n)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "%s: leading dimensions lda=%d ldb=%d ldc=%d are below k=%d, n=%d", fn, lda, ldb, ldc,
                          k, n);
    /* Element spans; each below 2^62, so byte counts fit in 64 bits. */
    const uint64_t aspan = (uint64_t)(m - 1) * (uint64_t)lda + (uint64_t)k;
    const uint64_t bspan = (uint64_t)(k - 1) * (uint64_t)ldb + (uint64_t)n;
    const uint64_t cspan = (uint64_t)(m - 1) * (uint64_t)ldc + (uint64_t)n;
    const uint64_t limit = (uint64_t)1 << 61;
    if (aspan > limit || bspan > limit || cspan > limit)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: a matrix spans more than 2^61 elements", fn);
    carve_status st = check_grid(fn, m, n, tile_m, tile_n);
    if (st != CARVE_OK)
        return st;
    if (!A || !B || !C)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: %s is NULL", fn, !A ? "A" : !B ? "B" : "C");
    if ((st = check_aligned(fn, "A", A, 4, "fp32")) != CARVE_OK ||
        (st = check_aligned(fn, "B", B, 4, "fp32")) != CARVE_OK ||
        (st = check_aligned(fn, "C", C, 4, "fp32")) != CARVE_OK)
        return st;
    const carve_k_bytes a = matrix_bytes(A, m, k, lda, 4), b = matrix_bytes(B, k, n, ldb, 4);
    const carve_k_bytes c = matrix_bytes(C, m, n, ldc, 4);
    if (carve_k_bytes_overlap(&c, &a) || carve_k_bytes_overlap(&c, &b))
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: C [%p, %d x %d, ldc %d] overlaps %s (they share bytes)",
                          fn, (const void *)C, m, n, ldc, carve_k_bytes_overlap(&c, &a) ? "A" : "B");
    return CARVE_OK;
}

static const char *dtype_name(carve_dtype t) {
    switch (t) {
    case CARVE_DTYPE_F32: return "f32";
    case CARVE_DTYPE_F16: return "f16";
    case CARVE_DTYPE_BF16: return "bf16";
    }
    return "unknown";
}

carve_status carve_k_check_gemm(const char *fn, const carve_arena *arena, carve_order order, carve_transpose transa,
                                carve_transpose transb, int m, int n, int k, const void *A, int lda, const void *B,
                                int ldb, const void *C, int ldc, carve_dtype ab_type, carve_dtype c_type) {
    if (order != CARVE_ROW_MAJOR && order != CARVE_COL_MAJOR)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: order %d is neither row- nor column-major", fn, (int)order);
    if ((transa != CARVE_NO_TRANS && transa != CARVE_TRANS) || (transb != CARVE_NO_TRANS && transb != CARVE_TRANS))
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: transa=%d transb=%d must be CARVE_NO_TRANS or CARVE_TRANS",
                          fn, (int)transa, (int)transb);
    if (ab_type != CARVE_DTYPE_F16 && ab_type != CARVE_DTYPE_BF16)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: input type %s is not f16 or bf16", fn,
                          dtype_name(ab_type));
    if (c_type != ab_type && c_type != CARVE_DTYPE_F32)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: output type %s must be %s or f32", fn, dtype_name(c_type),
                          dtype_name(ab_type));
    if (m <= 0 || n <= 0 || k <= 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: m=%d n=%d k=%d must all be positive", fn, m, n, k);
    const int row = order == CARVE_ROW_MAJOR, ta = transa == CARVE_TRANS, tb = transb == CARVE_TRANS;
    /* Stored shapes (rows x cols of each matrix as laid out in `order`). */
    const int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int b_rows = tb ? n : k, b_cols = tb ? k : n;
    const int a_min = row ? a_cols : a_rows, b_min = row ? b_cols : b_rows, c_min = row ? n : m;
    if (lda < a_min || ldb < b_min || ldc < c_min)
        return carve_fail(NULL, CARVE_ERR_INVALID,
                          "%s: leading dimensions lda=%d ldb=%d ldc=%d are below the minimum %d, %d, %d", fn, lda,
                          ldb, ldc, a_min, b_min, c_min);
    carve_status st;
    if (arena && (st = check_arena_kind(fn, arena)) != CARVE_OK)
        return st;
    /* Outer extent (rows of the storage order) and inner extent of each. */
    const int a_outer = row ? a_rows : a_cols, a_inner = row ? a_cols : a_rows;
    const int b_outer = row ? b_rows : b_cols, b_inner = row ? b_cols : b_rows;
    const int c_outer = row ? m : n, c_inner = row ? n : m;
    const uint64_t aspan = (uint64_t)(a_outer - 1) * (uint64_t)lda + (uint64_t)a_inner;
    const uint64_t bspan = (uint64_t)(b_outer - 1) * (uint64_t)ldb + (uint64_t)b_inner;
    const uint64_t cspan = (uint64_t)(c_outer - 1) * (uint64_t)ldc + (uint64_t)c_inner;
    const uint64_t limit = (uint64_t)1 << 60;
    if (aspan > limit || bspan > limit || cspan > limit)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: a matrix spans more than 2^60 elements", fn);
    if ((st = check_grid(fn, m, n, CARVE_K_GRID_TILE, CARVE_K_GRID_TILE)) != CARVE_OK)
        return st;
    if (!A || !B || !C)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: %s is NULL", fn, !A ? "A" : !B ? "B" : "C");
    const unsigned csize = c_type == CARVE_DTYPE_F32 ? 4 : 2;
    if ((st = check_aligned(fn, "A", A, 2, dtype_name(ab_type))) != CARVE_OK ||
        (st = check_aligned(fn, "B", B, 2, dtype_name(ab_type))) != CARVE_OK ||
        (st = check_aligned(fn, "C", C, csize, dtype_name(c_type))) != CARVE_OK)
        return st;
    const carve_k_bytes a = matrix_bytes(A, a_outer, a_inner, lda, 2), b = matrix_bytes(B, b_outer, b_inner, ldb, 2);
    const carve_k_bytes c = matrix_bytes(C, c_outer, c_inner, ldc, csize);
    if (carve_k_bytes_overlap(&c, &a) || carve_k_bytes_overlap(&c, &b))
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: C [%p, %d x %d stored, ldc %d] overlaps %s (they share bytes)",
                          fn, C, c_outer, c_inner, ldc, carve_k_bytes_overlap(&c, &a) ? "A" : "B");
    return CARVE_OK;
}

carve_status carve_k_check_reduce(const char *fn, const carve_arena *arena, const float *x, size_t n,
                                  const float *out) {
    if (!arena)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: arena is NULL", fn);
    carve_status st = check_arena_kind(fn, arena);
    if (st != CARVE_OK)
        return st;
    if (n == 0)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: n is 0 (the sum of nothing has no device result)", fn);
    if (!x || !out)
        return carve_fail(NULL, CARVE_ERR_INVALID, "%s: %s is NULL", fn, !x ? "x" : "out");
    if ((st = check_aligned(fn, "x", x, 4, "fp32")) != CARVE_OK ||
        (st = check_aligned(fn, "out", out, 4, "fp32")) != CARVE_OK)
        return st;
    return CARVE_OK;
}
