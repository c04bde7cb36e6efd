/* The C baseline of the kernel benchmark: a plain 7-point Jacobi sweep of one block with a
 * one-cell halo, x fastest, written as HPC C usually is, and swapped with its output by
 * pointer after each call. Compiled -O3 -march=native by build.rs for the benches only.
 *
 * Two forms: `/ 6.0` as the stencil is written, and `* (1.0 / 6.0)` as aiac's kernels compute
 * it (a multiplication is cheaper than a division, and gives other rounding). */
#include <stddef.h>

void aiac_c_sweep_div(size_t nx, size_t ny, size_t nz, const double *restrict u,
                      double *restrict unew) {
    const size_t sx = nx + 2, plane = sx * (ny + 2);
    for (size_t z = 1; z <= nz; z++)
        for (size_t y = 1; y <= ny; y++)
            for (size_t x = 1; x <= nx; x++) {
                size_t i = x + sx * y + plane * z;
                unew[i] = (u[i - 1] + u[i + 1] + u[i - sx] + u[i + sx] + u[i - plane] +
                           u[i + plane]) / 6.0;
            }
}

void aiac_c_sweep_mul(size_t nx, size_t ny, size_t nz, const double *restrict u,
                      double *restrict unew) {
    const size_t sx = nx + 2, plane = sx * (ny + 2);
    const double sixth = 1.0 / 6.0;
    for (size_t z = 1; z <= nz; z++)
        for (size_t y = 1; y <= ny; y++)
            for (size_t x = 1; x <= nx; x++) {
                size_t i = x + sx * y + plane * z;
                unew[i] = (u[i - 1] + u[i + 1] + u[i - sx] + u[i + sx] + u[i - plane] +
                           u[i + plane]) * sixth;
            }
}
