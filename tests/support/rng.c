#include "rng.h"

void rng_seed(test_rng* r, uint64_t seed) { r->state = seed * 0x9E3779B97F4A7C15ull + 1; }

uint64_t rng_next(test_rng* r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float rng_uniform(test_rng* r, float lo, float hi) {
    double u = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

int rng_int(test_rng* r, int lo, int hi) {
    return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

void rng_fill(test_rng* r, float* x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(r, lo, hi);
}
