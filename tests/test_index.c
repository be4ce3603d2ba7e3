/*
 * test_index.c — the TLSF index on its own: size classes, find returns a
 * block that fits (plain and address-ordered) and find_fit NULL only when
 * none does, exact-size reuse, and the largest-block query, checked against
 * a brute-force scan over random contents; a fitting block far down the
 * request's own class is found when no class above holds one.
 */
#include "engine/index.h"
#include "test_util.h"

static void test_classes(void) {
    unsigned fl, sl, pfl = 0, psl = 0;
    /* Classes are monotonic in size, and linear below the limit. */
    for (size_t s = 256; s < ((size_t)1 << 40); s += s / 7 + 256) {
        carve_index_class(s, &fl, &sl);
        CHECK(fl < CARVE_FL_COUNT && sl < CARVE_SL_COUNT);
        CHECK(fl > pfl || (fl == pfl && sl >= psl));
        pfl = fl;
        psl = sl;
    }
    carve_index_class(256, &fl, &sl);
    CHECK(fl == 0 && sl == 1);
    carve_index_class(CARVE_LINEAR_LIMIT, &fl, &sl);
    CHECK(fl == 1 && sl == 0);
    carve_index_class((size_t)1 << 56, &fl, &sl);
    CHECK(fl < CARVE_FL_COUNT);
    CHECK(carve_index_same_class(4 << 20, (4 << 20) + 256));
    CHECK(!carve_index_same_class(4 << 20, 8 << 20));
}

static void test_random(int ordered) {
    test_rng r;
    test_rng_seed(&r, test_seed(5));
    enum { N = 3000 };
    carve_block *blocks = calloc(N, sizeof(*blocks));
    int *in = calloc(N, sizeof(int));
    carve_index ix;
    memset(&ix, 0, sizeof(ix));
    ix.ordered = ordered;
    for (int step = 0; step < 40000; step++) {
        int i = (int)test_rng_below(&r, N);
        if (in[i]) {
            if (test_rng_below(&r, 3) == 0) { /* resize in place or across classes */
                size_t ns = test_rng_loguniform(&r, 1, (size_t)1 << 34) * 256;
                carve_index_resize(&ix, &blocks[i], ns);
            } else {
                carve_index_remove(&ix, &blocks[i]);
                in[i] = 0;
            }
        } else {
            blocks[i].size = test_rng_loguniform(&r, 1, (size_t)1 << 34) * 256;
            blocks[i].addr = (uintptr_t)i << 40;
            blocks[i].state = CARVE_B_FREE;
            carve_index_insert(&ix, &blocks[i]);
            in[i] = 1;
        }
        size_t want = test_rng_loguniform(&r, 1, (size_t)1 << 34) * 256;
        carve_block *f = carve_index_find(&ix, want);
        size_t count = 0, bytes = 0, largest = 0;
        int exists = 0;
        for (int j = 0; j < N; j++)
            if (in[j]) {
                count++;
                bytes += blocks[j].size;
                largest = blocks[j].size > largest ? blocks[j].size : largest;
                exists |= blocks[j].size >= want;
            }
        CHECK(ix.count == count && ix.bytes == bytes);
        if (f) {
            CHECK(f->size >= want);
            CHECK(in[f - blocks]);
        } else {
            /* The bounded search may miss a block in the request's own
             * class beyond the scan limit, never one in a higher class. */
            unsigned fl, sl;
            carve_index_class(want, &fl, &sl);
            for (int j = 0; j < N; j++)
                if (in[j] && blocks[j].size >= want) {
                    unsigned f2, s2;
                    carve_index_class(blocks[j].size, &f2, &s2);
                    CHECK(f2 == fl && s2 == sl);
                }
        }
        carve_block *ff = carve_index_find_fit(&ix, want);
        CHECK(ff ? ff->size >= want && in[ff - blocks] : !exists); /* NULL only when no block fits */
        if (f)
            CHECK(ff == f);
        if (step % 97 == 0)
            CHECK(carve_index_largest(&ix) == largest);
    }
    /* Exact size reuse: a block of exactly the requested size is found. */
    memset(&ix, 0, sizeof(ix));
    carve_block e = {.size = (5 << 20) + 768, .state = CARVE_B_FREE};
    carve_index_insert(&ix, &e);
    CHECK(carve_index_find(&ix, (5 << 20) + 768) == &e);
    CHECK(carve_index_find(&ix, (5 << 20) + 1024) == NULL);
    free(blocks);
    free(in);
}

/* Many blocks in one class, all a little smaller than the request but the
 * last: find_fit must reach it (the bounded scan looks at the first few
 * only), and once a class above holds a block, both take that one. */
static void test_full_class(void) {
    for (int ordered = 0; ordered < 2; ordered++) {
        enum { N = 40 };
        carve_block b[N + 1];
        memset(b, 0, sizeof(b));
        carve_index ix;
        memset(&ix, 0, sizeof(ix));
        ix.ordered = ordered;
        for (int i = 0; i < N; i++) { /* the fitting one first: unordered lists put it last */
            b[i].size = i == 0 ? 16640 : 16384;
            b[i].addr = ordered ? (uintptr_t)(N - i) << 20 : (uintptr_t)(i + 1) << 20;
            b[i].state = CARVE_B_FREE;
            carve_index_insert(&ix, &b[i]);
        }
        CHECK(carve_index_same_class(16384, 16640));
        CHECK(carve_index_find(&ix, 16640) == NULL); /* the bounded search */
        CHECK(carve_index_find_fit(&ix, 16640) == &b[0]);
        CHECK(carve_index_find_fit(&ix, 16896) == NULL);
        b[N].size = 1 << 20;
        b[N].addr = (uintptr_t)1 << 40;
        b[N].state = CARVE_B_FREE;
        carve_index_insert(&ix, &b[N]);
        CHECK(carve_index_find(&ix, 16640) == &b[N]); /* good fit: every block above fits */
        CHECK(carve_index_find_fit(&ix, 16640) == &b[N]);
        CHECK(carve_index_find_fit(&ix, 16896) == &b[N]);
    }
}

int main(void) {
    test_classes();
    test_random(0);
    test_random(1);
    test_full_class();
    return test_finish();
}
