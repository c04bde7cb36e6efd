/*
 * mpi_sync: synchronous Jacobi over MPI, the paper's baseline (Bethune et al. 2014, Figure 1)
 * and the peer of `aiac run --backend mpi --variant sync`.
 *
 * Faithful to aiac's sync loop (crates/jacobi/src/solver.rs): the initial residual
 * ||b - A u0|| is computed first, inside the timed section; then every iteration swaps the
 * halo (an MPI_Irecv and an MPI_Issend per face, one MPI_Waitall) and sweeps; every
 * --check-every iterations (default 100, aiac's for Laplace) the sweep also sums r^2, one
 * MPI_Allreduce adds the ranks' sums and the run stops when the relative residual is below
 * --tol. Problem, sweep, residual, stop test and process grid: laplace.h. --swap swaps the two
 * arrays (aiac always does); without it the new iterate is copied back, as in the paper.
 *
 *   mpirun -np 2 mpi_sync --n 50 --tol 1e-4 --iters 1000000 --swap
 */
#include <mpi.h>

#define LAP_MPI_RANKS
#include "laplace.h"

int main(int argc, char **argv)
{
    lap_rank r;
    const int rc = lap_rank_init(&r, &argc, &argv);
    if (rc) return rc < 0 ? 0 : rc;
    const lap_opts *o = &r.o;
    const long every = o->check_every ? o->check_every : 100;
    const int n = o->n;
    const long points = (long)n * n * n;

    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const double sq0 = lap_true_sq(&r, 20);
    double rel = lap_relative(sq0, sq0);
    int converged = o->tol > 0 && rel < o->tol;
    long it = 0;
    while (!converged && it < o->iters) {
        lap_swap(&r, 0, 1);
        it++;
        const int check = it % every == 0;
        double mine = 0;
        MODELLED(MODEL_SWEEP, points, mine = lap_sweep(&r.b, r.u, r.un, 1, n, check));
        if (o->swap) {
            double *t = r.u;
            r.u = r.un;
            r.un = t;
        } else {
            MODELLED(MODEL_COPY, points, lap_copy(&r.b, r.u, r.un, 1, n));
        }
        if (check) {
            double all = 0;
            MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            rel = lap_relative(all, sq0); /* of the iterate this sweep started from */
            converged = o->tol > 0 && rel < o->tol;
        }
    }
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double truth = lap_relative(lap_true_sq(&r, 20), sq0);
    if (r.rank == 0)
        lap_report("mpi_sync", o->swap ? "swap" : "copy", r.size, r.p, n, it * r.size, it, it, slowest,
                   rel, truth, converged, "");
    lap_rank_free(&r);
    MPI_Finalize();
    return 0;
}
