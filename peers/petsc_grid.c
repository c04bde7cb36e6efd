/*
 * petsc_grid: PETSc on aiac's grid problem, the peer of `aiac run --solver cg|pipecg` and of
 * aiac's sync Jacobi. What a PETSc user would write: a 3-D DMDA of the interior points (star
 * stencil, width 1) split as laplace.h splits the grid (every rank n^3 points, the paper's
 * process grid, ranks x fastest), the matrix A = 6 I - (the 6 neighbours) assembled as AIJ, the
 * Dirichlet values of laplace.h moved into b, x0 = 0 (the interior's start, so
 * b - A x0 = b as in aiac).
 *
 * --ksp lists the solvers run (default cg,pipecg), --pc the preconditioners (none,jacobi):
 *   cg          KSPCG
 *   pipecg      KSPPIPECG (pipelined CG: one MPI_Iallreduce per iteration, overlapped)
 *   richardson  KSPRICHARDSON with scale 1 and PCJACOBI: x <- x + D^-1 (b - A x), which is
 *               Jacobi's sweep (its --pc is ignored)
 * The stop is aiac's. CG and PIPECG: ||r_k|| / ||b|| <= --tol (default 1e-8; --rtol is the
 * same setting) on the recurrence residual in the natural norm, the norm aiac's CG tests: as
 * D = 6 I, for both preconditioners its ratio to the first is ||r_k|| / ||r_0||, and CG's own
 * dot products give it with no extra reduction. Richardson: aiac's Jacobi test, the relative
 * residual ||b - A x|| / ||b - A x0|| < --tol of the iterate a sweep starts from, tested every
 * --check-every sweeps (default 100); the count includes that sweep, as aiac's does, so it
 * equals aiac's sync count. (PETSc computes that norm at every sweep, a reduction per sweep
 * that aiac makes only every K.)
 *
 * KSPSetUp and a 5-iteration warm-up solve come before any timing; only KSPSolve is timed (the
 * slowest rank's time). --reps R runs every combination R times, interleaved. One line per
 * solve on rank 0:
 *   prog=petsc_grid ksp=.. pc=.. procs=.. grid=.. n=.. rep=.. its=.. time_s=.. t_it_us=..
 *   true_rel=.. converged=.. reason=..
 * true_rel is ||b - A x|| / ||b|| recomputed from the final x. PETSc's own options (-ksp_view,
 * -log_view, ...) pass through.
 *
 *   mpirun -np 2 petsc_grid --n 50 --tol 1e-8 --ksp cg,pipecg --pc none,jacobi --reps 3
 *   mpirun -np 2 petsc_grid --n 50 --tol 1e-4 --ksp richardson
 */
#include <petscdmda.h>
#include <petscksp.h>

#include "laplace.h"

/* Does the comma-separated `list` name `word`? */
static int listed(const char *list, const char *word)
{
    const size_t len = strlen(word);
    for (const char *s = list; *s;) {
        const char *end = strchr(s, ',');
        const size_t l = end ? (size_t)(end - s) : strlen(s);
        if (l == len && !strncmp(s, word, len)) return 1;
        if (!end) break;
        s = end + 1;
    }
    return 0;
}

/* Every word of `list` one of `allowed` (a NULL-terminated array)? */
static const char *stranger(const char *list, const char *const *allowed)
{
    static char word[64];
    for (const char *s = list; *s;) {
        const char *end = strchr(s, ',');
        size_t l = end ? (size_t)(end - s) : strlen(s);
        if (l >= sizeof word) l = sizeof word - 1;
        memcpy(word, s, l);
        word[l] = 0;
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) ok |= !strcmp(word, *a);
        if (!ok) return word;
        if (!end) break;
        s = end + 1;
    }
    return NULL;
}

/* aiac's sync Jacobi test for Richardson: at sweep n PETSc has the norm of b - A x_n, the
 * residual of the iterate sweep n + 1 starts from; aiac tests it when n + 1 is a multiple of
 * K and counts that sweep, so the solve stops one sweep later. */
typedef struct {
    long every;
    double tol, r0;
    PetscInt stop_at; /* -1: not yet met */
} jacobi_test;

static PetscErrorCode jacobi_stop(KSP ksp, PetscInt it, PetscReal rnorm, KSPConvergedReason *reason, void *ctx)
{
    jacobi_test *t = ctx;
    (void)ksp;
    *reason = KSP_CONVERGED_ITERATING;
    if (it == 0) {
        t->r0 = rnorm;
        t->stop_at = -1;
    }
    if (t->stop_at >= 0 && it >= t->stop_at) {
        *reason = KSP_CONVERGED_RTOL;
        return 0;
    }
    const double rel = t->r0 > 0 ? rnorm / t->r0 : 0.0;
    if ((it + 1) % t->every == 0 && rel < t->tol) t->stop_at = it + 1;
    return 0;
}

int main(int argc, char **argv)
{
    PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
    MPI_Comm comm = PETSC_COMM_WORLD;
    int rank, size;
    PetscCallMPI(MPI_Comm_rank(comm, &rank));
    PetscCallMPI(MPI_Comm_size(comm, &size));

    /* this program's options, then laplace.h's on the rest */
    const char *ksps = "cg,pipecg", *pcs = "none,jacobi", *tol_text = NULL, *reps_text = "1";
    char **rest = malloc((size_t)(argc + 1) * sizeof(char *));
    int nrest = 0, bad = 0;
    for (int a = 0; a < argc; a++) {
        const char *f = argv[a];
        const int own = !strcmp(f, "--ksp") || !strcmp(f, "--pc") || !strcmp(f, "--tol") ||
                        !strcmp(f, "--rtol") || !strcmp(f, "--reps");
        if (!own) {
            rest[nrest++] = argv[a];
            continue;
        }
        if (a + 1 >= argc) {
            if (!rank) fprintf(stderr, "%s: %s needs a value\n", argv[0], f);
            bad = 1;
            break;
        }
        const char *v = argv[++a];
        if (!strcmp(f, "--ksp")) ksps = v;
        else if (!strcmp(f, "--pc")) pcs = v;
        else if (!strcmp(f, "--reps")) reps_text = v;
        else tol_text = v;
    }
    rest[nrest] = NULL;
    lap_opts o;
    int p[3] = {1, 1, 1};
    double tol = 1e-8, reps_v = 1;
    const char *const ksp_names[] = {"cg", "pipecg", "richardson", NULL}, *const pc_names[] = {"none", "jacobi", NULL};
    const char *odd;
    if (!bad) bad = lap_parse(nrest, rest, &o, rank != 0, 1);
    if (!bad && !lap_grid(argv[0], size, &o, p, rank != 0)) bad = 1;
    if (!bad && tol_text && !lap_number(argv[0], "--tol", tol_text, 0, 0, &tol, rank != 0)) bad = 1;
    if (!bad && !lap_number(argv[0], "--reps", reps_text, 1, 1, &reps_v, rank != 0)) bad = 1;
    if (!bad && (odd = stranger(ksps, ksp_names))) {
        if (!rank) fprintf(stderr, "%s: --ksp %s: expected cg, pipecg or richardson\n", argv[0], odd);
        bad = 1;
    }
    if (!bad && (odd = stranger(pcs, pc_names))) {
        if (!rank) fprintf(stderr, "%s: --pc %s: expected none or jacobi\n", argv[0], odd);
        bad = 1;
    }
    free(rest);
    if (bad) {
        PetscCall(PetscFinalize());
        return bad == 2 ? 0 : 1;
    }
    const int n = o.n, reps = (int)reps_v;
    const long every = o.check_every ? o.check_every : 100;
    const int G[3] = {p[0] * n, p[1] * n, p[2] * n};

    /* the grid, every rank n^3 points */
    PetscInt *lx, *ly, *lz;
    PetscCall(PetscMalloc3(p[0], &lx, p[1], &ly, p[2], &lz));
    for (int i = 0; i < p[0]; i++) lx[i] = n;
    for (int i = 0; i < p[1]; i++) ly[i] = n;
    for (int i = 0; i < p[2]; i++) lz[i] = n;
    DM da;
    PetscCall(DMDACreate3d(comm, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, G[0],
                           G[1], G[2], p[0], p[1], p[2], 1, 1, lx, ly, lz, &da));
    PetscCall(DMSetUp(da));
    Mat A;
    Vec b, x, r;
    PetscCall(DMCreateMatrix(da, &A));
    PetscCall(DMCreateGlobalVector(da, &b));
    PetscCall(VecDuplicate(b, &x));
    PetscCall(VecDuplicate(b, &r));

    /* A and b: a row per interior point; a neighbour on the boundary gives its value to b */
    PetscInt x0, y0, z0, mx, my, mz;
    PetscCall(DMDAGetCorners(da, &x0, &y0, &z0, &mx, &my, &mz));
    PetscScalar ***bv;
    PetscCall(DMDAVecGetArray(da, b, &bv));
    const double hx = 1.0 / (G[0] + 1), hy = 1.0 / (G[1] + 1);
    for (PetscInt k = z0; k < z0 + mz; k++)
        for (PetscInt j = y0; j < y0 + my; j++)
            for (PetscInt i = x0; i < x0 + mx; i++) {
                MatStencil row = {.i = i, .j = j, .k = k}, col[7];
                PetscScalar v[7];
                int m = 0;
                double rhs = 0;
                col[m] = row;
                v[m++] = 6.0;
                for (int d = 0; d < 6; d++) {
                    PetscInt q[3] = {i, j, k};
                    q[d / 2] += d % 2 ? 1 : -1;
                    if (q[d / 2] >= 0 && q[d / 2] < G[d / 2]) {
                        col[m] = (MatStencil){.i = q[0], .j = q[1], .k = q[2]};
                        v[m++] = -1.0;
                    } else if (d == 4) { /* z = 0: the point (i + 1, j + 1, 0) of laplace.h */
                        const double dx = 0.5 - (i + 1) * hx, dy = 0.5 - (j + 1) * hy;
                        rhs += exp(-(dx * dx + dy * dy));
                    }
                }
                bv[k][j][i] = rhs;
                PetscCall(MatSetValuesStencil(A, 1, &row, m, col, v, INSERT_VALUES));
            }
    PetscCall(DMDAVecRestoreArray(da, b, &bv));
    PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
    PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
    PetscReal bnorm;
    PetscCall(VecNorm(b, NORM_2, &bnorm));

    /* the solvers */
    typedef struct {
        const char *ksp, *pc;
        KSP k;
    } combo;
    combo c[6];
    int nc = 0;
    jacobi_test jt = {.every = every, .tol = tol, .stop_at = -1};
    for (int ki = 0; ksp_names[ki]; ki++) {
        if (!listed(ksps, ksp_names[ki])) continue;
        const int rich = !strcmp(ksp_names[ki], "richardson");
        for (int pi = 0; pc_names[pi]; pi++) {
            if (rich ? pi != 1 : !listed(pcs, pc_names[pi])) continue; /* Richardson: PCJACOBI */
            KSP k;
            PC pc;
            char prefix[32];
            snprintf(prefix, sizeof prefix, "%s_%s_", ksp_names[ki], pc_names[pi]);
            PetscCall(KSPCreate(comm, &k));
            PetscCall(KSPSetOptionsPrefix(k, prefix));
            PetscCall(KSPSetOperators(k, A, A));
            PetscCall(KSPGetPC(k, &pc));
            PetscCall(PCSetType(pc, pi ? PCJACOBI : PCNONE));
            if (rich) {
                PetscCall(KSPSetType(k, KSPRICHARDSON));
                PetscCall(KSPRichardsonSetScale(k, 1.0));
                PetscCall(KSPSetNormType(k, KSP_NORM_UNPRECONDITIONED));
                PetscCall(KSPSetConvergenceTest(k, jacobi_stop, &jt, NULL));
            } else {
                PetscCall(KSPSetType(k, ki ? KSPPIPECG : KSPCG));
                PetscCall(KSPSetNormType(k, KSP_NORM_NATURAL));
            }
            PetscCall(KSPSetFromOptions(k));
            PetscCall(KSPSetUp(k));
            PetscCall(KSPSetTolerances(k, 0.0, 0.0, PETSC_DEFAULT, 5)); /* the warm-up */
            PetscCall(VecSet(x, 0.0));
            PetscCall(KSPSolve(k, b, x));
            PetscCall(KSPSetTolerances(k, rich ? 0.0 : tol, 0.0, PETSC_DEFAULT, o.iters < 100000 ? 100000 : o.iters));
            c[nc++] = (combo){ksp_names[ki], pc_names[pi], k};
        }
    }

    int all_converged = 1;
    for (int rep = 1; rep <= reps; rep++)
        for (int s = 0; s < nc; s++) {
            PetscCall(VecSet(x, 0.0));
            PetscCallMPI(MPI_Barrier(comm));
            const double t0 = MPI_Wtime();
            PetscCall(KSPSolve(c[s].k, b, x));
            double t = MPI_Wtime() - t0, slowest = 0;
            PetscCallMPI(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm));
            PetscInt its;
            KSPConvergedReason why;
            PetscReal rn;
            PetscCall(KSPGetIterationNumber(c[s].k, &its));
            PetscCall(KSPGetConvergedReason(c[s].k, &why));
            PetscCall(MatResidual(A, b, x, r));
            PetscCall(VecNorm(r, NORM_2, &rn));
            const double rel = bnorm > 0 ? rn / bnorm : 0.0;
            all_converged &= why > 0;
            if (!rank)
                printf("prog=petsc_grid ksp=%s pc=%s procs=%d grid=%dx%dx%d n=%d rep=%d its=%d time_s=%.6f "
                       "t_it_us=%.2f true_rel=%.6e converged=%d reason=%d tol=%g\n",
                       c[s].ksp, c[s].pc, size, p[0], p[1], p[2], n, rep, (int)its, slowest,
                       its ? slowest / its * 1e6 : 0.0, rel, why > 0, (int)why, tol);
        }
    fflush(stdout);
    for (int s = 0; s < nc; s++) PetscCall(KSPDestroy(&c[s].k));
    PetscCall(VecDestroy(&x));
    PetscCall(VecDestroy(&b));
    PetscCall(VecDestroy(&r));
    PetscCall(MatDestroy(&A));
    PetscCall(DMDestroy(&da));
    PetscCall(PetscFree3(lx, ly, lz));
    PetscCall(PetscFinalize());
    return all_converged ? 0 : 2;
}
