/* A small deterministic generator (splitmix64) so every test input is reproducible. */
#ifndef MH_TEST_RNG_H
#define MH_TEST_RNG_H
#include <stddef.h>
#include <stdint.h>

typedef struct test_rng {
    uint64_t state;
} test_rng;

void rng_seed(test_rng* r, uint64_t seed);
uint64_t rng_next(test_rng* r);
/* Uniform in [lo, hi). */
float rng_uniform(test_rng* r, float lo, float hi);
/* Uniform integer in [lo, hi]. */
int rng_int(test_rng* r, int lo, int hi);
void rng_fill(test_rng* r, float* x, size_t n, float lo, float hi);

#endif
