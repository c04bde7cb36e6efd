/*
 * shmem_racy: racy asynchronous Jacobi over OpenSHMEM (Bethune et al. 2014, "racy" SHMEM) and
 * the peer of `oshrun aiac run --backend shmem --variant racy`.
 *
 * Problem, sweep, residual, stop test and process grid: laplace.h. Each PE has one symmetric
 * landing buffer per face. Every iteration it copies the landing buffers into its halo,
 * whatever they hold (relaxed atomic loads: a neighbour may be writing them), sweeps, swaps
 * (--swap) or copies the arrays, and puts each new face straight into the neighbour's landing
 * buffer: no flag, no wait, no acknowledgement, as aiac's racy puts.
 *
 * The stop test differs from aiac's in one way: OpenSHMEM 1.4 (Open MPI's) has no
 * non-blocking reduction, so the sum of r^2 is a collective (shmem_double_sum_to_all) every
 * --check-every iterations (default 100, aiac's sync default) instead of aiac's rounds. All
 * PEs see the same sums and so stop together. A sum below --tol stops the run, after
 * --confirm's synchronous certification when asked (barrier, fresh faces put, barrier, the
 * true residual reduced), which carries on when the true residual is not below --tol.
 * The true relative residual of the final iterate is printed as true_rel.
 *
 *   oshrun -np 2 shmem_racy --n 50 --tol 1e-4 --iters 1000000 --swap --confirm
 */
#include <shmem.h>

#include "laplace.h"

/* Symmetric work areas of the reductions, used in turn: a reduction may reuse one only
 * after another has completed in between. */
static long psync[2][SHMEM_REDUCE_SYNC_SIZE];
static double pwrk[2][SHMEM_REDUCE_MIN_WRKDATA_SIZE > 2 ? SHMEM_REDUCE_MIN_WRKDATA_SIZE : 2];
static double red_in, red_out;

static double reduce(double v, int max, int npes)
{
    static int turn = 0;
    red_in = v;
    if (max) shmem_double_max_to_all(&red_out, &red_in, 1, 0, 0, npes, pwrk[turn], psync[turn]);
    else shmem_double_sum_to_all(&red_out, &red_in, 1, 0, 0, npes, pwrk[turn], psync[turn]);
    turn ^= 1;
    return red_out;
}

/* One PE. */
typedef struct {
    lap_block b;
    double *u, *un;
    int nbr[6];
    size_t len[6], at[6]; /* values on each face, and where its landing buffer starts */
    double *land;         /* symmetric: the faces the neighbours put here */
    double *msg;          /* private: a face on its way out or in */
} pe_t;

/* The landing buffer of face d into the halo, read as it is. */
static void take(pe_t *q)
{
    for (int d = 0; d < 6; d++) {
        if (q->nbr[d] < 0) continue;
        const double *src = q->land + q->at[d];
        for (size_t m = 0; m < q->len[d]; m++) __atomic_load(&src[m], &q->msg[m], __ATOMIC_RELAXED);
        MODELLED(MODEL_UNPACK, q->len[d], lap_face(&q->b, q->u, q->msg, d, LAP_UNPACK));
    }
}

/* Every face of the current iterate into the neighbour's landing buffer. */
static void give(pe_t *q)
{
    for (int d = 0; d < 6; d++) {
        if (q->nbr[d] < 0) continue;
        MODELLED(MODEL_PACK, q->len[d], lap_face(&q->b, q->u, q->msg, d, LAP_PACK));
        shmem_double_put(q->land + q->at[d ^ 1], q->msg, q->len[d], q->nbr[d]);
    }
}

/* Sum r^2 of the current iterate over every PE, after a synchronous exchange. */
static double true_sq(pe_t *q, int npes)
{
    shmem_barrier_all(); /* every PE has stopped putting and reading */
    give(q);
    shmem_barrier_all(); /* the puts are complete */
    take(q);
    const int n = q->b.n[0];
    double s = 0;
    MODELLED(MODEL_SWEEP, (long)n * n * n, s = lap_sweep(&q->b, q->u, q->un, 1, n, 1));
    return reduce(s, 0, npes);
}

int main(int argc, char **argv)
{
    shmem_init();
    const int me = shmem_my_pe(), npes = shmem_n_pes();
    lap_opts o;
    int p[3], c[3];
    int bad = lap_parse(argc, argv, &o, me != 0, 0);
    if (!bad && !lap_grid(argv[0], npes, &o, p, me != 0)) bad = 1;
    if (bad) {
        shmem_finalize();
        return bad == 2 ? 0 : 1;
    }
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) psync[s][i] = SHMEM_SYNC_VALUE;
    const int n = o.n;
    const long every = o.check_every ? o.check_every : 100, points = (long)n * n * n;
    pe_t q = {.b = lap_block_of(n, n, n)};
    lap_neighbours(me, p, c, q.nbr);
    const int first[3] = {c[0] * n + 1, c[1] * n + 1, c[2] * n + 1}, global[3] = {p[0] * n, p[1] * n, p[2] * n};
    q.u = lap_alloc(&q.b);
    q.un = lap_alloc(&q.b);
    lap_boundary(&q.b, q.u, first, global);
    lap_boundary(&q.b, q.un, first, global);
    size_t total = 0;
    for (int d = 0; d < 6; d++) {
        q.len[d] = lap_face_len(&q.b, d);
        q.at[d] = total;
        total += q.len[d];
    }
    q.land = shmem_malloc(total * sizeof(double)); /* the same size on every PE */
    q.msg = malloc((size_t)n * n * sizeof(double));
    if (!q.land || !q.msg) {
        fprintf(stderr, "shmem_racy: out of memory for the face buffers\n");
        shmem_global_exit(1);
    }
    memset(q.land, 0, total * sizeof(double));
    shmem_barrier_all();

    const double t0 = lap_now();
    const double sq0 = true_sq(&q, npes);
    double rel = lap_relative(sq0, sq0);
    int converged = o.tol > 0 && rel < o.tol;
    long it = 0, confirms = 0;
    while (!converged && it < o.iters) {
        take(&q);
        it++;
        const int check = it % every == 0;
        double s = 0;
        MODELLED(MODEL_SWEEP, points, s = lap_sweep(&q.b, q.u, q.un, 1, n, check));
        if (o.swap) {
            double *x = q.u;
            q.u = q.un;
            q.un = x;
        } else {
            MODELLED(MODEL_COPY, points, lap_copy(&q.b, q.u, q.un, 1, n));
        }
        give(&q);
        if (!check) continue;
        rel = lap_relative(reduce(s, 0, npes), sq0);
        if (o.tol > 0 && rel < o.tol && o.confirm) {
            confirms++; /* every PE is here: the collective said the same to all */
            rel = lap_relative(true_sq(&q, npes), sq0);
        }
        converged = o.tol > 0 && rel < o.tol;
    }
    const double slowest = reduce(lap_now() - t0, 1, npes);
    const double truth = lap_relative(true_sq(&q, npes), sq0);
    if (me == 0) {
        char extra[64];
        snprintf(extra, sizeof extra, "confirms=%ld", confirms);
        lap_report("shmem_racy", o.swap ? "swap" : "copy", npes, p, n, it * npes, it, it, slowest, rel,
                   truth, converged, extra);
    }
    shmem_barrier_all();
    shmem_free(q.land);
    free(q.msg);
    free(q.u);
    free(q.un);
    shmem_finalize();
    return 0;
}
