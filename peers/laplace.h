/*
 * laplace.h: what the grid peers share with each other and with aiac's Jacobi solver, so that
 * their iteration counts compare with aiac's.
 *
 * The problem is aiac's Laplace problem (crates/jacobi/src/problem.rs, Bethune et al. 2014):
 * A u = b on the G_x x G_y x G_z interior points of the unit cube, A = 6 I - (the 6 neighbours),
 * b the Dirichlet values: 0 on every face except z = 0, where u = exp(-((0.5-x)^2 + (0.5-y)^2)).
 * Point g (0 and G+1 are the Dirichlet planes) sits at g h with h = 1/(G+1) per axis; the
 * interior starts at 0.
 *
 * A sweep is aiac's: s = (x-) + (x+) + (y-) + (y+) + (z-) + (z+) summed in that order,
 * u_new = s / 6 (times the double nearest 1/6), and the residual of the iterate swept is
 * r = s - 6 u, so that sum r^2 is || b - A u ||^2. The stop test is aiac's relative residual:
 * || b - A u_k || / || b - A u_0 || < tol, the strict comparison of StopCriterion::met. A sync
 * program tests it every --check-every iterations, on the residual of the iterate the check's
 * sweep started from, as aiac does, so the same test fires at the same iteration.
 *
 * Decomposition: every rank owns an n^3 block (--n, aiac's --local) plus a one-cell halo,
 * stored x fastest, then y, then z. The process grid is aiac's ProcGrid::paper: the k-th
 * prime factor of the rank count, in ascending order, multiplies axis k mod 3 (2 = 2x1x1,
 * 4 = 2x2x1, 8 = 2x2x2, 6 = 2x3x1); rank r sits at (r mod Px, (r / Px) mod Py, r / (Px Py)).
 * --grid AxBxC sets it, as aiac's --grid does.
 *
 * Output: one line of key=value pairs, starting with prog=, that the bench scripts read.
 */
#ifndef PEERS_LAPLACE_H
#define PEERS_LAPLACE_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

/* ------------------------------------------------------------------ command line */

typedef struct {
    int n;             /* interior points per axis of a rank's block (--n) */
    long iters;        /* iteration limit: exactly this many without --tol, at most with it */
    double tol;        /* relative residual to stop below; 0: run --iters iterations */
    long check_every;  /* sync: test every K iterations; racy: start reductions >= K apart */
    int swap;          /* swap the arrays instead of copying u = u_new */
    int confirm;       /* racy: certify a claimed convergence with a synchronous residual */
    int R;             /* racy MPI: messages in flight per face */
    int grid[3];       /* process grid, 0 0 0: the paper's */
    const char *mode;  /* OpenMP: sync or racy */
} lap_opts;

static inline void lap_usage(const char *prog, FILE *to)
{
    fprintf(to,
            "usage: %s [--n B] [--iters N] [--tol T] [--check-every K] [--swap] [--confirm]\n"
            "       [--R R] [--grid PXxPYxPZ] [--mode sync|racy]\n"
            "  --n B            each rank (thread) owns B^3 interior points (default 50)\n"
            "  --iters N        iterations: exactly N without --tol, at most N with it (1000)\n"
            "  --tol T          stop when ||b - A u|| / ||b - A u0|| < T\n"
            "  --check-every K  sync: test every K iterations (default 100); racy: start a\n"
            "                   residual reduction at least K iterations after the last (1)\n"
            "  --swap           swap the two arrays instead of copying u = u_new\n"
            "  --confirm        racy: check a claimed convergence with a synchronous residual\n"
            "                   and carry on when it is not below T\n"
            "  --R R            racy MPI: at most R messages in flight per face (default 2)\n"
            "  --grid AxBxC     process grid (default: the paper's, x doubled first)\n"
            "  --mode M         OpenMP programs: sync or racy (default sync)\n",
            prog);
}

/* A number argument: the whole text must parse and be at least `min`. */
static inline int lap_number(const char *prog, const char *flag, const char *text, double min,
                             int integral, double *out, int quiet)
{
    char *end;
    errno = 0;
    const double v = integral ? (double)strtol(text, &end, 10) : strtod(text, &end);
    if (!*text || *end || errno || !isfinite(v) || v < min) {
        if (!quiet)
            fprintf(stderr, "%s: %s %s: expected %s of at least %g\n", prog, flag, text,
                    integral ? "an integer" : "a number", min);
        return 0;
    }
    *out = v;
    return 1;
}

/*
 * Parse the command line. Returns 0 to run, 1 on bad input (one message on stderr unless
 * `quiet`), 2 after --help. `foreign`: skip what starts with a single '-' (and the value
 * after it), for programs that pass PETSc's options through.
 */
static inline int lap_parse(int argc, char **argv, lap_opts *o, int quiet, int foreign)
{
    const char *prog = argv[0];
    *o = (lap_opts){.n = 50, .iters = 1000, .check_every = 0, .R = 2, .mode = "sync"};
    for (int a = 1; a < argc; a++) {
        const char *f = argv[a];
        double v = 0;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            if (!quiet) lap_usage(prog, stdout);
            return 2;
        }
        if (!strcmp(f, "--swap")) { o->swap = 1; continue; }
        if (!strcmp(f, "--confirm")) { o->confirm = 1; continue; }
        if (foreign && f[0] == '-' && f[1] != '-') {
            if (a + 1 < argc && argv[a + 1][0] != '-') a++;
            continue;
        }
        const int known = !strcmp(f, "--n") || !strcmp(f, "--iters") || !strcmp(f, "--tol") ||
                          !strcmp(f, "--check-every") || !strcmp(f, "--R") ||
                          !strcmp(f, "--grid") || !strcmp(f, "--mode");
        if (!known) {
            if (!quiet) fprintf(stderr, "%s: unknown option %s (--help lists them)\n", prog, f);
            return 1;
        }
        if (a + 1 >= argc) {
            if (!quiet) fprintf(stderr, "%s: %s needs a value\n", prog, f);
            return 1;
        }
        const char *val = argv[++a];
        if (!strcmp(f, "--grid")) {
            char tail;
            if (sscanf(val, "%dx%dx%d%c", &o->grid[0], &o->grid[1], &o->grid[2], &tail) != 3 ||
                o->grid[0] < 1 || o->grid[1] < 1 || o->grid[2] < 1) {
                if (!quiet) fprintf(stderr, "%s: --grid %s: expected PXxPYxPZ, e.g. 2x2x1\n", prog, val);
                return 1;
            }
        } else if (!strcmp(f, "--mode")) {
            if (strcmp(val, "sync") && strcmp(val, "racy")) {
                if (!quiet) fprintf(stderr, "%s: --mode %s: expected sync or racy\n", prog, val);
                return 1;
            }
            o->mode = val;
        } else if (!strcmp(f, "--tol")) {
            if (!lap_number(prog, f, val, 0, 0, &v, quiet)) return 1;
            o->tol = v;
        } else {
            if (!lap_number(prog, f, val, 1, 1, &v, quiet)) return 1;
            if (!strcmp(f, "--n")) o->n = (int)v;
            else if (!strcmp(f, "--iters")) o->iters = (long)v;
            else if (!strcmp(f, "--check-every")) o->check_every = (long)v;
            else o->R = (int)v;
        }
    }
    return 0;
}

/* The process grid for `size` ranks (the paper's, or --grid); 0 when --grid does not
 * multiply to `size` (message unless `quiet`). */
static inline int lap_grid(const char *prog, int size, const lap_opts *o, int p[3], int quiet)
{
    if (o->grid[0]) {
        memcpy(p, o->grid, sizeof o->grid);
        if ((long)p[0] * p[1] * p[2] != size) {
            if (!quiet)
                fprintf(stderr, "%s: --grid %dx%dx%d is %ld ranks, not %d\n", prog, p[0], p[1], p[2],
                        (long)p[0] * p[1] * p[2], size);
            return 0;
        }
        return 1;
    }
    p[0] = p[1] = p[2] = 1;
    int left = size, k = 0;
    for (int f = 2; left > 1; f++) {
        if ((long)f * f > left) f = left;
        for (; left % f == 0; left /= f) p[k++ % 3] *= f;
    }
    return 1;
}

/* Face d: axis d / 2, on its low (d even) or high (d odd) side; the neighbour's matching face
 * is d ^ 1. The 6 neighbours of `rank` in grid p (-1 on the global boundary) and its coords. */
static inline void lap_neighbours(int rank, const int p[3], int c[3], int nbr[6])
{
    c[0] = rank % p[0];
    c[1] = rank / p[0] % p[1];
    c[2] = rank / (p[0] * p[1]);
    for (int d = 0; d < 6; d++) {
        int q[3] = {c[0], c[1], c[2]};
        q[d / 2] += d % 2 ? 1 : -1;
        nbr[d] = q[d / 2] < 0 || q[d / 2] >= p[d / 2] ? -1 : q[0] + p[0] * (q[1] + p[1] * q[2]);
    }
}

/* ------------------------------------------------------------------ blocks */

/* A block of n[0] x n[1] x n[2] interior points with its one-cell halo. */
typedef struct {
    int n[3];
    size_t sy, sz; /* strides of y and z (x is 1) */
    size_t cells;  /* values in the array, halo included */
} lap_block;

static inline lap_block lap_block_of(int nx, int ny, int nz)
{
    lap_block b = {.n = {nx, ny, nz}};
    b.sy = (size_t)nx + 2;
    b.sz = b.sy * ((size_t)ny + 2);
    b.cells = b.sz * ((size_t)nz + 2);
    return b;
}

/* An array of the block's cells, zeroed, on a cache line. */
static inline double *lap_alloc(const lap_block *b)
{
    const size_t bytes = (b->cells * sizeof(double) + 63) / 64 * 64;
    double *u = aligned_alloc(64, bytes);
    if (!u) {
        fprintf(stderr, "out of memory for %zu bytes\n", bytes);
        exit(1);
    }
    memset(u, 0, bytes);
    return u;
}

/* Dirichlet values in the cells of the block that lie on the global boundary z = 0: `first` is
 * the global index of the block's first interior point, `global` the interior points per axis.
 * Every other cell keeps its 0 (the initial interior, and the other boundary faces). */
static inline void lap_boundary(const lap_block *b, double *u, const int first[3], const int global[3])
{
    if (first[2] != 1) return; /* the block does not touch z = 0 */
    const double hx = 1.0 / (global[0] + 1), hy = 1.0 / (global[1] + 1);
    for (int j = 0; j <= b->n[1] + 1; j++)
        for (int i = 0; i <= b->n[0] + 1; i++) {
            const double dx = 0.5 - (first[0] + i - 1) * hx, dy = 0.5 - (first[1] + j - 1) * hy;
            u[j * b->sy + i] = exp(-(dx * dx + dy * dy));
        }
}

/* Sweep planes k0..k1 of u into un; returns sum r^2 of those planes when `resid`, else 0. */
static inline double lap_sweep(const lap_block *b, const double *restrict u, double *restrict un,
                               int k0, int k1, int resid)
{
    const double sixth = 1.0 / 6.0;
    const long sy = (long)b->sy, sz = (long)b->sz;
    const int nx = b->n[0];
    double acc = 0.0;
    for (int k = k0; k <= k1; k++)
        for (int j = 1; j <= b->n[1]; j++) {
            const double *restrict c = u + k * sz + j * sy;
            double *restrict o = un + k * sz + j * sy;
            if (resid) {
#pragma omp simd reduction(+ : acc)
                for (int i = 1; i <= nx; i++) {
                    const double s = c[i - 1] + c[i + 1] + c[i - sy] + c[i + sy] + c[i - sz] + c[i + sz];
                    const double r = s - 6.0 * c[i];
                    o[i] = s * sixth;
                    acc += r * r;
                }
            } else {
#pragma omp simd
                for (int i = 1; i <= nx; i++)
                    o[i] = (c[i - 1] + c[i + 1] + c[i - sy] + c[i + sy] + c[i - sz] + c[i + sz]) * sixth;
            }
        }
    return acc;
}

/* u = un on the interior points of planes k0..k1. */
static inline void lap_copy(const lap_block *b, double *restrict u, const double *restrict un,
                            int k0, int k1)
{
    for (int k = k0; k <= k1; k++)
        for (int j = 1; j <= b->n[1]; j++) {
            const size_t at = k * b->sz + j * b->sy + 1;
            memcpy(u + at, un + at, b->n[0] * sizeof(double));
        }
}

/* Values on face d (the product of the other two axes' extents). */
static inline size_t lap_face_len(const lap_block *b, int d)
{
    const int a = d / 2;
    return (size_t)b->n[a == 0 ? 1 : 0] * b->n[a == 2 ? 1 : 2];
}

enum lap_dir { LAP_PACK, LAP_UNPACK };

/* PACK: the owned layer next to face d into msg; UNPACK: msg into the halo layer beyond it.
 * Both walk the face with its faster axis first, so the two sides agree on the order. */
static inline void lap_face(const lap_block *b, double *u, double *msg, int d, enum lap_dir dir)
{
    const int a = d / 2, p = a == 0 ? 1 : 0, q = a == 2 ? 1 : 2;
    const size_t stride[3] = {1, b->sy, b->sz};
    const int layer = d % 2 ? b->n[a] + (dir == LAP_UNPACK) : 1 - (dir == LAP_UNPACK);
    double *base = u + layer * stride[a];
    size_t m = 0;
    for (int jq = 1; jq <= b->n[q]; jq++)
        for (int jp = 1; jp <= b->n[p]; jp++, m++) {
            double *cell = base + jq * stride[q] + jp * stride[p];
            if (dir == LAP_PACK) msg[m] = *cell;
            else *cell = msg[m];
        }
}

/* ------------------------------------------------------------------ reporting */

static inline double lap_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The relative residual from sum r^2 and the initial sum r^2 (aiac's StopCriterion::measure:
 * 0 / 0 is 0, a zero initial residual with a nonzero one infinite). */
static inline double lap_relative(double sq, double sq0)
{
    if (sq < 0) sq = 0;
    if (sq0 == 0) return sq == 0 ? 0.0 : INFINITY;
    return sqrt(sq) / sqrt(sq0);
}

/* The result line. `iters`: per-rank iteration counts summed (the mean is printed as iters);
 * `last`: the relative residual the stop test last saw; `truth`: recomputed from the final
 * iterate; `extra`: more key=value pairs or "". */
static inline void lap_report(const char *prog, const char *variant, int procs, const int p[3],
                              int n, long iters_sum, long it_min, long it_max, double time_s,
                              double last, double truth, int converged, const char *extra)
{
    const double points = (double)n * n * n;
    printf("prog=%s variant=%s procs=%d grid=%dx%dx%d n=%d iters=%ld iters_min=%ld iters_max=%ld "
           "time_s=%.6f mups_total=%.2f rel=%.6e true_rel=%.6e converged=%d%s%s\n",
           prog, variant, procs, p[0], p[1], p[2], n, (iters_sum + procs / 2) / procs, it_min, it_max,
           time_s, time_s > 0 ? (double)iters_sum * points / time_s / 1e6 : 0.0, last, truth,
           converged, *extra ? " " : "", extra);
    fflush(stdout);
}

/* ------------------------------------------------------------------ MPI ranks */
#ifdef LAP_MPI_RANKS /* defined by the MPI programs before including this header */

/* One rank's part of a grid program over MPI. */
typedef struct {
    lap_opts o;
    int rank, size, p[3], c[3], nbr[6];
    int global[3], first[3];
    lap_block b;
    double *u, *un;          /* the iterate and the array swept into */
    size_t len[6];           /* values on each face */
    double *out[6], *in[6];  /* one message buffer per face and direction */
} lap_rank;

/* MPI_Init, the command line, the grid, the block with its boundary values and buffers.
 * Returns 0 to run; otherwise every rank has finalised MPI and the program exits with the
 * value returned (1: bad input, said once by rank 0; 0: --help). */
static inline int lap_rank_init(lap_rank *r, int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->size);
    const int quiet = r->rank != 0;
    int bad = lap_parse(*argc, *argv, &r->o, quiet, 0);
    if (!bad && !lap_grid((*argv)[0], r->size, &r->o, r->p, quiet)) bad = 1;
    if (bad) {
        MPI_Finalize();
        return bad == 2 ? -1 : 1;
    }
    const int n = r->o.n;
    lap_neighbours(r->rank, r->p, r->c, r->nbr);
    for (int a = 0; a < 3; a++) {
        r->global[a] = r->p[a] * n;
        r->first[a] = r->c[a] * n + 1;
    }
    r->b = lap_block_of(n, n, n);
    r->u = lap_alloc(&r->b);
    r->un = lap_alloc(&r->b);
    lap_boundary(&r->b, r->u, r->first, r->global);
    lap_boundary(&r->b, r->un, r->first, r->global);
    for (int d = 0; d < 6; d++) {
        r->len[d] = lap_face_len(&r->b, d);
        r->out[d] = malloc(r->len[d] * sizeof(double));
        r->in[d] = malloc(r->len[d] * sizeof(double));
        if (!r->out[d] || !r->in[d]) {
            fprintf(stderr, "out of memory for face buffers\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return 0;
}

static inline void lap_rank_free(lap_rank *r)
{
    for (int d = 0; d < 6; d++) {
        free(r->out[d]);
        free(r->in[d]);
    }
    free(r->u);
    free(r->un);
}

/* The synchronous halo swap: a receive posted for every face, then every face packed and sent
 * (MPI_Issend when `ssend`, else MPI_Isend), one MPI_Waitall, every halo face unpacked. Tags
 * tag + d name the sender's face d. */
static inline void lap_swap(lap_rank *r, int tag, int ssend)
{
    MPI_Request q[12];
    int nq = 0;
    for (int d = 0; d < 6; d++)
        if (r->nbr[d] >= 0)
            MPI_Irecv(r->in[d], (int)r->len[d], MPI_DOUBLE, r->nbr[d], tag + (d ^ 1), MPI_COMM_WORLD,
                      &q[nq++]);
    for (int d = 0; d < 6; d++) {
        if (r->nbr[d] < 0) continue;
        MODELLED(MODEL_PACK, r->len[d], lap_face(&r->b, r->u, r->out[d], d, LAP_PACK));
        if (ssend)
            MPI_Issend(r->out[d], (int)r->len[d], MPI_DOUBLE, r->nbr[d], tag + d, MPI_COMM_WORLD, &q[nq++]);
        else
            MPI_Isend(r->out[d], (int)r->len[d], MPI_DOUBLE, r->nbr[d], tag + d, MPI_COMM_WORLD, &q[nq++]);
    }
    MPI_Waitall(nq, q, MPI_STATUSES_IGNORE);
    for (int d = 0; d < 6; d++)
        if (r->nbr[d] >= 0) MODELLED(MODEL_UNPACK, r->len[d], lap_face(&r->b, r->u, r->in[d], d, LAP_UNPACK));
}

/* Sum r^2 over every rank of the current iterate, after a synchronous swap (tag: as lap_swap). */
static inline double lap_true_sq(lap_rank *r, int tag)
{
    lap_swap(r, tag, 0);
    const int n = r->o.n;
    double mine = 0, all = 0;
    MODELLED(MODEL_SWEEP, (long)n * n * n, mine = lap_sweep(&r->b, r->u, r->un, 1, n, 1));
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

#endif

#endif
