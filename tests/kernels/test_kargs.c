/*
 * test_kargs.c — the kernels' argument checks without a device: the edges
 * where a legal or illegal call used to go wrong before anything reached
 * the GPU. Runs on every machine, in every build (suite unit).
 *
 *  - tile counts (lib/kernels/tiles.h) at extents up to INT_MAX, against
 *    64-bit arithmetic: (k + BK - 1) / BK overflowed an int for k within a
 *    tile of INT_MAX, so the main loop never ran and C came back as beta*C;
 *    every k index of the last tile must still fit in an int;
 *  - the grid check: ceil(m/128) * ceil(n/128) thread blocks, in 64 bits,
 *    refused exactly above 2^31 - 1 (it used to wrap negative for m or n
 *    within 127 of INT_MAX and pass);
 *  - alignment: each pointer aligned to its element's size (an fp32 C at
 *    2 mod 4 bytes or a bf16 operand at an odd address would fault on the
 *    device after CARVE_OK);
 *  - overlap: exact on the bytes each matrix reads or writes: C in A's
 *    padding columns is accepted, one shared byte is refused; checked
 *    against a byte map on small random layouts, against a per-row
 *    reference on layouts of up to 65536 rows and strides of gigabytes,
 *    and on 2^31 - 1 interleaved rows;
 *  - the public functions give CARVE_ERR_INVALID for bad arguments whatever
 *    the build and device (the build without CUDA used to answer
 *    CARVE_ERR_NO_DEVICE first), and CARVE_ERR_NO_DEVICE for good ones
 *    without a device; a host or virtual arena is refused, a NULL one too
 *    where one is needed.
 */
#include <limits.h>
#include <stdint.h>

#include "carve_kernels.h"
#include "kernels/args.h"
#include "kernels/tiles.h"
#include "test_util.h"

static test_rng rng;

/* ---- tile counts ----------------------------------------------------------- */

static void check_tiles(void) {
    static const int tiles[] = {1, 2, 3, 7, 8, 16, 32, 64, 127, 128, 256};
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        const int tile = tiles[t];
        unsigned long bad = 0;
        for (int64_t e = 0; e <= 1000; e++)
            bad += carve_tiles((int)e, tile) != (int)((e + tile - 1) / tile);
        for (int64_t e = INT_MAX - 1000; e <= INT_MAX; e++)
            bad += (int64_t)carve_tiles((int)e, tile) != (e + tile - 1) / tile;
        CHECK(bad == 0);
    }
    CHECK(carve_tiles(INT_MAX, 8) == 1 << 28);
    CHECK(carve_tiles(INT_MAX, 128) == 1 << 24);
    CHECK(carve_tiles(INT_MAX - 126, 128) == 1 << 24);
    CHECK(carve_tiles(INT_MAX - 127, 128) == (1 << 24) - 1); /* 2^31 - 128: whole tiles */
    CHECK(carve_grid(INT_MAX, INT_MAX, 128, 128) == (int64_t)1 << 48);
    CHECK(carve_grid(INT_MAX, 1, 64, 64) == (int64_t)1 << 25);

    /* The kernels' k tiles (BK 8, 16, 32 for fp32; 32 for mma.sync, 64 for
     * wgmma): the last tile starts at (tiles - 1) * BK and its last index,
     * read or predicated, is below 2^31; the lean copies take the
     * unpredicated path for a tile at k0 exactly when k0 + BK <= k, written
     * k0 <= k - BK so that it cannot overflow. */
    static const int bks[] = {8, 16, 32, 64};
    for (size_t b = 0; b < sizeof bks / sizeof bks[0]; b++) {
        const int bk = bks[b];
        unsigned long bad = 0;
        for (int64_t k = INT_MAX - 3 * bk; k <= INT_MAX; k++) {
            const int kt = carve_tiles((int)k, bk);
            const int64_t last0 = (int64_t)(kt - 1) * bk;
            bad += kt <= 0 || last0 > k - 1 || last0 + bk - 1 > INT_MAX;
            for (int64_t k0 = last0 - bk; k0 <= last0; k0 += bk)
                bad += ((int)k0 <= (int)k - bk) != (k0 + bk <= k);
        }
        CHECK(bad == 0);
    }
}

/* ---- exact overlap ----------------------------------------------------------- */

/* Per row of x, the one row of y it could meet first: O(x.rows), 128-bit,
 * a different method from args.c's. */
static int overlap_by_rows(const carve_k_bytes *x, const carve_k_bytes *y) {
    __extension__ typedef __int128 i128;
    if (!x->rows || !x->width || !y->rows || !y->width)
        return 0;
    const i128 sy = y->rows > 1 ? (i128)y->stride : (i128)y->width;
    for (uint64_t i = 0; i < x->rows; i++) {
        const i128 a = (i128)x->base + (i128)i * (i128)x->stride;
        /* smallest j with y0 + j*sy + wy > a */
        const i128 d = a - (i128)y->base - (i128)y->width;
        i128 j = d >= 0 ? d / sy + 1 : -((-d) / sy) + ((-d) % sy == 0 ? 1 : 0);
        if (j < 0)
            j = 0;
        if (j < (i128)y->rows && (i128)y->base + j * sy < a + (i128)x->width)
            return 1;
    }
    return 0;
}

/* Byte map of small layouts. */
static int overlap_by_bytes(const carve_k_bytes *x, const carve_k_bytes *y) {
    static unsigned char map[1 << 14];
    memset(map, 0, sizeof map);
    for (uint64_t i = 0; i < x->rows; i++)
        for (uint64_t b = 0; b < x->width; b++)
            map[x->base + i * x->stride + b] = 1;
    for (uint64_t j = 0; j < y->rows; j++)
        for (uint64_t b = 0; b < y->width; b++)
            if (map[y->base + j * y->stride + b])
                return 1;
    return 0;
}

static carve_k_bytes random_layout(uint64_t max_base, uint64_t max_rows, uint64_t max_width, uint64_t max_pad) {
    carve_k_bytes r;
    r.base = (uintptr_t)test_rng_below(&rng, max_base + 1);
    r.rows = 1 + test_rng_below(&rng, max_rows);
    r.width = 1 + test_rng_below(&rng, max_width);
    r.stride = r.width + test_rng_below(&rng, max_pad + 1);
    return r;
}

static void check_overlap(void) {
    /* Small layouts: every answer against the byte map, both orders. */
    unsigned long bad = 0, hits = 0;
    for (int it = 0; it < 200000; it++) {
        carve_k_bytes x = random_layout(600, 12, 40, it % 3 ? 40 : 3);
        carve_k_bytes y = random_layout(600, 12, 40, it % 5 ? 40 : 2);
        const int want = overlap_by_bytes(&x, &y);
        hits += want;
        bad += carve_k_bytes_overlap(&x, &y) != want;
        bad += carve_k_bytes_overlap(&y, &x) != want;
    }
    CHECK(bad == 0);
    CHECK(hits > 20000 && hits < 180000); /* both answers are exercised */

    /* Large layouts: strides up to 2^33 bytes (ld = 2^31 - 1 floats), rows up
     * to 2^16, against the per-row reference. */
    const int large = 200;
    bad = hits = 0;
    for (int it = 0; it < large; it++) {
        carve_k_bytes x, y;
        x.rows = 1 + test_rng_below(&rng, 1u << 16);
        x.width = 4 * (1 + test_rng_below(&rng, 1u << 12));
        x.stride = x.width + 4 * test_rng_below(&rng, it % 2 ? 64 : (uint64_t)1 << 31);
        y.rows = 1 + test_rng_below(&rng, 1u << 16);
        y.width = 2 * (1 + test_rng_below(&rng, 1u << 12));
        y.stride = y.width + 2 * test_rng_below(&rng, it % 3 ? 64 : (uint64_t)1 << 31);
        x.base = (uintptr_t)1 << 40;
        const uint64_t x_span = (x.rows - 1) * x.stride + x.width;
        y.base = x.base + test_rng_below(&rng, x_span) - (it % 4 == 0 ? test_rng_below(&rng, 1u << 16) : 0);
        const int want = overlap_by_rows(&x, &y);
        hits += want;
        bad += carve_k_bytes_overlap(&x, &y) != want;
        bad += carve_k_bytes_overlap(&y, &x) != want;
        bad += overlap_by_rows(&y, &x) != want;
    }
    CHECK(bad == 0);
    CHECK(hits > 0 && hits < (unsigned long)large);
    printf("overlap: %lu of %d large layouts overlap\n", hits, large);

    /* The case of the issue: C in the padding columns of A (lda = 2k), at
     * any size, and one byte more. */
    const uint64_t rows = (uint64_t)INT_MAX, k = 1000;
    carve_k_bytes a = {(uintptr_t)1 << 44, rows, 2 * k * 4, k * 4};
    carve_k_bytes c = {a.base + k * 4, rows, 2 * k * 4, k * 4};
    CHECK(carve_k_bytes_overlap(&c, &a) == 0);
    c.width += 1;
    CHECK(carve_k_bytes_overlap(&c, &a) == 1);
    c.width -= 1;
    c.base -= 1;
    CHECK(carve_k_bytes_overlap(&c, &a) == 1);
    /* Different strides: rows of 4 bytes every 8 (a) and every 12 (c) from
     * offset 4 meet at 16 (a's row 2, c's row 1); with c's stride 16 they
     * never meet. */
    carve_k_bytes a8 = {4096, (uint64_t)1 << 30, 8, 4}, c12 = {4100, (uint64_t)1 << 29, 12, 4};
    CHECK(carve_k_bytes_overlap(&a8, &c12) == 1);
    c12.stride = 16;
    CHECK(carve_k_bytes_overlap(&a8, &c12) == 0);
    CHECK(carve_k_bytes_overlap(&c12, &a8) == 0);
}

/* ---- the checks themselves ----------------------------------------------- */

#define P(addr) ((float *)(uintptr_t)(addr))
#define V(addr) ((void *)(uintptr_t)(addr))

static void check_gemm_f32_args(void) {
    const int T = CARVE_K_GRID_TILE;
    const uintptr_t A = (uintptr_t)1 << 48, B = (uintptr_t)2 << 48, C = (uintptr_t)3 << 48;
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 8, P(B), 8, P(C), 8, T, T));
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 0, 8, 8, P(A), 8, P(B), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, -1, P(A), 8, P(B), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 7, P(B), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, NULL, 8, P(B), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 8, P(B), 8, NULL, 8, T, T), CARVE_ERR_INVALID);

    /* k within one tile of INT_MAX is a legal call (A 1 x k, B k x 1). */
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 1, 1, INT_MAX, P(A), INT_MAX, P(B), 1, P(C), 1, T, T));
    /* m or n within 127 of INT_MAX: 2^24 blocks, legal. */
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", INT_MAX, 1, 1, P(A), 1, P(B), 1, P(C), 1, T, T));
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 1, INT_MAX - 100, 1, P(A), 1, P(B), INT_MAX, P(C), INT_MAX, T, T));
    /* ... and with n = 32768 that is 2^32 blocks: refused (the wrapped count
     * used to pass). */
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", INT_MAX - 5, 32768, 1, P(A), 1, P(B), 32768, P(C), 32768, T, T),
             CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "thread blocks") != NULL);
    /* The limit is exact: 2^16 x 2^15 tiles of 128 is 2^31 blocks (refused),
     * 2^16 x (2^15 - 1) fits; with 64 x 64 tiles, half those extents. */
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 1 << 23, 1 << 22, 1, P(A), 1, P(B), 1 << 22, P(C), 1 << 22, T, T),
             CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 1 << 23, (1 << 22) - 128, 1, P(A), 1, P(B), 1 << 22, P(C),
                                          1 << 22, T, T));
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 1 << 22, 1 << 21, 1, P(A), 1, P(B), 1 << 21, P(C), 1 << 21, 64, 64),
             CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 1 << 22, 1 << 21, 1, P(A), 1, P(B), 1 << 21, P(C), 1 << 21, T, T));
    /* Spans past 2^61 elements. */
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", INT_MAX, 8, 8, P(A), INT_MAX, P(B), 8, P(C), 8, T, T),
             CARVE_ERR_INVALID);

    /* Alignment: fp32 elements on 4 bytes. */
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 8, P(B), 8, P(C + 2), 8, T, T), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned") != NULL);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A + 1), 8, P(B), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 8, P(B + 3), 8, P(C), 8, T, T), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A + 4), 8, P(B + 12), 8, P(C + 8), 8, T, T));

    /* Overlap, exact: C in A's padding columns (lda = 2k) is fine; in A, or
     * one element into A's last row, is not; C over B likewise. */
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 64, 32, 32, P(A), 64, P(B), 32, P(A + 32 * 4), 64, T, T));
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 64, 32, 32, P(A), 64, P(B), 32, P(A + 31 * 4), 64, T, T),
             CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "overlaps A") != NULL);
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 64, 32, 32, P(A), 64, P(B), 32, P(A), 32, T, T), CARVE_ERR_INVALID);
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 64, 32, 32, P(A), 32, P(B), 64, P(B + 32 * 4), 64, T, T));
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 64, 32, 32, P(A), 32, P(B), 64, P(B + 33 * 4), 64, T, T),
             CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "overlaps B") != NULL);
    /* C right after A's last element, and right before A. */
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A), 8, P(B), 8, P(A + 64 * 4), 8, T, T));
    CHECK_OK(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A + 64 * 4), 8, P(B), 8, P(A), 8, T, T));
    CHECK_ST(NULL, carve_k_check_gemm_f32("f", 8, 8, 8, P(A + 63 * 4), 8, P(B), 8, P(A), 8, T, T),
             CARVE_ERR_INVALID);
}

static void check_gemm_args(carve_arena *host_arena, carve_arena *virt_arena) {
    const carve_order R = CARVE_ROW_MAJOR, Cm = CARVE_COL_MAJOR;
    const carve_transpose N = CARVE_NO_TRANS, Tr = CARVE_TRANS;
    const carve_dtype bf = CARVE_DTYPE_BF16, h = CARVE_DTYPE_F16, f32 = CARVE_DTYPE_F32;
    const uintptr_t A = (uintptr_t)1 << 48, B = (uintptr_t)2 << 48, C = (uintptr_t)3 << 48;
#define G(arena, o, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, ab, ct) \
    carve_k_check_gemm("g", arena, o, ta, tb, m, n, k, V(a), lda, V(b), ldb, V(c), ldc, ab, ct)
    CHECK_OK(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, f32));
    CHECK_ST(NULL, G(NULL, (carve_order)2, N, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK_ST(NULL, G(NULL, R, (carve_transpose)3, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C, 8, f32, f32), CARVE_ERR_INVALID);
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, h), CARVE_ERR_INVALID);
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 0, 8, A, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK_ST(NULL, G(NULL, Cm, N, N, 16, 8, 8, A, 8, B, 8, C, 16, bf, f32), CARVE_ERR_INVALID); /* lda < m */
    CHECK_OK(NULL, G(NULL, Cm, N, N, 16, 8, 8, A, 16, B, 8, C, 16, bf, f32));
    /* Arenas: none is fine, a host or virtual one is not. */
    CHECK_ST(NULL, G(host_arena, R, N, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "host") != NULL);
    CHECK_ST(NULL, G(virt_arena, R, N, N, 8, 8, 8, A, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);

    /* k within one tile of INT_MAX (A 1 x k, B stored transposed 1 x k). */
    CHECK_OK(NULL, G(NULL, R, N, Tr, 1, 1, INT_MAX, A, INT_MAX, B, INT_MAX, C, 1, bf, f32));
    CHECK_OK(NULL, G(NULL, R, N, N, INT_MAX, 1, 1, A, 1, B, 1, C, 1, bf, f32));
    CHECK_OK(NULL, G(NULL, Cm, N, N, 1, INT_MAX, 1, A, 1, B, 1, C, 1, h, h));
    CHECK_ST(NULL, G(NULL, R, N, N, INT_MAX - 5, 32768, 1, A, 1, B, 32768, C, 32768, bf, bf), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "thread blocks") != NULL);
    CHECK_ST(NULL, G(NULL, Cm, N, N, 32768, INT_MAX - 5, 1, A, 32768, B, 1, C, 32768, bf, bf), CARVE_ERR_INVALID);

    /* Alignment: 16-bit operands on 2 bytes (16 is only the fast path's
     * rule), C on its own element size. */
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A + 1, 8, B, 8, C, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned to 2 bytes") != NULL);
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B + 7, 8, C, 8, h, f32), CARVE_ERR_INVALID);
    CHECK_OK(NULL, G(NULL, R, N, N, 8, 8, 8, A + 2, 8, B + 6, 8, C, 8, bf, f32));
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C + 2, 8, bf, f32), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "aligned to 4 bytes") != NULL);
    CHECK_OK(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C + 2, 8, bf, bf));
    CHECK_ST(NULL, G(NULL, R, N, N, 8, 8, 8, A, 8, B, 8, C + 1, 8, bf, bf), CARVE_ERR_INVALID);

    /* Overlap on the stored bytes: an fp32 C (4-byte elements) in the
     * padding of a bf16 A with lda = 3k: A's rows are 2k bytes every 6k,
     * C's 4n bytes every 4*ldc. */
    const int k = 64, n = 16;
    CHECK_OK(NULL, G(NULL, R, N, N, 32, n, k, A, 3 * k, B, n, A + 2 * k, 3 * k / 2, bf, f32));
    CHECK_ST(NULL, G(NULL, R, N, N, 32, n, k, A, 3 * k, B, n, A + 2 * k - 2, 3 * k / 2, bf, bf), CARVE_ERR_INVALID);
    /* C right after A's last row, in column-major with transposes. */
    CHECK_OK(NULL, G(NULL, Cm, Tr, Tr, 8, 8, 8, A, 8, B, 8, A + 128, 8, bf, bf));
    CHECK_ST(NULL, G(NULL, Cm, Tr, Tr, 8, 8, 8, A, 8, B, 8, A + 126, 8, bf, bf), CARVE_ERR_INVALID);
#undef G
}

static void check_reduce_args(carve_arena *host_arena, carve_arena *virt_arena) {
    const uintptr_t X = (uintptr_t)1 << 48, O = (uintptr_t)2 << 48;
    CHECK_ST(NULL, carve_k_check_reduce("r", NULL, P(X), 10, P(O)), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_k_check_reduce("r", host_arena, P(X), 10, P(O)), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "host") != NULL);
    CHECK_ST(NULL, carve_k_check_reduce("r", virt_arena, P(X), 10, P(O)), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "virtual") != NULL);
}

/* ---- the public functions, in this build, on this machine ------------------- */

static void check_public(carve_arena *host_arena) {
    /* Without a device (or without CUDA) a good call is CARVE_ERR_NO_DEVICE;
     * with one, these made-up addresses are not device memory. */
    const carve_status good = carve_device_count() > 0 ? CARVE_ERR_INVALID : CARVE_ERR_NO_DEVICE;
    const uintptr_t A = (uintptr_t)1 << 48, B = (uintptr_t)2 << 48, C = (uintptr_t)3 << 48;
    const carve_order R = CARVE_ROW_MAJOR;
    const carve_transpose N = CARVE_NO_TRANS;
    const carve_dtype bf = CARVE_DTYPE_BF16, f32 = CARVE_DTYPE_F32;

    CHECK_ST(NULL, carve_matmul_f32(NULL, 0, 8, 8, P(A), P(B), P(C)), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, 8, 8, 8, P(A), P(B), NULL), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, 8, 8, 8, P(A), P(B), P(A)), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_matmul_f32(NULL, 8, 8, 8, P(A), P(B), P(C)), good);
    CHECK_ST(NULL, carve_gemm_f32(NULL, 8, 8, 8, 1.f, P(A), 8, P(B), 8, 0.f, P(C + 2), 8), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm_f32(NULL, INT_MAX - 5, 32768, 1, 1.f, P(A), 1, P(B), 32768, 0.f, P(C), 32768),
             CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm_f32(NULL, 1, 1, INT_MAX, 1.f, P(A), INT_MAX, P(B), 1, 0.f, P(C), 1), good);
    CHECK_ST(NULL, carve_gemm_f32(NULL, 64, 32, 32, 1.f, P(A), 64, P(B), 32, 0.f, P(A + 128), 64), good);

    CHECK_ST(NULL, carve_gemm(NULL, NULL, R, N, N, -1, 8, 8, 1.f, V(A), 8, V(B), 8, 0.f, V(C), 8, bf, f32),
             CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm(host_arena, NULL, R, N, N, 8, 8, 8, 1.f, V(A), 8, V(B), 8, 0.f, V(C), 8, bf, f32),
             CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm(NULL, NULL, R, N, N, 8, 8, 8, 1.f, V(A + 1), 8, V(B), 8, 0.f, V(C), 8, bf, f32),
             CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_gemm(NULL, NULL, R, N, N, 8, 8, 8, 1.f, V(A), 8, V(B), 8, 0.f, V(C), 8, bf, f32), good);

    CHECK_ST(NULL, carve_reduce_sum_f32(NULL, NULL, P(A), 10, P(B)), CARVE_ERR_INVALID);
    CHECK_ST(NULL, carve_reduce_sum_f32(host_arena, NULL, P(A), 10, P(B)), CARVE_ERR_INVALID);
    CHECK(strstr(carve_last_error(NULL), "host") != NULL);
}

int main(void) {
    test_rng_seed(&rng, test_seed(0x4a27ull));
    carve_arena *host_arena = test_arena(CARVE_BACKEND_HOST, 1, 0, 0);
    carve_arena *virt_arena = test_arena(CARVE_BACKEND_VIRTUAL, 1, 0, 0);
    check_tiles();
    check_overlap();
    check_gemm_f32_args();
    check_gemm_args(host_arena, virt_arena);
    check_reduce_args(host_arena, virt_arena);
    check_public(host_arena);
    carve_arena_destroy(host_arena);
    carve_arena_destroy(virt_arena);
    return test_finish();
}
