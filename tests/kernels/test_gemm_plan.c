/*
 * test_gemm_plan.c — carve_gemm's Hopper plan without a device
 * (lib/kernels/gemm_tc_plan.h): the split-K factor, how splits share the k
 * tiles, forced factors made legal, the aligned copies' leading dimension
 * and the workspace sizes, at ordinary shapes and at extents up to INT_MAX.
 * Runs on every machine (suite unit).
 *
 *  - choose_splits returns the cheapest S of the cost model the header
 *    documents (recomputed here from the formula, over every legal S), never
 *    splits an output that has a block for every SM, never gives a split
 *    fewer than CARVE_TC_MIN_SPLIT_KTILES k tiles; the decode shapes of
 *    issue 29 split, the large ones do not;
 *  - split_begin cuts [0, ktiles) into S non-empty runs whose sizes differ
 *    by one at most, also at ktiles = ceil(INT_MAX / 64);
 *  - clamp_splits keeps S in [1, 16], at most the k tiles, and the grid
 *    (tiles * S) within 2^31 - 1;
 *  - copies pay from one whole k tile (64) on; copy_ld is the next
 *    multiple of 8, without overflow at INT_MAX;
 *    partial_bytes refuses (UINT64_MAX) what would pass 2^62 bytes;
 *  - the decode kernel: it takes 1 to 256 rows with A K-major, its narrow
 *    width, its cluster rule (the largest power of two up to 8 whose
 *    clusters, one a tile, are all held at once, with 4 k tiles a share at
 *    least; checked over 800 shapes against the H100's counts), forced
 *    sizes made legal, and the plan's lines (32 rows; 64 where one wave of
 *    128-column tiles covers n and k holds 64 tiles; 128 where it splits);
 *    its block width (64 columns where their tiles make more blocks in one
 *    wave and each share keeps 16 k tiles, 128 otherwise and past 128 rows;
 *    checked over 6,000 shapes), a width other than 64 counted as 128, and
 *    where the streaming kernel gives way (64 columns in clusters);
 *  - the streaming kernel (decode): it takes 1 to 32 rows and nothing
 *    else; the plan gives it 1 to 4 rows for outputs of at least 8192
 *    columns, 1 or 2 for at least 4096, and with B's rows off 16 bytes (the other path would copy
 *    B) also 1 to 16 rows for outputs of at least 1024 columns (B
 *    N-major) or 4096 (B K-major; 1 to 8 from 3072 and 1 to 4 from 1024),
 *    its cluster size there 6 or 8 from 2113 columns
 *    (carve_tc_stream_plan_cluster);
 *    CARVE_GEMM_PATH=stream all of them (carve_tc_stream_chosen either
 *    side of each line: m = 2, 3, 4, 5, 8, 9, 16, 17, 32, 33 and n = 1023, 1024,
 *    3071, 3072, 4095, 4096, 8191, 8192; fewer rows or more columns never leave it, in any
 *    case); the base and ldb
 *    checks gemm_tc.cu makes, and when A is staged by 16 bytes, are
 *    carve_tc_stream_b_rows and carve_tc_stream_a_vec; the kernel's row
 *    tiles carve_tc_stream_mt;
 *    its cluster size is the rule the header documents (recomputed here
 *    from its words): the smallest size from 1 to 4 (8 at 4 rows or
 *    fewer where 4 give at most a block an SM; and to a step of k a
 *    warp) whose grid gives 6/4 of a block an SM (5/4 above 16 rows),
 *    then with a K-major B the smallest from
 *    there up to 4 that leaves a warp 24 steps of k or fewer, if one does; the
 *    grid within a launch's limit, for m 1 to 32, n and k up to INT_MAX on
 *    devices of 1, 8, 78, 114 and 132 SMs (and 0 or -1, a failed query:
 *    one); named shapes on 132 SMs give
 *    the rule's sizes on the probes' shapes (32008 x 4096: 1, 4096 x 4096:
 *    4, 12289 x 4096: 2, 28672 x 8192 K-major: 2;
 *    8192 x 28672 K-major: 2); a forced size is clamped the same way; the warps' runs of k
 *    steps cover every step once, sizes differing by one at most.
 */
#include <limits.h>
#include <stdint.h>

#include "kernels/gemm_tc_plan.h"
#include "test_util.h"

/* The header's cost model, written out again from its comment: waves of
 * sms blocks, the last one's share of a full wave at least 0.8. */
static double model_cost(int M, int N, int K, int bn, int sms, int s) {
    const int64_t tiles = (int64_t)carve_tiles(M, 128) * carve_tiles(N, bn);
    const int ktiles = carve_tiles(K, 64);
    const double per = (double)((ktiles + s - 1) / s);
    double loops = 0;
    for (int64_t left = tiles * s; left > 0; left -= sms) {
        const double share = left >= sms ? 1.0 : (double)left / sms;
        loops += share > 0.8 ? share : 0.8;
    }
    if (s == 1)
        return loops * per;
    return loops * per + 8.0 * s * (double)M * N / ((double)sms * bn * 128.0) + 3.0;
}

static void check_choose_splits(void) {
    static const int ms[] = {1, 3, 8, 16, 32, 64, 100, 128, 129, 256, 512, 1024, 2048, 8192};
    static const int ns[] = {1, 50, 128, 1000, 4096, 11008, 12288, 14336, 28672, 50257};
    static const int ks[] = {1, 64, 255, 256, 511, 512, 768, 1001, 4096, 8192, 14336, 28672, INT_MAX};
    static const int smss[] = {1, 8, 78, 114, 132};
    long checked = 0, split = 0;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++)
                for (size_t d = 0; d < sizeof smss / sizeof smss[0]; d++) {
                    const int M = ms[a], N = ns[b], K = ks[c], sms = smss[d];
                    const int bn = carve_tc_choose_bn(M, N, sms);
                    const int s = carve_tc_choose_splits(M, N, K, bn, sms);
                    const int64_t tiles = (int64_t)carve_tiles(M, 128) * carve_tiles(N, bn);
                    const int ktiles = carve_tiles(K, 64);
                    checked++;
                    if (s < 1 || s > CARVE_TC_MAX_SPLITS) {
                        CHECK(0);
                        continue;
                    }
                    if (s == 1)
                        continue;
                    split++;
                    CHECK(tiles < sms);
                    CHECK(ktiles / s >= CARVE_TC_MIN_SPLIT_KTILES);
                    /* The cheapest legal S of the model; S = 1 on ties. */
                    const double cs = model_cost(M, N, K, bn, sms, s);
                    CHECK(cs < model_cost(M, N, K, bn, sms, 1));
                    for (int t = 2; t <= CARVE_TC_MAX_SPLITS && ktiles / t >= CARVE_TC_MIN_SPLIT_KTILES; t++)
                        CHECK(cs <= model_cost(M, N, K, bn, sms, t));
                }
    printf("choose_splits: %ld shapes, %ld split\n", checked, split);
    CHECK(split > 0);
    /* The shapes issue 29 measured, on 132 SMs: decode splits where few
     * SMs would be busy (32 tiles of 4096 columns), not where most are
     * (96 of 12288, 86 of 11008 at 128 rows: measured fastest unsplit);
     * large and prefill shapes do not. */
    CHECK(carve_tc_choose_splits(16, 12288, 4096, carve_tc_choose_bn(16, 12288, 132), 132) == 1);
    CHECK(carve_tc_choose_splits(128, 11008, 4096, carve_tc_choose_bn(128, 11008, 132), 132) == 1);
    CHECK(carve_tc_choose_splits(8, 14336, 4096, carve_tc_choose_bn(8, 14336, 132), 132) == 1);
    CHECK(carve_tc_choose_splits(128, 4096, 14336, carve_tc_choose_bn(128, 4096, 14336), 132) > 1);
    CHECK(carve_tc_choose_splits(1, 4096, 4096, carve_tc_choose_bn(1, 4096, 132), 132) > 1);
    CHECK(carve_tc_choose_splits(8192, 8192, 8192, carve_tc_choose_bn(8192, 8192, 132), 132) == 1);
    CHECK(carve_tc_choose_splits(2048, 14336, 4096, carve_tc_choose_bn(2048, 14336, 132), 132) == 1);
    CHECK(carve_tc_choose_splits(3072, 3072, 3072, carve_tc_choose_bn(3072, 3072, 132), 132) == 1);
    /* Short k never splits: each split would have too few tiles. */
    CHECK(carve_tc_choose_splits(16, 4096, 7 * 64, 128, 132) == 1);
    /* The tile width: fewest waves times (width + fixed), widest on ties. */
    CHECK(carve_tc_choose_bn(4096, 4096, 132) == 256);  /* 4 waves of 256 against 6 of 192, 8 of 128 */
    CHECK(carve_tc_choose_bn(3072, 3072, 132) == 192);  /* 3 waves either way: the narrower */
    CHECK(carve_tc_choose_bn(2048, 2048, 132) == 256);  /* one wave of 256 against two of 128 */
    CHECK(carve_tc_choose_bn(2048, 2048, 128) == 256);
    CHECK(carve_tc_choose_bn(1024, 1024, 132) == 128);  /* one wave whatever the width: the shortest tile */
    CHECK(carve_tc_choose_bn(16, 12288, 132) == 128);
    CHECK(carve_tc_choose_bn(2048, 14336, 132) == 256);
    static const int widths[3] = {256, 192, 128};
    long bn_checked = 0;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t d = 0; d < sizeof smss / sizeof smss[0]; d++) {
                const int M = ms[a], N = ns[b], sms = smss[d];
                const int bn = carve_tc_choose_bn(M, N, sms);
                int64_t cost[3], chosen = -1;
                for (int w = 0; w < 3; w++) {
                    cost[w] = ((int64_t)carve_tiles(M, 128) * carve_tiles(N, widths[w]) + sms - 1) / sms *
                              (widths[w] + CARVE_TC_TILE_FIXED);
                    if (widths[w] == bn)
                        chosen = cost[w];
                }
                CHECK(chosen >= 0);
                for (int w = 0; w < 3; w++) {
                    CHECK(chosen <= cost[w]);
                    if (chosen == cost[w] && widths[w] > bn)
                        CHECK(0); /* a tie goes to the wider */
                }
                bn_checked++;
            }
    printf("choose_bn: %ld shapes\n", bn_checked);
    /* TMA stores of C: only a 16-bit C, beta 0, unsplit, on 16 bytes with
     * rows on 16 bytes and N a multiple of 8 (a store writes whole 16-byte
     * pieces of a row). */
    CHECK(carve_tc_tma_store_ok(0x1000, 4096, 4096, 0.f, 0, 1));
    CHECK(carve_tc_tma_store_ok(0x1000, 4104, 4096, 0.f, 0, 1)); /* padded ldc */
    CHECK(!carve_tc_tma_store_ok(0x1000, 4096, 4096, 0.5f, 0, 1)); /* C is read */
    CHECK(!carve_tc_tma_store_ok(0x1000, 4096, 4096, 0.f, 1, 1)); /* fp32 C */
    CHECK(!carve_tc_tma_store_ok(0x1000, 4096, 4096, 0.f, 0, 2)); /* partials */
    CHECK(!carve_tc_tma_store_ok(0x1008, 4096, 4096, 0.f, 0, 1)); /* base on 8 bytes */
    CHECK(!carve_tc_tma_store_ok(0x1000, 4100, 4096, 0.f, 0, 1)); /* rows off 16 bytes */
    CHECK(!carve_tc_tma_store_ok(0x1000, 4104, 4100, 0.f, 0, 1)); /* N not a multiple of 8 */
    CHECK(!carve_tc_tma_store_ok(0x1000, 8, 1, 0.f, 0, 1));
    for (int n = 1; n <= 64; n++)
        for (int ld = n; ld <= n + 16; ld++)
            CHECK(carve_tc_tma_store_ok(0x100, ld, n, 0.f, 0, 1) == (n % 8 == 0 && ld % 8 == 0));
    /* Tiny products: at most 4096 multiply-adds and k at most 64, without
     * overflow (2^21 cubed wrapped to a negative product once). */
    CHECK(carve_tc_tiny(1, 1, 1) && carve_tc_tiny(7, 13, 17) && carve_tc_tiny(16, 16, 16) && carve_tc_tiny(64, 1, 64));
    CHECK(carve_tc_tiny(4096, 1, 1) && carve_tc_tiny(1, 4096, 1));
    CHECK(!carve_tc_tiny(17, 16, 16) && !carve_tc_tiny(1, 1, 65) && !carve_tc_tiny(64, 64, 2) && !carve_tc_tiny(1, 1, 4096));
    CHECK(!carve_tc_tiny(0, 1, 1) && !carve_tc_tiny(1, -1, 1) && !carve_tc_tiny(1, 1, 0));
    CHECK(!carve_tc_tiny(INT_MAX, INT_MAX, INT_MAX) && !carve_tc_tiny(65536, 65536, 1));
    CHECK(!carve_tc_tiny(1 << 21, 1 << 21, 1 << 21) && !carve_tc_tiny(4097, 1, 1));
    /* The persistent grid: one block an SM, never more than units. */
    CHECK(carve_tc_persist_grid(288, 132) == 132);
    CHECK(carve_tc_persist_grid(100, 132) == 100);
    CHECK(carve_tc_persist_grid(1, 132) == 1);
    CHECK(carve_tc_persist_grid((int64_t)1 << 40, 132) == 132);
    CHECK(carve_tc_persist_grid(5, 0) == 1);
}

static void check_split_begin(void) {
    static const int big[] = {INT_MAX / 64 + 1, INT_MAX / 64, 1 << 20};
    for (int kt = 1; kt <= 300 + 3; kt++) {
        const int ktiles = kt <= 300 ? kt : big[kt - 301];
        for (int s = 1; s <= CARVE_TC_MAX_SPLITS && s <= ktiles; s++) {
            int prev = carve_tc_split_begin(ktiles, 0, s), lo = INT_MAX, hi = 0, bad = 0;
            bad |= prev != 0;
            for (int i = 1; i <= s; i++) {
                const int b = carve_tc_split_begin(ktiles, i, s), size = b - prev;
                if (size < lo)
                    lo = size;
                if (size > hi)
                    hi = size;
                prev = b;
            }
            bad |= prev != ktiles || lo < 1 || hi - lo > 1 || lo != ktiles / s;
            test_checks++;
            if (bad) {
                char d[96];
                snprintf(d, sizeof d, "ktiles %d, %d splits: sizes %d..%d, end %d", ktiles, s, lo, hi, prev);
                test_fail(__FILE__, __LINE__, "splits share the k tiles", d);
            }
        }
    }
}

static void check_clamp(void) {
    CHECK(carve_tc_clamp_splits(0, 16, 4096, 4096, 128) == 1);
    CHECK(carve_tc_clamp_splits(-3, 16, 4096, 4096, 128) == 1);
    CHECK(carve_tc_clamp_splits(5, 16, 4096, 4096, 128) == 5);
    CHECK(carve_tc_clamp_splits(64, 16, 4096, 4096, 128) == CARVE_TC_MAX_SPLITS);
    CHECK(carve_tc_clamp_splits(8, 16, 4096, 3 * 64, 128) == 3);      /* one k tile a split at least */
    CHECK(carve_tc_clamp_splits(8, 16, 4096, 1, 128) == 1);           /* one k tile in all */
    CHECK(carve_tc_clamp_splits(8, 1000, 1000, 3 * 64 + 1, 128) == 4); /* a partial k tile counts */
    /* The grid: tiles * S within 2^31 - 1. INT_MAX x 4096: 2^24 x 32 = 2^29
     * tiles of 128 x 128, so 3 splits fit and 4 do not; x 8192 (2^30
     * tiles): no split fits. */
    CHECK(carve_tc_clamp_splits(4, INT_MAX, 128 * 32, 1 << 20, 128) == 3);
    CHECK(carve_tc_clamp_splits(16, INT_MAX, 128 * 32, 1 << 20, 128) == 3);
    CHECK(carve_tc_clamp_splits(2, INT_MAX, 128 * 32, 1 << 20, 128) == 2);
    CHECK(carve_tc_clamp_splits(4, INT_MAX, 128 * 64, 1 << 20, 128) == 1);
    for (int f = 1; f <= 20; f++) {
        const int M = INT_MAX, N = 128 * 20, K = 1 << 20; /* 2^24 * 20 tiles: 6 splits fit */
        const int s = carve_tc_clamp_splits(f, M, N, K, 128);
        const int64_t tiles = (int64_t)carve_tiles(M, 128) * carve_tiles(N, 128);
        CHECK(s >= 1 && tiles * s <= CARVE_MAX_GRID);
        CHECK(s == f || (s < f && tiles * (s + 1) > CARVE_MAX_GRID));
    }
}

static void check_sizes(void) {
    static const int cols[] = {1, 7, 8, 9, 127, 1000, 1001, 4093, INT_MAX - 8, INT_MAX - 7, INT_MAX};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        const int64_t ld = carve_tc_copy_ld(cols[i]);
        CHECK(ld % 8 == 0 && ld >= cols[i] && ld < (int64_t)cols[i] + 8);
    }
    CHECK(!carve_tc_copy_pays(1) && !carve_tc_copy_pays(17) && !carve_tc_copy_pays(63));
    CHECK(carve_tc_copy_pays(64) && carve_tc_copy_pays(1001) && carve_tc_copy_pays(INT_MAX));
    CHECK(carve_tc_copy_bytes(999, 1001) == carve_tc_ws_round(999u * 1008u * 2u));
    CHECK(carve_tc_copy_bytes(1, 1) == 256);
    CHECK(carve_tc_copy_bytes(INT_MAX, INT_MAX) % 256 == 0);
    CHECK(carve_tc_copy_bytes(INT_MAX, INT_MAX) >= (uint64_t)INT_MAX * (uint64_t)INT_MAX * 2u);
    CHECK(carve_tc_partial_bytes(16, 4096, 1) == 0);
    CHECK(carve_tc_partial_bytes(16, 4096, 4) == (uint64_t)16 * 4096 * 4 * 4);
    CHECK(carve_tc_partial_bytes(3, 5, 2) == 256);
    CHECK(carve_tc_partial_bytes(INT_MAX, INT_MAX, 16) == UINT64_MAX);
    CHECK(carve_tc_partial_bytes(INT_MAX, INT_MAX, 2) == UINT64_MAX);
    const uint64_t p = carve_tc_partial_bytes(1 << 20, 1 << 20, 16); /* 2^40 * 64 bytes = 2^46 */
    CHECK(p == (uint64_t)1 << 46);
}

/* The streaming kernel's cluster size, from the words of the header's
 * comment (carve_tc_stream_cluster). */
static int stream_rule(int M, int N, int K, int sms, int kmajor) {
    if (sms < 1)
        sms = 1;
    const int64_t tiles = (N + 63LL) / 64, steps = (K + 63LL) / 64;
    /* past 4 to fill the grid only at 4 rows or fewer where 4 give at most a block an SM; the K-major steps stay
     * within 4 */
    const int64_t cap = M <= 4 && tiles * 4 <= sms ? 8 : 4;
    int64_t hi = steps / 4 < cap ? steps / 4 : cap, hk = steps / 4 < 4 ? steps / 4 : 4;
    if (hi < 1)
        hi = 1;
    if (hk < 1)
        hk = 1;
    const int64_t quarters = M > 16 ? 5 : 6;
    int cs = 1;
    while (cs < hi && tiles * cs * 4 < quarters * sms)
        cs++;
    for (int c = cs; kmajor && c <= hk; c++)
        if ((steps + 4 * c - 1) / (4 * c) <= 24)
            return c;
    return cs;
}

static void check_stream(void) {
    /* What it takes. */
    CHECK(!carve_tc_stream_takes(0) && !carve_tc_stream_takes(-1));
    for (int m = 1; m <= 32; m++)
        CHECK(carve_tc_stream_takes(m));
    CHECK(!carve_tc_stream_takes(33) && !carve_tc_stream_takes(256));
    CHECK(!carve_tc_stream_takes(INT_MAX) && !carve_tc_stream_takes(INT_MIN));
    /* What the plan gives it with B on 16-byte rows (M <= 4 with
     * N >= 8192, M <= 2 with N >= 4096: measured), with B's rows off 16 bytes (that, and M <= 16
     * with N >= 1024 for B N-major; for B K-major M <= 16 from N >= 4096,
     * M <= 8 from 3072 and M <= 4 from 1024: measured),
     * and what CARVE_GEMM_PATH=stream gives it (all it takes, any way),
     * either side of every line. */
    static const struct {
        int m, n, plan, forced, odd, odd_k;
    } lines[] = {
        {1, 1, 0, 1, 0, 0},        {1, 1023, 0, 1, 0, 0},      {1, 1024, 0, 1, 1, 1},     {1, 4095, 0, 1, 1, 1},
        {1, 4096, 1, 1, 1, 1},     {1, 8191, 1, 1, 1, 1},      {1, 8192, 1, 1, 1, 1},     {2, 4095, 0, 1, 1, 1},
        {2, 4096, 1, 1, 1, 1},     {3, 4096, 0, 1, 1, 1},      {3, 8191, 0, 1, 1, 1},     {3, 8192, 1, 1, 1, 1},
        {4, 4096, 0, 1, 1, 1},
        {4, 8191, 0, 1, 1, 1},     {4, 8192, 1, 1, 1, 1},      {4, INT_MAX, 1, 1, 1, 1},  {5, 1, 0, 1, 0, 0},
        {5, 1023, 0, 1, 0, 0},     {5, 1024, 0, 1, 1, 0},      {5, 4095, 0, 1, 1, 1},     {5, 4096, 0, 1, 1, 1},
        {5, 8192, 0, 1, 1, 1},     {8, 11008, 0, 1, 1, 1},     {16, 1023, 0, 1, 0, 0},    {16, 1024, 0, 1, 1, 0},
        {16, 4095, 0, 1, 1, 0},    {16, 4096, 0, 1, 1, 1},     {16, INT_MAX, 0, 1, 1, 1}, {17, 1024, 0, 1, 0, 0},
        {17, 12288, 0, 1, 0, 0},   {17, INT_MAX, 0, 1, 0, 0},  {32, 28672, 0, 1, 0, 0},   {33, 28672, 0, 0, 0, 0},
        {33, 1, 0, 0, 0, 0}, /* forced only; none */
        /* B K-major with rows off 16 bytes: M <= 4 from 1024 columns, M <= 8 from 3072 */
        {4, 1023, 0, 1, 0, 0},     {4, 1024, 0, 1, 1, 1},      {2, 2048, 0, 1, 1, 1},     {5, 3071, 0, 1, 1, 0},
        {5, 3072, 0, 1, 1, 1},     {8, 3071, 0, 1, 1, 0},      {8, 3072, 0, 1, 1, 1},     {9, 3072, 0, 1, 1, 0},
        {9, 4095, 0, 1, 1, 0},     {12, 4096, 0, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const int m = lines[i].m, n = lines[i].n;
        int bad = 0;
        for (int bk = 0; bk < 2; bk++) { /* B N-major, K-major */
            const int plan = carve_tc_stream_chosen(m, n, 1, bk, 0), forced = carve_tc_stream_chosen(m, n, 1, bk, 1);
            const int odd = carve_tc_stream_chosen(m, n, 0, bk, 0), odd_forced = carve_tc_stream_chosen(m, n, 0, bk, 1);
            bad |= plan != lines[i].plan || forced != lines[i].forced ||
                   odd != (bk ? lines[i].odd_k : lines[i].odd) || odd_forced != forced;
        }
        if (bad) {
            char msg[192];
            snprintf(msg, sizeof msg, "m %d n %d: want plan %d, forced %d, rows off 16 bytes %d (B K-major %d)", m,
                     n, lines[i].plan, lines[i].forced, lines[i].odd, lines[i].odd_k);
            test_fail(__FILE__, __LINE__, "where the streaming kernel runs", msg);
        }
        test_checks++;
    }
    for (int v = 0; v < 4; v++) {
        const int aligned = v & 1, bk = v >> 1;
        CHECK(!carve_tc_stream_chosen(0, 28672, aligned, bk, 0) && !carve_tc_stream_chosen(0, 28672, aligned, bk, 1));
        CHECK(!carve_tc_stream_chosen(INT_MAX, 28672, aligned, bk, 1) &&
              !carve_tc_stream_chosen(-1, 28672, aligned, bk, 1));
        CHECK(!carve_tc_stream_chosen(33, 28672, aligned, bk, 0) && !carve_tc_stream_chosen(33, 28672, aligned, bk, 1));
    }
    /* Item 4's vocabulary projection (B's rows off 16 bytes) streams; a
     * narrow product never does under the plan, so the tiny kernel keeps
     * what it takes. */
    CHECK(carve_tc_stream_chosen(3, 50257, 0, 0, 0) && !carve_tc_stream_chosen(32, 50257, 0, 0, 0));
    CHECK(!carve_tc_stream_chosen(7, 13, 0, 0, 0) && carve_tc_stream_chosen(7, 13, 0, 0, 1));
    for (int m = 1; m <= 64; m++)
        for (int n = 1; n <= 1023; n = 2 * n + 1)
            for (int v = 0; v < 4; v++)
                CHECK(!carve_tc_stream_chosen(m, n, v & 1, v >> 1, 0));
    /* Forcing gives it all it takes and only adds rows to the plan's; the
     * plan keeps a call on it with fewer rows or more columns (B on 16-byte
     * rows or off them, either layout). */
    static const int line_ns[] = {1, 1023, 1024, 3071, 3072, 4095, 4096, 8191, 8192, 12288, 28672, INT_MAX};
    for (int v = 0; v < 4; v++)
        for (int m = -1; m <= 64; m++)
            for (size_t j = 0; j < sizeof line_ns / sizeof line_ns[0]; j++) {
                const int aligned = v & 1, bk = v >> 1;
                const int n = line_ns[j], plan = carve_tc_stream_chosen(m, n, aligned, bk, 0);
                CHECK(carve_tc_stream_chosen(m, n, aligned, bk, 1) == carve_tc_stream_takes(m) &&
                      (!plan || carve_tc_stream_chosen(m, n, aligned, bk, 1)));
                if (plan && m > 1)
                    CHECK(carve_tc_stream_chosen(m - 1, n, aligned, bk, 0));
                if (plan && j + 1 < sizeof line_ns / sizeof line_ns[0])
                    CHECK(carve_tc_stream_chosen(m, line_ns[j + 1], aligned, bk, 0));
                if (plan && aligned) /* rows off 16 bytes: at least the aligned plan */
                    CHECK(carve_tc_stream_chosen(m, n, 0, bk, 0));
                if (plan && !aligned && bk) /* B K-major: at most what N-major gets */
                    CHECK(carve_tc_stream_chosen(m, n, 0, 0, 0));
            }
    /* B's rows (the base and ldb gemm_tc.cu passes): 16-byte base and ldb a
     * multiple of 8, whatever else; the ldb of n near INT_MAX too. */
    CHECK(carve_tc_stream_b_rows(0x1000, 8) && carve_tc_stream_b_rows(0x1010, 4096));
    CHECK(carve_tc_stream_b_rows(0x1000, INT_MAX - 7) && !carve_tc_stream_b_rows(0x1000, INT_MAX));
    CHECK(!carve_tc_stream_b_rows(0x1002, 4096) && !carve_tc_stream_b_rows(0x1008, 4096));
    CHECK(!carve_tc_stream_b_rows(0x1000, 4100) && !carve_tc_stream_b_rows(0x1000, 1));
    /* A staged by 16 bytes only K-major with a 16-byte base and lda a
     * multiple of 8; M-major A always element by element. */
    CHECK(carve_tc_stream_a_vec(1, 0x2000, 64) && carve_tc_stream_a_vec(1, 0x2010, 8));
    CHECK(!carve_tc_stream_a_vec(0, 0x2000, 64));
    CHECK(!carve_tc_stream_a_vec(1, 0x2002, 64) && !carve_tc_stream_a_vec(1, 0x2008, 64));
    CHECK(!carve_tc_stream_a_vec(1, 0x2000, 65) && !carve_tc_stream_a_vec(1, 0x2000, 4));
    /* The kernel's 16-row tiles: one to 16 rows, two to 32. */
    for (int m = 1; m <= 32; m++)
        CHECK(carve_tc_stream_mt(m) == (m <= 16 ? 1 : 2));

    /* n: 12672 is 198 tiles, exactly 6/4 of a block on each of 132 SMs. */
    static const int ns[] = {1, 7, 8, 63, 64, 65, 1000, 4096, 11008, 12288, 12672, 14336, 28672, 50257, INT_MAX};
    /* k: the K-major step limit's edges too (6144 and 6208: 24 and 25
     * steps a warp at size 1; 20480: only size 4 meets it; 28672: none
     * up to 4 does); SM counts of 0 and less (a failed query) count as
     * one. */
    static const int ks[] = {1,    17,   63,    64,    65,    255,   256,   257,    768,
                             1001, 4096, 6144, 6208, 11008, 14336, 20480, 28672, 38400, INT_MAX};
    static const int smss[] = {-1, 0, 1, 8, 78, 114, 132};
    static const int ms[] = {1, 4, 16, 17, 32};
    long checked = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++)
            for (size_t d = 0; d < sizeof smss / sizeof smss[0]; d++)
                for (size_t e = 0; e < sizeof ms / sizeof ms[0]; e++)
                    for (int kmajor = 0; kmajor < 2; kmajor++) {
                        const int N = ns[a], K = ks[b], sms = smss[d], M = ms[e];
                        const int cs = carve_tc_stream_cluster(M, N, K, sms, kmajor);
                        const int64_t tiles = (N + 63LL) / 64;
                        checked++;
                        test_checks++;
                        if (cs < 1 || cs > (M <= 4 ? 8 : 4) || tiles * cs > CARVE_MAX_GRID ||
                            cs != stream_rule(M, N, K, sms, kmajor) ||
                            cs != carve_tc_stream_clamp_cluster(cs, K)) {
                            char msg[160];
                            snprintf(msg, sizeof msg, "M %d N %d K %d on %d SMs (%s): cluster %d, rule %d", M, N, K,
                                     sms, kmajor ? "K-major" : "N-major", cs, stream_rule(M, N, K, sms, kmajor));
                            test_fail(__FILE__, __LINE__, "stream cluster size", msg);
                        }
                    }
    printf("stream_cluster: %ld shapes\n", checked);
    /* The rule's sizes on the probes' shapes (132 SMs; docs/kernels.md
     * says where another size measured faster). */
    CHECK(carve_tc_stream_cluster(1, 32008, 4096, 132, 0) == 1); /* 501 tiles fill it */
    CHECK(carve_tc_stream_cluster(4, 4096, 4096, 132, 0) == 4);  /* 64 tiles */
    CHECK(carve_tc_stream_cluster(1, 11008, 4096, 132, 0) == 2);
    CHECK(carve_tc_stream_cluster(24, 4096, 4096, 132, 0) == 3); /* two row tiles: fewer blocks fit */
    CHECK(carve_tc_stream_cluster(4, 12289, 4096, 132, 0) == 2); /* 193 tiles: 386 blocks, not 579 */
    CHECK(carve_tc_stream_cluster(16, 50257, 768, 132, 0) == 1);
    CHECK(carve_tc_stream_cluster(1, 28672, 8192, 132, 1) == 2); /* K-major: 16 steps a warp, not 32 */
    CHECK(carve_tc_stream_cluster(1, 28672, 8192, 132, 0) == 1);
    CHECK(carve_tc_stream_cluster(1, 8192, 28672, 132, 1) == 2); /* no size up to 4 gets to 24 steps */
    CHECK(carve_tc_stream_cluster(1, 13, 17, 132, 0) == 1);      /* one step of k: one block */
    CHECK(carve_tc_stream_cluster(4, 12672, 4096, 132, 0) == 1); /* the grid exactly at 6/4 a block an SM */
    CHECK(carve_tc_stream_cluster(4, 12608, 4096, 132, 0) == 2); /* one tile short of it */
    CHECK(carve_tc_stream_cluster(1, 1025, 4096, 132, 0) == 8);  /* 17 tiles: the grid short even at 8 */
    CHECK(carve_tc_stream_cluster(4, 2049, 4096, 132, 0) == 6);  /* 33 tiles: 198 blocks at 6 */
    CHECK(carve_tc_stream_cluster(4, 2049, 4096, 131, 0) == 4);  /* 132 blocks at 4: more than an SM each */
    CHECK(carve_tc_stream_cluster(1, 3073, 4096, 132, 0) == 4);  /* 49 tiles: 5 ran slower than 4 */
    CHECK(carve_tc_stream_cluster(5, 2049, 4096, 132, 0) == 4);  /* past 4 rows: 4 at most */
    CHECK(carve_tc_stream_cluster(16, 1025, 4096, 132, 0) == 4);
    CHECK(carve_tc_stream_cluster(1, 1025, 768, 132, 0) == 3);   /* 12 k steps: 3 warps' worth a block */
    CHECK(carve_tc_stream_cluster(1, 1025, 28672, 132, 1) == 8); /* K-major: the grid's size first */
    CHECK(carve_tc_stream_cluster(1, 8192, 28672, 132, 1) == 2);
    CHECK(carve_tc_stream_cluster(1, 2049, 38400, 132, 1) == 6); /* the steps' rule stays within 4: not 7 */

    /* Forced sizes. */
    CHECK(carve_tc_stream_clamp_cluster(0, 4096) == 1 && carve_tc_stream_clamp_cluster(-2, 4096) == 1);
    CHECK(carve_tc_stream_clamp_cluster(5, 4096) == 5);
    CHECK(carve_tc_stream_clamp_cluster(64, 4096) == 8);
    CHECK(carve_tc_stream_clamp_cluster(8, 512) == 2);  /* 8 steps: 2 blocks of 4 warps */
    CHECK(carve_tc_stream_clamp_cluster(8, 17) == 1);
    CHECK(carve_tc_stream_clamp_cluster(3, INT_MAX) == 3);

    /* The plan's size with B's rows counted: B K-major with rows off 16
     * bytes, M <= 8, from 2113 columns (past sms / 4 tiles) to 4095: 6,
     * or 8 where k is over 6144; everything else as carve_tc_stream_cluster. */
    CHECK(carve_tc_stream_plan_cluster(1, 3072, 4097, 132, 1, 0) == 6);
    CHECK(carve_tc_stream_plan_cluster(1, 3072, 11009, 132, 1, 0) == 8);
    CHECK(carve_tc_stream_plan_cluster(8, 3584, 11009, 132, 1, 0) == 8);
    CHECK(carve_tc_stream_plan_cluster(1, 2113, 6144, 132, 1, 0) == 6);
    CHECK(carve_tc_stream_plan_cluster(1, 2113, 6145, 132, 1, 0) == 8);
    CHECK(carve_tc_stream_plan_cluster(1, 4095, 4097, 132, 1, 0) == 6);
    CHECK(carve_tc_stream_plan_cluster(1, 3072, 1000, 132, 1, 0) == 4); /* 16 k steps: 4 blocks of 4 warps */
    CHECK(carve_tc_stream_plan_cluster(1, 3072, 4097, 100, 1, 0) == 6); /* 48 tiles past 100 / 4 */
    CHECK(carve_tc_stream_plan_cluster(1, 3072, 4097, 0, 1, 0) == 6);
    {
        static const int pm[] = {-1, 0, 1, 4, 8, 9, 16, 32}, pn[] = {1, 1023, 1024, 2112, 2113, 3072, 4095, 4096, 8192};
        static const int pk[] = {1, 64, 2049, 4097, 6144, 6145, 11009, INT_MAX}, psm[] = {1, 66, 132, 528};
        for (size_t i = 0; i < sizeof pm / sizeof pm[0]; i++)
            for (size_t j = 0; j < sizeof pn / sizeof pn[0]; j++)
                for (size_t q = 0; q < sizeof pk / sizeof pk[0]; q++)
                    for (size_t r = 0; r < sizeof psm / sizeof psm[0]; r++)
                        for (int v = 0; v < 4; v++) {
                            const int m = pm[i], n = pn[j], k = pk[q], sm = psm[r], bk = v & 1, al = v >> 1;
                            const int got = carve_tc_stream_plan_cluster(m, n, k, sm, bk, al);
                            const int old = carve_tc_stream_cluster(m, n, k, sm, bk);
                            const int moved = bk && !al && m >= 1 && m <= 8 && n < 4096 && (int64_t)((n + 63) / 64) * 4 > sm;
                            CHECK(got == (moved ? carve_tc_stream_clamp_cluster(k > 6144 ? 8 : 6, k) : old));
                            CHECK(got >= 1 && got <= CARVE_TC_STREAM_MAX_CLUSTER);
                        }
    }

    /* The warps' runs of k steps. */
    static const int64_t units[] = {1, 2, 3, 5, 31, 32, 33, 64, 100, 448, ((int64_t)INT_MAX + 63) / 64};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        for (int runs = 4; runs <= 32; runs += 4) {
            int64_t prev = carve_tc_stream_run_begin(units[i], 0, runs), lo = INT64_MAX, hi = 0;
            int bad = prev != 0;
            for (int r = 1; r <= runs; r++) {
                const int64_t b = carve_tc_stream_run_begin(units[i], r, runs), size = b - prev;
                lo = size < lo ? size : lo;
                hi = size > hi ? size : hi;
                prev = b;
            }
            bad |= prev != units[i] || hi - lo > 1 || lo != units[i] / runs;
            test_checks++;
            if (bad) {
                char msg[96];
                snprintf(msg, sizeof msg, "%lld steps, %d runs: sizes %lld..%lld", (long long)units[i], runs,
                         (long long)lo, (long long)hi);
                test_fail(__FILE__, __LINE__, "stream runs share the k steps", msg);
            }
        }
}

/* The decode kernel's plan: which problems it takes, its narrow width,
 * the cluster rule (the largest power of two at which every tile's cluster
 * is held at once, shares of at least CARVE_TC_DECODE_MIN_KTILES k tiles),
 * forced sizes made legal, and where the plan gives it calls. The H100's
 * counts (132/66/30/15 clusters of 1/2/4/8 blocks) and unknown ones (the
 * SMs divided by the size). */
static void check_decode(void) {
    CHECK(carve_tc_decode_takes(1, 1) && carve_tc_decode_takes(256, 1));
    CHECK(!carve_tc_decode_takes(0, 1) && !carve_tc_decode_takes(257, 1) && !carve_tc_decode_takes(8, 0));
    CHECK(carve_tc_decode_bm(1) == 8 && carve_tc_decode_bm(8) == 8 && carve_tc_decode_bm(9) == 16);
    CHECK(carve_tc_decode_bm(33) == 64 && carve_tc_decode_bm(65) == 128 && carve_tc_decode_bm(129) == 256);
    CHECK(carve_tc_decode_bm(256) == 256);
    static const int h100[4] = {132, 66, 30, 15};
    CHECK(carve_tc_decode_cluster(4096, 4096, CARVE_TC_DECODE_ROWS, 132, h100) == 2);   /* 32 tiles: 30 clusters of 4 at once */
    CHECK(carve_tc_decode_cluster(2048, 8192, CARVE_TC_DECODE_ROWS, 132, h100) == 4);   /* 16 tiles: 15 clusters of 8 */
    CHECK(carve_tc_decode_cluster(1024, 4096, CARVE_TC_DECODE_ROWS, 132, h100) == 8);
    CHECK(carve_tc_decode_cluster(8192, 8192, CARVE_TC_DECODE_ROWS, 132, h100) == 2);   /* 64 tiles */
    CHECK(carve_tc_decode_cluster(8448, 8192, CARVE_TC_DECODE_ROWS, 132, h100) == 2);   /* 66 */
    CHECK(carve_tc_decode_cluster(8449, 8192, CARVE_TC_DECODE_ROWS, 132, h100) == 1);   /* 67 */
    CHECK(carve_tc_decode_cluster(11008, 4096, CARVE_TC_DECODE_ROWS, 132, h100) == 1);
    CHECK(carve_tc_decode_cluster(1024, 1024, CARVE_TC_DECODE_ROWS, 132, h100) == 4);   /* 16 k tiles: shares of 4 */
    CHECK(carve_tc_decode_cluster(1024, 448, CARVE_TC_DECODE_ROWS, 132, h100) == 1);    /* 7 k tiles */
    CHECK(carve_tc_decode_cluster(1, 1, CARVE_TC_DECODE_ROWS, 132, h100) == 1);
    CHECK(carve_tc_decode_cluster(4096, 4096, CARVE_TC_DECODE_ROWS, 132, NULL) == 4);   /* unknown: 33 clusters of 4 counted */
    static const int unknown[4] = {-1, -1, -1, -1};
    CHECK(carve_tc_decode_cluster(4096, 4096, CARVE_TC_DECODE_ROWS, 132, unknown) == 4);
    CHECK(carve_tc_decode_cluster(4096, 4096, CARVE_TC_DECODE_ROWS, 0, unknown) == 1);
    CHECK(carve_tc_decode_cluster(INT_MAX, INT_MAX, CARVE_TC_DECODE_ROWS, 132, h100) == 1);
    static const int slice[4] = {42, 21, 10, 0}; /* no cluster of 8 fits: none is planned */
    CHECK(carve_tc_decode_cluster(512, 4096, CARVE_TC_DECODE_ROWS, 42, slice) == 4);
    static const int none[4] = {16, 0, 0, 0};
    CHECK(carve_tc_decode_cluster(256, 8192, CARVE_TC_DECODE_ROWS, 16, none) == 1);
    long checked = 0;
    for (int n = 1; n <= 40000; n += 997)
        for (int k = 1; k <= 40000; k += 1999) {
            const int cs = carve_tc_decode_cluster(n, k, CARVE_TC_DECODE_ROWS, 132, h100);
            const int64_t tiles = carve_tiles(n, CARVE_TC_DECODE_ROWS);
            const int i = cs == 1 ? 0 : cs == 2 ? 1 : cs == 4 ? 2 : cs == 8 ? 3 : -1;
            int ok = i >= 0 && (cs == 1 || (tiles <= h100[i] && carve_tiles(k, 64) / cs >= CARVE_TC_DECODE_MIN_KTILES));
            if (ok && cs < 8) /* the next size fails one of the two */
                ok = tiles > h100[i + 1] || carve_tiles(k, 64) / (2 * cs) < CARVE_TC_DECODE_MIN_KTILES;
            test_checks++;
            checked++;
            if (!ok) {
                char msg[96];
                snprintf(msg, sizeof msg, "n %d k %d: cluster %d", n, k, cs);
                test_fail(__FILE__, __LINE__, "the decode cluster rule", msg);
            }
        }
    printf("decode_cluster: %ld shapes\n", checked);
    CHECK(carve_tc_decode_clamp_cluster(0, 4096) == 1 && carve_tc_decode_clamp_cluster(-3, 4096) == 1);
    CHECK(carve_tc_decode_clamp_cluster(3, 4096) == 2 && carve_tc_decode_clamp_cluster(7, 4096) == 4);
    CHECK(carve_tc_decode_clamp_cluster(64, 4096) == 8 && carve_tc_decode_clamp_cluster(8, 200) == 4);
    CHECK(carve_tc_decode_clamp_cluster(8, 64) == 1 && carve_tc_decode_clamp_cluster(8, INT_MAX) == 8);
    /* Rows: 32 always; 64 where 128-column tiles fit one wave (132 SMs:
     * 16896 columns); 128 where the cluster splits k. */
    CHECK(carve_tc_decode_chosen(1, 28672, 4096, 1, 132) && carve_tc_decode_chosen(32, 28672, 4096, 1, 132) &&
          !carve_tc_decode_chosen(33, 28672, 4096, 1, 132) && !carve_tc_decode_chosen(33, 16897, 4096, 1, 132));
    CHECK(carve_tc_decode_chosen(33, 16896, 4096, 1, 132) && carve_tc_decode_chosen(64, 16896, 4096, 1, 132) &&
          carve_tc_decode_chosen(64, 1, 4096, 1, 132) && !carve_tc_decode_chosen(65, 16896, 4096, 1, 132) &&
          !carve_tc_decode_chosen(65, 11008, 4096, 1, 132) && carve_tc_decode_chosen(64, 12800, 4096, 1, 100) &&
          !carve_tc_decode_chosen(64, 12801, 4096, 1, 100) && !carve_tc_decode_chosen(64, INT_MAX, 4096, 1, 132) &&
          carve_tc_decode_chosen(64, INT_MAX, 4096, 1, INT_MAX)); /* 64-bit: no overflow */
    CHECK(carve_tc_decode_chosen(33, 28672, 4096, 2, 132) && carve_tc_decode_chosen(128, 28672, 4096, 8, 132) &&
          !carve_tc_decode_chosen(129, 4096, 4096, 2, 132) && carve_tc_decode_chosen(96, 4096, 4096, 2, 132) &&
          !carve_tc_decode_chosen(96, 11008, 4096, 1, 132));
    CHECK(!carve_tc_decode_chosen(0, 4096, 4096, 2, 132) && !carve_tc_decode_chosen(-1, 4096, 4096, 1, 132) &&
          !carve_tc_decode_chosen(48, 0, 4096, 1, 132) && !carve_tc_decode_chosen(48, 4096, 4096, 1, 0));
    for (int m = 1; m <= 130; m++) /* more rows never makes it more likely, nor do more columns */
        for (int n = 1; n <= 40000; n += 997)
            for (int cs = 1; cs <= 8; cs *= 2)
                if (carve_tc_decode_chosen(m + 1, n, 4096, cs, 132) || carve_tc_decode_chosen(m, n + 997, 4096, cs, 132))
                    CHECK(carve_tc_decode_chosen(m, n, 4096, cs, 132));
    /* ... and k of 64 tiles (of 64) at least for the line at 64 rows; the
     * other lines whatever k. */
    CHECK(carve_tc_decode_chosen(48, 11008, 4033, 1, 132) && !carve_tc_decode_chosen(48, 11008, 4032, 1, 132) &&
          carve_tc_decode_chosen(64, 11008, INT_MAX, 1, 132) && !carve_tc_decode_chosen(64, 2048, 256, 1, 132) &&
          carve_tc_decode_chosen(32, 2048, 256, 1, 132) && carve_tc_decode_chosen(32, 2048, 1, 1, 132) &&
          carve_tc_decode_chosen(128, 4096, 512, 2, 132) && !carve_tc_decode_chosen(33, 11008, 0, 1, 132));
    for (int k = 1; k <= 20000; k += 61) /* more k never makes it less likely */
        for (int m = 30; m <= 70; m += 2)
            if (carve_tc_decode_chosen(m, 11008, k, 1, 132))
                CHECK(carve_tc_decode_chosen(m, 11008, k + 61, 1, 132));

    /* 64-column blocks: their own tiles against the same counts (the
     * narrow kernel's clusters on an H100 are as many: one block an SM). */
    CHECK(carve_tc_decode_cluster(4096, 4096, CARVE_TC_DECODE_NARROW, 132, h100) == 2); /* 64 tiles: 66 of 2 */
    CHECK(carve_tc_decode_cluster(2048, 8192, CARVE_TC_DECODE_NARROW, 132, h100) == 2); /* 32 tiles: 30 of 4 */
    CHECK(carve_tc_decode_cluster(8448, 8192, CARVE_TC_DECODE_NARROW, 132, h100) == 1); /* 132 tiles */
    /* The width: 64 where it puts more blocks in one wave. */
    CHECK(carve_tc_decode_cols(8, 4096, 4096, 132, h100, h100) == 64);    /* 128 blocks against 64 */
    CHECK(carve_tc_decode_cols(128, 4096, 14336, 132, h100, h100) == 64);
    CHECK(carve_tc_decode_cols(129, 4096, 4096, 132, h100, h100) == 128); /* no narrow kernel past 128 rows */
    CHECK(carve_tc_decode_cols(8, 8192, 8192, 132, h100, h100) == 128);   /* 128 blocks either way */
    CHECK(carve_tc_decode_cols(8, 11008, 4096, 132, h100, h100) == 128);  /* 172 narrow tiles: two waves */
    CHECK(carve_tc_decode_cols(8, 1024, 4096, 132, h100, h100) == 128);   /* 64 blocks either way */
    CHECK(carve_tc_decode_cols(8, 2048, 8192, 132, h100, h100) == 128);   /* 16 x 4 against 32 x 2 */
    CHECK(carve_tc_decode_cols(8, 64, 4096, 132, h100, h100) == 128);     /* one tile in a cluster of 8 either way */
    CHECK(carve_tc_decode_cols(8, 4096, 2048, 132, h100, h100) == 64);    /* shares of 16 k tiles */
    CHECK(carve_tc_decode_cols(8, 4096, 1984, 132, h100, h100) == 128);   /* of 15 */
    CHECK(carve_tc_decode_cols(8, 1024, 1024, 132, h100, h100) == 128);   /* 16 tiles x 4: shares of 4 */
    CHECK(carve_tc_decode_cols(8, 2048, 448, 132, h100, h100) == 128);    /* 7 k tiles, unsplit */
    CHECK(carve_tc_decode_cols(8, 4096, 4096, 132, NULL, NULL) == 128);   /* unknown: 33 clusters of 4 counted, 128 blocks either way */
    CHECK(carve_tc_decode_cols(8, 4096, 4096, 132, h100, none) == 128);   /* no narrow cluster fits: 64 tiles > 16 */
    checked = 0;
    for (int m = 1; m <= 256; m += 37)
        for (int n = 1; n <= 40000; n += 997)
            for (int k = 1; k <= 40000; k += 1999) {
                const int cols = carve_tc_decode_cols(m, n, k, 132, h100, h100);
                const int64_t b128 = carve_tiles(n, 128) * carve_tc_decode_cluster(n, k, 128, 132, h100);
                const int64_t t64 = carve_tiles(n, 64);
                const int64_t b64 = t64 * carve_tc_decode_cluster(n, k, 64, 132, h100);
                const int c64 = carve_tc_decode_cluster(n, k, 64, 132, h100);
                const int want =
                    m <= 128 && t64 <= h100[0] && carve_tiles(k, 64) / c64 >= CARVE_TC_DECODE_NARROW_MIN_KTILES &&
                            b64 > b128
                        ? 64
                        : 128;
                test_checks++;
                checked++;
                if (cols != want) {
                    char msg[96];
                    snprintf(msg, sizeof msg, "m %d n %d k %d: %d columns, want %d", m, n, k, cols, want);
                    test_fail(__FILE__, __LINE__, "the decode width rule", msg);
                }
            }
    printf("decode_cols: %ld shapes\n", checked);
    /* The streaming kernel gives way to 64-column tiles in clusters only. */
    CHECK(carve_tc_stream_yields(64, 2) && carve_tc_stream_yields(64, 8));
    CHECK(!carve_tc_stream_yields(64, 1) && !carve_tc_stream_yields(128, 2) && !carve_tc_stream_yields(0, 1));
    /* A width other than 64 counts as 128 (no division by zero). */
    CHECK(carve_tc_decode_cluster(4096, 4096, 0, 132, h100) == carve_tc_decode_cluster(4096, 4096, 128, 132, h100));
    CHECK(carve_tc_decode_cluster(4096, 4096, -64, 132, h100) == 2);
}

int main(void) {
    check_stream();
    check_decode();
    check_choose_splits();
    check_split_begin();
    check_clamp();
    check_sizes();
    return test_finish();
}
