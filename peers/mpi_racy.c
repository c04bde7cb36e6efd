/*
 * mpi_racy: racy asynchronous Jacobi over MPI (Bethune et al. 2014, "racy" MPI) and the peer
 * of `aiac run --backend mpi --variant racy`.
 *
 * Faithful to aiac's async loop (crates/jacobi/src/solver.rs, `asynchronous`) on the problem,
 * sweep, residual and grid of laplace.h:
 *  - each iteration takes whatever halo data has arrived (the newest message of each face, if
 *    any came since the last look), sweeps, swaps (--swap) or copies the arrays, and offers
 *    each face to its neighbour: at most --R messages in flight per face (R send buffers), a
 *    face whose R sends are all still in flight is skipped, never waited for;
 *  - R receives stay posted per face, each into a buffer of its own (so the program stays
 *    within the MPI standard); a completed one is reposted once read;
 *  - termination is aiac's `--detect reduction`: one MPI_Iallreduce of [sum r^2, ranks at
 *    --iters] at a time, a new one started as soon as the last returned (and at least
 *    --check-every iterations after its start); a round whose relative residual is below
 *    --tol stops the run, after --confirm's synchronous certification (a halo swap and a
 *    blocking reduction of the true residual) when asked, which carries on if the true
 *    residual is not below --tol; a round that counts a rank at --iters stops the run too
 *    (a rank there stops iterating and waits for the rounds). Every rank sees the
 *    same rounds, so all stop at the same one, after different numbers of iterations;
 *  - the end drains the traffic: the ranks tell each other how many messages they sent on
 *    each face, receive until that many arrived, then cancel the receives still posted.
 * The true relative residual of the final iterate (a synchronous swap) is printed as true_rel.
 *
 *   mpirun -np 2 mpi_racy --n 50 --tol 1e-4 --iters 1000000 --swap --confirm
 */
#include <mpi.h>

#define LAP_MPI_RANKS
#include "laplace.h"

enum { TAG_DATA = 0, TAG_TRUE = 20, TAG_CERT = 40, TAG_COUNT = 60 };

/* One face's racy traffic. */
typedef struct {
    double *out, *in;        /* R message buffers each way */
    MPI_Request *send, *recv;
    long *order;             /* posting number of each receive: messages match in that order */
    long posted, sent, got;  /* receives posted, messages sent and received */
    int *done;               /* MPI_Testsome's indices */
} face_t;

static void post(face_t *f, int s, size_t len, int peer, int d)
{
    f->order[s] = f->posted++;
    MPI_Irecv(f->in + s * len, (int)len, MPI_DOUBLE, peer, TAG_DATA + (d ^ 1), MPI_COMM_WORLD, &f->recv[s]);
}

int main(int argc, char **argv)
{
    lap_rank r;
    const int rc = lap_rank_init(&r, &argc, &argv);
    if (rc) return rc < 0 ? 0 : rc;
    const lap_opts *o = &r.o;
    const long every = o->check_every ? o->check_every : 1;
    const int n = o->n, R = o->R;
    const long points = (long)n * n * n;

    face_t f[6] = {0};
    for (int d = 0; d < 6; d++) {
        f[d].out = malloc(R * r.len[d] * sizeof(double));
        f[d].in = malloc(R * r.len[d] * sizeof(double));
        f[d].send = malloc(R * sizeof(MPI_Request));
        f[d].recv = malloc(R * sizeof(MPI_Request));
        f[d].order = malloc(R * sizeof(long));
        f[d].done = malloc(R * sizeof(int));
        if (!f[d].out || !f[d].in || !f[d].send || !f[d].recv || !f[d].order || !f[d].done) {
            fprintf(stderr, "mpi_racy: out of memory for R = %d message buffers\n", R);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int s = 0; s < R; s++) f[d].send[s] = f[d].recv[s] = MPI_REQUEST_NULL;
    }

    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const double sq0 = lap_true_sq(&r, TAG_TRUE);
    double rel = lap_relative(sq0, sq0);
    int converged = o->tol > 0 && rel < o->tol;
    for (int d = 0; d < 6; d++)
        if (r.nbr[d] >= 0)
            for (int s = 0; s < R; s++) post(&f[d], s, r.len[d], r.nbr[d], d);

    long it = 0, last_start = 0, rounds = 0, confirms = 0, skipped = 0;
    int active = 0, started = 0;
    double mine = 0, red_in[2], red_out[2];
    MPI_Request red = MPI_REQUEST_NULL;
    while (!converged) {
        if (active) {
            int back = 1;
            /* a rank done iterating has nothing else to do: it waits (a poll that moved no
             * simulated time would never see the round return under SimGrid) */
            if (it >= o->iters) MPI_Wait(&red, MPI_STATUS_IGNORE);
            else MPI_Test(&red, &back, MPI_STATUS_IGNORE);
            if (back) {
                active = 0;
                rounds++;
                rel = lap_relative(red_out[0], sq0);
                if (o->tol > 0 && rel < o->tol && o->confirm) {
                    /* every rank saw this round: all certify together */
                    confirms++;
                    rel = lap_relative(lap_true_sq(&r, TAG_CERT), sq0);
                }
                converged = o->tol > 0 && rel < o->tol;
                if (converged || red_out[1] > 0) break;
            }
        }
        const int iterating = it < o->iters;
        /* a round starts after this iteration's sweep, which then sums r^2 */
        const int due = !active && (!started || it + 1 - last_start >= every || !iterating);
        if (iterating) {
            /* the newest message of each face, if one came */
            for (int d = 0; d < 6; d++) {
                if (r.nbr[d] < 0) continue;
                int k = 0, newest = -1;
                MPI_Testsome(R, f[d].recv, &k, f[d].done, MPI_STATUSES_IGNORE);
                if (k == MPI_UNDEFINED) k = 0;
                for (int j = 0; j < k; j++)
                    if (newest < 0 || f[d].order[f[d].done[j]] > f[d].order[newest]) newest = f[d].done[j];
                if (newest >= 0)
                    MODELLED(MODEL_UNPACK, r.len[d],
                             lap_face(&r.b, r.u, f[d].in + newest * r.len[d], d, LAP_UNPACK));
                for (int j = 0; j < k; j++) post(&f[d], f[d].done[j], r.len[d], r.nbr[d], d);
                f[d].got += k;
            }
            double s = 0;
            MODELLED(MODEL_SWEEP, points, s = lap_sweep(&r.b, r.u, r.un, 1, n, due));
            if (due) mine = s;
            if (o->swap) {
                double *t = r.u;
                r.u = r.un;
                r.un = t;
            } else {
                MODELLED(MODEL_COPY, points, lap_copy(&r.b, r.u, r.un, 1, n));
            }
            it++;
            /* offer every face: the first free send buffer, or skip */
            for (int d = 0; d < 6; d++) {
                if (r.nbr[d] < 0) continue;
                int slot = -1;
                for (int s2 = 0; s2 < R && slot < 0; s2++) {
                    int free_ = f[d].send[s2] == MPI_REQUEST_NULL;
                    if (!free_) MPI_Test(&f[d].send[s2], &free_, MPI_STATUS_IGNORE);
                    if (free_) slot = s2;
                }
                if (slot < 0) {
                    skipped++;
                    continue;
                }
                double *msg = f[d].out + slot * r.len[d];
                MODELLED(MODEL_PACK, r.len[d], lap_face(&r.b, r.u, msg, d, LAP_PACK));
                MPI_Isend(msg, (int)r.len[d], MPI_DOUBLE, r.nbr[d], TAG_DATA + d, MPI_COMM_WORLD,
                          &f[d].send[slot]);
                f[d].sent++;
            }
        }
        if (due) {
            red_in[0] = mine;
            red_in[1] = it >= o->iters;
            MPI_Iallreduce(red_in, red_out, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &red);
            active = started = 1;
            last_start = it;
        }
    }
    const double loop_s = MPI_Wtime() - t0;

    /* drain: how many messages each neighbour sent, then receive them all */
    long expect[6] = {0};
    MPI_Request cq[12];
    int ncq = 0;
    for (int d = 0; d < 6; d++)
        if (r.nbr[d] >= 0) {
            MPI_Irecv(&expect[d], 1, MPI_LONG, r.nbr[d], TAG_COUNT + (d ^ 1), MPI_COMM_WORLD, &cq[ncq++]);
            MPI_Isend(&f[d].sent, 1, MPI_LONG, r.nbr[d], TAG_COUNT + d, MPI_COMM_WORLD, &cq[ncq++]);
        }
    int counted = 0;
    for (int all = 0; !all;) {
        all = 1;
        if (!counted) MPI_Testall(ncq, cq, &counted, MPI_STATUSES_IGNORE);
        for (int d = 0; d < 6; d++) {
            if (r.nbr[d] < 0) continue;
            int k = 0, sends = 0;
            MPI_Testsome(R, f[d].recv, &k, f[d].done, MPI_STATUSES_IGNORE);
            if (k == MPI_UNDEFINED) k = 0;
            f[d].got += k;
            for (int j = 0; j < k; j++) {
                /* the receives still posted may take what is still to come */
                long open = 0;
                for (int s = 0; s < R; s++) open += f[d].recv[s] != MPI_REQUEST_NULL;
                if (!counted || f[d].got + open < expect[d]) post(&f[d], f[d].done[j], r.len[d], r.nbr[d], d);
            }
            MPI_Testall(R, f[d].send, &sends, MPI_STATUSES_IGNORE);
            if (!sends || !counted || f[d].got < expect[d]) all = 0;
        }
    }
    for (int d = 0; d < 6; d++)
        for (int s = 0; s < R; s++)
            if (f[d].recv[s] != MPI_REQUEST_NULL) {
                MPI_Cancel(&f[d].recv[s]);
                MPI_Wait(&f[d].recv[s], MPI_STATUS_IGNORE);
            }

    const double truth = lap_relative(lap_true_sq(&r, TAG_TRUE), sq0);
    long it_min = 0, it_max = 0, it_sum = 0, mine_c[2] = {skipped, rounds}, sum_c[2] = {0, 0};
    double slowest = 0;
    MPI_Allreduce(&it, &it_min, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&it, &it_max, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&it, &it_sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(mine_c, sum_c, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&loop_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (r.rank == 0) {
        char extra[128];
        snprintf(extra, sizeof extra, "R=%d rounds=%ld confirms=%ld skipped=%ld", R, rounds, confirms,
                 sum_c[0]);
        lap_report("mpi_racy", o->swap ? "swap" : "copy", r.size, r.p, n, it_sum, it_min, it_max, slowest,
                   rel, truth, converged, extra);
    }
    for (int d = 0; d < 6; d++) {
        free(f[d].out);
        free(f[d].in);
        free(f[d].send);
        free(f[d].recv);
        free(f[d].order);
        free(f[d].done);
    }
    lap_rank_free(&r);
    MPI_Finalize();
    return 0;
}
