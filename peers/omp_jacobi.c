/*
 * omp_jacobi: Jacobi over OpenMP threads (Bethune et al. 2014, the OpenMP section) and the
 * peer of `aiac run --backend shared` (crates/jacobi/src/shared.rs). With T threads
 * (OMP_NUM_THREADS) the grid is n x n x nT, split in z: thread t owns planes tn+1 .. (t+1)n,
 * aiac's 1 x 1 x T decomposition. Problem, sweep, residual and stop test: laplace.h.
 *
 * --mode sync (aiac's shared sync): one pair of global arrays and one parallel region; each
 *   thread sweeps its planes, all meet at a barrier per sweep, then the arrays are swapped
 *   (--swap) or the new iterate copied back behind a second barrier. Every --check-every
 *   iterations (default 100) the threads' sums of r^2, added in thread order, give the
 *   relative residual of the iterate the sweep started from, as in aiac: the same iteration
 *   count as a serial run and as mpi_sync.
 * --mode racy (aiac's shared racy): each thread iterates on a slab of its own with no barrier;
 *   after each sweep it publishes its two boundary planes into shared planes with relaxed
 *   atomic stores, and before each sweep it copies its neighbours' planes into its halo with
 *   relaxed atomic loads, whatever they hold. Every --check-every iterations (default 1) a
 *   thread stores its slab's sum r^2 in its slot and, once every thread has stored one, adds
 *   the slots; below --tol it raises the stop flag, as does a thread reaching --iters. The
 *   threads then meet at a barrier and compute the true residual of the current planes; with
 *   --confirm they carry on (reseeded with those sums) when it is not below --tol.
 *
 *   OMP_NUM_THREADS=2 omp_jacobi --mode sync --swap --n 50 --tol 1e-4 --iters 1000000
 *   OMP_NUM_THREADS=2 omp_jacobi --mode racy --confirm --n 50 --tol 1e-4 --iters 1000000
 */
#include <omp.h>

#include "laplace.h"

static double sum_of(const double *v, int count)
{
    double s = 0;
    for (int i = 0; i < count; i++) s += v[i];
    return s;
}

/* What a run ends with. */
typedef struct {
    long *iters; /* per thread */
    double t0, t1, rel, truth;
    int converged;
} outcome;

static void run_sync(const lap_opts *o, int T, outcome *out)
{
    const int n = o->n;
    const long every = o->check_every ? o->check_every : 100, points = (long)n * n * n;
    const lap_block b = lap_block_of(n, n, n * T);
    const int first[3] = {1, 1, 1}, global[3] = {n, n, n * T};
    double *u = lap_alloc(&b), *un = lap_alloc(&b);
    lap_boundary(&b, u, first, global);
    lap_boundary(&b, un, first, global);
    double *slot = calloc(2 * (size_t)T, sizeof(double)); /* two rounds of sums, by parity */
#pragma omp parallel num_threads(T)
    {
        const int t = omp_get_thread_num(), k0 = t * n + 1, k1 = (t + 1) * n;
        double *a = u, *z = un;
#pragma omp barrier
#pragma omp master
        out->t0 = lap_now();
        double s = 0;
        MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, k0, k1, 1));
        slot[t] = s;
#pragma omp barrier
        const double sq0 = sum_of(slot, T);
        double rel = lap_relative(sq0, sq0);
        int done = o->tol > 0 && rel < o->tol, parity = 1;
        long it = 0;
        while (!done && it < o->iters) {
            it++;
            const int check = it % every == 0;
            MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, k0, k1, check));
            if (check) slot[parity * T + t] = s;
#pragma omp barrier
            if (o->swap) {
                double *x = a;
                a = z;
                z = x;
            } else {
                MODELLED(MODEL_COPY, points, lap_copy(&b, a, z, k0, k1));
#pragma omp barrier
            }
            if (check) {
                rel = lap_relative(sum_of(slot + parity * T, T), sq0);
                parity ^= 1;
                done = o->tol > 0 && rel < o->tol;
            }
        }
        out->iters[t] = it;
#pragma omp barrier
#pragma omp master
        {
            out->t1 = lap_now();
            out->rel = rel;
            out->converged = done;
        }
        /* the true residual of the final iterate */
        MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, k0, k1, 1));
        slot[t] = s;
#pragma omp barrier
#pragma omp master
        out->truth = lap_relative(sum_of(slot, T), sq0);
    }
    free(slot);
    free(u);
    free(un);
}

/* A boundary plane of a slab into a shared plane, or back into the halo: relaxed atomics,
 * since the other thread reads or writes the shared plane at the same time. */
static void publish(const lap_block *b, const double *u, int k, double *plane)
{
    size_t m = 0;
    for (int j = 1; j <= b->n[1]; j++)
        for (int i = 1; i <= b->n[0]; i++, m++)
            __atomic_store(&plane[m], &u[k * b->sz + j * b->sy + i], __ATOMIC_RELAXED);
}

static void take(const lap_block *b, double *u, int k, double *plane)
{
    size_t m = 0;
    for (int j = 1; j <= b->n[1]; j++)
        for (int i = 1; i <= b->n[0]; i++, m++)
            __atomic_load(&plane[m], &u[k * b->sz + j * b->sy + i], __ATOMIC_RELAXED);
}

static void run_racy(const lap_opts *o, int T, outcome *out)
{
    const int n = o->n;
    const long every = o->check_every ? o->check_every : 1, points = (long)n * n * n;
    const size_t plane = (size_t)n * n;
    /* up[t]: thread t's highest plane, for t + 1; down[t]: its lowest, for t - 1 */
    double *up = calloc(plane * T, sizeof(double)), *down = calloc(plane * T, sizeof(double));
    double *slot = calloc(T, sizeof(double)), *fresh = calloc(T, sizeof(double));
    int stop = 0, claimed = 0, at_max = 0, stored = 0;
    double sq0 = 0;
#pragma omp parallel num_threads(T)
    {
        const int t = omp_get_thread_num();
        const lap_block b = lap_block_of(n, n, n);
        const int first[3] = {1, 1, t * n + 1}, global[3] = {n, n, n * T};
        double *a = lap_alloc(&b), *z = lap_alloc(&b);
        lap_boundary(&b, a, first, global);
        lap_boundary(&b, z, first, global);
        /* the halo from the neighbours' current planes, then this slab's sum r^2 */
#define TAKE_HALO()                                                                            \
    do {                                                                                       \
        if (t > 0) MODELLED(MODEL_UNPACK, plane, take(&b, a, 0, up + (t - 1) * plane));         \
        if (t < T - 1) MODELLED(MODEL_UNPACK, plane, take(&b, a, n + 1, down + (t + 1) * plane)); \
    } while (0)
#pragma omp barrier
#pragma omp master
        out->t0 = lap_now();
        double s = 0;
        MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, 1, n, 1));
        slot[t] = s;
#pragma omp barrier
#pragma omp single
        {
            sq0 = sum_of(slot, T); /* the single's barrier publishes it */
            if (o->tol > 0 && lap_relative(sq0, sq0) < o->tol) claimed = stop = 1;
        }
        long it = 0;
        int mine_stored = 0;
        for (;;) {
            while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
                if (it >= o->iters) {
                    __atomic_store_n(&at_max, 1, __ATOMIC_RELAXED);
                    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
                    break;
                }
                TAKE_HALO();
                it++;
                const int check = it % every == 0;
                MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, 1, n, check));
                if (o->swap) {
                    double *x = a;
                    a = z;
                    z = x;
                } else {
                    MODELLED(MODEL_COPY, points, lap_copy(&b, a, z, 1, n));
                }
                if (t > 0) MODELLED(MODEL_PACK, plane, publish(&b, a, 1, down + t * plane));
                if (t < T - 1) MODELLED(MODEL_PACK, plane, publish(&b, a, n, up + t * plane));
                if (!check) continue;
                __atomic_store(&slot[t], &s, __ATOMIC_RELAXED);
                if (!mine_stored) {
                    mine_stored = 1;
                    __atomic_fetch_add(&stored, 1, __ATOMIC_RELAXED);
                }
                if (__atomic_load_n(&stored, __ATOMIC_RELAXED) < T) continue;
                double all = 0;
                for (int q = 0; q < T; q++) {
                    double v;
                    __atomic_load(&slot[q], &v, __ATOMIC_RELAXED);
                    all += v;
                }
                if (o->tol > 0 && lap_relative(all, sq0) < o->tol) {
                    __atomic_store_n(&claimed, 1, __ATOMIC_RELAXED);
                    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
                }
            }
#pragma omp barrier
            /* everyone has stopped: the true residual of the current planes */
            TAKE_HALO();
            MODELLED(MODEL_SWEEP, points, s = lap_sweep(&b, a, z, 1, n, 1));
            fresh[t] = s;
#pragma omp barrier
            const double truth = lap_relative(sum_of(fresh, T), sq0);
            const int good = o->tol > 0 && truth < o->tol;
            const int end = !o->confirm || good || at_max;
#pragma omp master
            {
                out->t1 = lap_now();
                out->truth = truth;
                out->converged = o->confirm ? good : claimed;
                out->rel = o->confirm ? truth : lap_relative(sum_of(slot, T), sq0);
            }
            if (end) break;
            slot[t] = fresh[t]; /* reseed the estimate with the true sums */
#pragma omp barrier
#pragma omp master
            stop = claimed = 0;
#pragma omp barrier
        }
#undef TAKE_HALO
        out->iters[t] = it;
        free(a);
        free(z);
    }
    free(up);
    free(down);
    free(slot);
    free(fresh);
}

int main(int argc, char **argv)
{
    lap_opts o;
    const int bad = lap_parse(argc, argv, &o, 0, 0);
    if (bad) return bad == 2 ? 0 : 1;
    const int T = omp_get_max_threads(), racy = !strcmp(o.mode, "racy");
    if (o.grid[0] && (o.grid[0] != 1 || o.grid[1] != 1 || o.grid[2] != T)) {
        fprintf(stderr, "%s: --grid %dx%dx%d: the %d threads split the grid in z, 1x1x%d\n", argv[0],
                o.grid[0], o.grid[1], o.grid[2], T, T);
        return 1;
    }
    outcome out = {.iters = calloc(T, sizeof(long))};
    if (racy) run_racy(&o, T, &out);
    else run_sync(&o, T, &out);
    long lo = out.iters[0], hi = out.iters[0], sum = 0;
    for (int t = 0; t < T; t++) {
        lo = out.iters[t] < lo ? out.iters[t] : lo;
        hi = out.iters[t] > hi ? out.iters[t] : hi;
        sum += out.iters[t];
    }
    const int p[3] = {1, 1, T};
    char extra[64];
    snprintf(extra, sizeof extra, "threads=%d", T);
    lap_report("omp_jacobi", racy ? "racy" : o.swap ? "sync_swap" : "sync_copy", T, p, o.n, sum, lo, hi,
               out.t1 - out.t0, out.rel, out.truth, out.converged, extra);
    free(out.iters);
    return 0;
}
