/* bf16.h - bfloat16 conversions (round to nearest even) shared by cpu kernels and references. */
#ifndef BK_BF16_H
#define BK_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A bf16 NaN pattern the engine and tests poison outputs with. */
#define BK_BF16_POISON ((uint16_t)0xFFFF)

static inline float bk_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> bf16, round to nearest, ties to even; NaN stays a (quiet) NaN. */
static inline uint16_t bk_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x0040u;
    /* a select, not a branch: loops over this vectorise */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline int bk_bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

/* A float64 rounded once to the nearest bf16 value (ties to even), returned as
 * a float64: for references, without the double rounding of going through
 * fp32. Normal range only (bf16 subnormals and overflow are not modelled). */
static inline double bk_bf16_round_f64(double v)
{
    int e;
    double m = frexp(v, &e); /* v = m * 2^e, 0.5 <= |m| < 1 */
    if (m == 0.0 || !isfinite(v))
        return v;
    return ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

#endif
