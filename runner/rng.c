/* rng.c - xoshiro256** seeded by splitmix64, and the continuous draws the bootstrap needs.
 *
 * Algorithms (written here from their published descriptions, not copied):
 *  - xoshiro256** 1.0: D. Blackman and S. Vigna, "Scrambled linear pseudorandom
 *    number generators", ACM TOMS 47(4), 2021.
 *  - splitmix64: G. Steele, D. Lea and C. Flood, "Fast splittable pseudorandom
 *    number generators", OOPSLA 2014 (the 64-bit finaliser Vigna recommends for
 *    seeding xoshiro).
 *  - normal: G. Marsaglia and T. Bray, "A convenient method for generating
 *    normal variables" (the polar method), SIAM Review 6(3), 1964.
 *  - gamma: G. Marsaglia and W. W. Tsang, "A simple method for generating gamma
 *    variables", ACM TOMS 26(3), 2000, including its boost for shape < 1.
 */
#include "runner/rng.h"

#include <math.h>

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void bk_rng_seed(bk_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t bk_rng_next(bk_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double bk_rng_uniform(bk_rng *rng)
{
    /* the top 53 bits, scaled by 2^-53: exactly representable, in [0, 1) */
    return (double)(bk_rng_next(rng) >> 11) * 0x1.0p-53;
}

double bk_rng_normal(bk_rng *rng)
{
    double u, v, q;
    do {
        u = 2.0 * bk_rng_uniform(rng) - 1.0;
        v = 2.0 * bk_rng_uniform(rng) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    /* the second variate (v * factor) is dropped: no hidden state, so the
     * stream position depends only on the calls made */
    return u * sqrt(-2.0 * log(q) / q);
}

double bk_rng_gamma(bk_rng *rng, double shape)
{
    if (!(shape > 0.0) || !isfinite(shape))
        return NAN;
    if (shape < 1.0) {
        /* boost: Gamma(a) = Gamma(a + 1) * U^(1/a); U in (0, 1] */
        double g = bk_rng_gamma(rng, shape + 1.0);
        double u = 1.0 - bk_rng_uniform(rng);
        return g * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = bk_rng_normal(rng);
        double v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = 1.0 - bk_rng_uniform(rng); /* (0, 1]: log(u) is finite */
        double x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2)
            return d * v;
        if (log(u) < 0.5 * x2 + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double bk_rng_beta(bk_rng *rng, double a, double b)
{
    if (!(a > 0.0) || !(b > 0.0) || !isfinite(a) || !isfinite(b))
        return NAN;
    double x = bk_rng_gamma(rng, a);
    double y = bk_rng_gamma(rng, b);
    double s = x + y;
    if (s <= 0.0) /* both underflowed (tiny shapes): split evenly by a coin */
        return bk_rng_uniform(rng) < a / (a + b) ? 1.0 : 0.0;
    return x / s;
}
