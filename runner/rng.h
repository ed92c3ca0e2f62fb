/* rng.h - a small seeded random number generator for reproducible statistics (bootstrap). */
#ifndef BK_RNG_H
#define BK_RNG_H

#include <stdint.h>

/* Generator state. Same seed -> same stream, bit for bit (no global state, no
 * threads, no libc rand). bk_rng_next and bk_rng_uniform are exact integer /
 * IEEE-754 arithmetic, identical everywhere; normal, gamma and beta also call
 * libm (log, sqrt, pow), so they are bit-identical for the same build and libm. */
typedef struct bk_rng {
    uint64_t s[4];
} bk_rng;

/* Seed the state from one 64-bit value (expanded by splitmix64, so any seed,
 * including 0, gives a valid, well-mixed state). */
void bk_rng_seed(bk_rng *rng, uint64_t seed);

/* Next raw 64-bit output (xoshiro256**). */
uint64_t bk_rng_next(bk_rng *rng);

/* Uniform double in [0, 1) with 53 random bits. */
double bk_rng_uniform(bk_rng *rng);

/* Standard normal N(0, 1) (Marsaglia's polar method; consumes a variable
 * but deterministic number of uniforms). */
double bk_rng_normal(bk_rng *rng);

/* Gamma(shape, scale 1) for shape > 0 (Marsaglia-Tsang; shape < 1 through
 * the boost Gamma(shape) = Gamma(shape + 1) * U^(1/shape)). Returns NaN for a
 * shape that is not a finite number > 0. */
double bk_rng_gamma(bk_rng *rng, double shape);

/* Beta(a, b) for a, b > 0, as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b)
 * (X drawn first). Result in [0, 1]; NaN for bad parameters. */
double bk_rng_beta(bk_rng *rng, double a, double b);

#endif
