/* PETSc on a Matrix Market system, the peer of `aiac run --matrix`: the same partition (rows
 * in contiguous blocks balanced by nonzeros, as jacobi::sparse::row_blocks splits them), the
 * same right-hand side (b = A·1 to the bit, or --rhs), x0 = 0, and the same stop on the
 * relative residual ‖b − A x‖₂/‖b‖₂ ≤ tol (rtol = tol, atol = 0).
 *
 *   mpirun -np P petsc_mtx --matrix A.mtx [--rhs B.mtx] --solver cg|jacobi [--tol 1e-8]
 *          [--max-iters 100000] [--norm natural|unpreconditioned]
 *
 * --solver cg     KSPCG + PCNONE. Its stop is on ‖r‖₂ of the recurrence residual: the natural
 *                 norm (default; with PCNONE it is ‖r‖₂ from the dot r·r CG needs anyway, two
 *                 reductions per iteration, as aiac's CG) or the unpreconditioned norm
 *                 (PETSc's separate VecNorm: a third reduction per iteration).
 * --solver jacobi KSPRICHARDSON (scale 1) + PCJACOBI: x ← x + D⁻¹(b − A x), Jacobi's
 *                 iteration, its stop on the unpreconditioned residual of every iterate.
 *
 * Every rank reads the whole file and keeps its own rows (a MATMPIAIJ, values set from CSR).
 * Prints one line on rank 0:
 *   petsc_mtx solver=.. ksp=.. pc=.. norm=.. np=.. n=.. nnz=.. its=.. solve_s=.. s_per_iter=..
 *   true_rel_res=.. reason=.. bounds=0,..,n (the row blocks, cut short past a few dozen ranks)
 * solve_s is KSPSolve's wall time (the slowest rank's, after a barrier; set-up excluded) and
 * true_rel_res is ‖b − A x‖₂/‖b‖₂ recomputed from the final x. Exit 0 when the solve met tol,
 * 2 when it stopped without (iteration limit, breakdown), 1 on bad input (every rank reads
 * the same file and fails alike). PETSc options go through the PETSC_OPTIONS variable.
 */
#include <petscksp.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A square matrix in CSR, rows sorted by column, duplicates summed (as jacobi's Csr). */
typedef struct {
  int64_t n;
  int64_t *ptr; /* n + 1 */
  int64_t *col;
  double *val;
} Csr;

typedef struct {
  int64_t r, c;
  double v;
} Entry;

static char err[1024];

#define FAIL(...)                                                                              \
  do {                                                                                         \
    snprintf(err, sizeof err, __VA_ARGS__);                                                    \
    goto fail;                                                                                 \
  } while (0)

/* The next line that is neither a comment nor blank, into buf; 0 at the end of the file. */
static int data_line(FILE *f, char *buf, size_t len, long *lineno) {
  while (fgets(buf, (int)len, f)) {
    ++*lineno;
    const char *s = buf;
    while (isspace((unsigned char)*s)) s++;
    if (*s && *s != '%') return 1;
  }
  return 0;
}

static void lower(char *s) {
  for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static int cmp_entry(const void *a, const void *b) {
  const Entry *x = a, *y = b;
  if (x->r != y->r) return x->r < y->r ? -1 : 1;
  return (x->c > y->c) - (x->c < y->c);
}

/* Read `path` (coordinate real|integer general|symmetric|skew-symmetric, square) into *a.
 * Returns 0, or -1 with err set. */
static int read_matrix(const char *path, Csr *a) {
  Entry *t = NULL;
  char line[4096], obj[64], fmt[64], field[64], sym[64];
  long lineno = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (!fgets(line, sizeof line, f)) FAIL("%s: empty file: no %%%%MatrixMarket header", path);
  lineno = 1;
  if (sscanf(line, "%%%%MatrixMarket %63s %63s %63s %63s", obj, fmt, field, sym) != 4)
    FAIL("%s:1: not a `%%%%MatrixMarket matrix FORMAT FIELD SYMMETRY` header", path);
  lower(obj), lower(fmt), lower(field), lower(sym);
  if (strcmp(obj, "matrix") || strcmp(fmt, "coordinate"))
    FAIL("%s:1: a `matrix coordinate` file is needed, got `%s %s`", path, obj, fmt);
  if (strcmp(field, "real") && strcmp(field, "integer") && strcmp(field, "double"))
    FAIL("%s:1: a real or integer matrix is needed, got `%s`", path, field);
  int symmetric = !strcmp(sym, "symmetric"), skew = !strcmp(sym, "skew-symmetric");
  if (!symmetric && !skew && strcmp(sym, "general"))
    FAIL("%s:1: unknown symmetry `%s` (general, symmetric or skew-symmetric)", path, sym);
  if (!data_line(f, line, sizeof line, &lineno)) FAIL("%s: truncated: no size line", path);
  long long m, n, nnz;
  char extra;
  if (sscanf(line, "%lld %lld %lld %c", &m, &n, &nnz, &extra) != 3 || m < 1 || nnz < 0)
    FAIL("%s:%ld: the size line must be `ROWS COLUMNS ENTRIES`", path, lineno);
  if (m != n) FAIL("%s:%ld: the matrix is %lld x %lld: not square", path, lineno, m, n);
  int64_t stored = (symmetric || skew) ? 2 * nnz : nnz, k = 0;
  t = malloc((size_t)(stored ? stored : 1) * sizeof *t);
  if (!t) FAIL("%s: no memory for %lld entries", path, (long long)stored);
  for (long long e = 0; e < nnz; e++) {
    if (!data_line(f, line, sizeof line, &lineno))
      FAIL("%s: truncated: %lld entries announced, the file ends after %lld", path, nnz, e);
    long long i, j;
    double v;
    char *end;
    errno = 0;
    i = strtoll(line, &end, 10);
    j = strtoll(end, &end, 10);
    v = strtod(end, &end);
    while (isspace((unsigned char)*end)) end++;
    if (errno || *end || end == line)
      FAIL("%s:%ld: an entry must be `ROW COLUMN VALUE`", path, lineno);
    if (i < 1 || i > n || j < 1 || j > n)
      FAIL("%s:%ld: entry (%lld, %lld) is outside 1 to %lld", path, lineno, i, j, n);
    if (!isfinite(v)) FAIL("%s:%ld: the value is not finite", path, lineno);
    if ((symmetric && i < j) || (skew && i <= j))
      FAIL("%s:%ld: entry (%lld, %lld) is not in the lower triangle a %s file stores", path,
           lineno, i, j, sym);
    t[k++] = (Entry){i - 1, j - 1, v};
    if ((symmetric || skew) && i != j) t[k++] = (Entry){j - 1, i - 1, skew ? -v : v};
  }
  if (data_line(f, line, sizeof line, &lineno))
    FAIL("%s:%ld: more entries than the %lld announced", path, lineno, nnz);
  fclose(f);
  f = NULL;
  /* Sort by (row, column) and sum duplicates, as jacobi's Csr::from_triplets does. */
  qsort(t, (size_t)k, sizeof *t, cmp_entry);
  a->n = n;
  a->ptr = calloc((size_t)n + 1, sizeof *a->ptr);
  a->col = malloc((size_t)(k ? k : 1) * sizeof *a->col);
  a->val = malloc((size_t)(k ? k : 1) * sizeof *a->val);
  if (!a->ptr || !a->col || !a->val) FAIL("%s: no memory for the CSR arrays", path);
  int64_t out = 0;
  for (int64_t e = 0; e < k; e++) {
    if (out > 0 && e > 0 && t[e].r == t[e - 1].r && t[e].c == t[e - 1].c) {
      a->val[out - 1] += t[e].v;
      continue;
    }
    a->ptr[t[e].r + 1]++;
    a->col[out] = t[e].c;
    a->val[out++] = t[e].v;
  }
  for (int64_t i = 0; i < n; i++) a->ptr[i + 1] += a->ptr[i];
  free(t);
  return 0;
fail:
  if (f) fclose(f);
  free(t);
  return -1;
}

/* Read a vector of n values: `array` (n × 1) or `coordinate` n × 1 general. */
static int read_vector(const char *path, int64_t n, double *b) {
  char line[4096], obj[64], fmt[64], field[64], sym[64];
  long lineno = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (!fgets(line, sizeof line, f) ||
      sscanf(line, "%%%%MatrixMarket %63s %63s %63s %63s", obj, fmt, field, sym) != 4)
    FAIL("%s:1: not a `%%%%MatrixMarket matrix FORMAT FIELD SYMMETRY` header", path);
  lineno = 1;
  lower(fmt), lower(field), lower(sym);
  int coordinate = !strcmp(fmt, "coordinate");
  if (!coordinate && strcmp(fmt, "array")) FAIL("%s:1: unknown format `%s`", path, fmt);
  if ((strcmp(field, "real") && strcmp(field, "integer") && strcmp(field, "double")) ||
      strcmp(sym, "general"))
    FAIL("%s:1: a real general vector is needed", path);
  if (!data_line(f, line, sizeof line, &lineno)) FAIL("%s: truncated: no size line", path);
  long long m, cols, entries;
  int got = sscanf(line, "%lld %lld %lld", &m, &cols, &entries);
  if (got != (coordinate ? 3 : 2)) FAIL("%s:%ld: a bad size line", path, lineno);
  if (cols != 1 || m != n)
    FAIL("%s:%ld: %lld x %lld: a %lld x 1 vector is needed", path, lineno, m, cols,
         (long long)n);
  if (!coordinate) entries = m;
  for (int64_t i = 0; i < n; i++) b[i] = 0.0;
  for (long long e = 0; e < entries; e++) {
    if (!data_line(f, line, sizeof line, &lineno)) FAIL("%s: truncated", path);
    char *end;
    long long i = e + 1, j = 1;
    errno = 0;
    if (coordinate) {
      i = strtoll(line, &end, 10);
      j = strtoll(end, &end, 10);
    } else {
      end = line;
    }
    double v = strtod(end, &end);
    while (isspace((unsigned char)*end)) end++;
    if (errno || *end || i < 1 || i > m || j != 1 || !isfinite(v))
      FAIL("%s:%ld: a bad entry", path, lineno);
    b[i - 1] += v;
  }
  if (data_line(f, line, sizeof line, &lineno)) FAIL("%s:%ld: more entries than announced", path, lineno);
  fclose(f);
  return 0;
fail:
  if (f) fclose(f);
  return -1;
}

/* jacobi::sparse::row_blocks: p contiguous blocks of about equal nonzeros, block k being rows
 * bounds[k]..bounds[k+1]; each boundary the row whose start is nearest k·nnz/p, kept strictly
 * increasing (p ≤ n). */
static void row_blocks(const int64_t *ptr, int64_t n, int p, int64_t *bounds) {
  uint64_t nnz = (uint64_t)ptr[n];
  bounds[0] = 0;
  bounds[p] = n;
  for (int k = 1; k < p; k++) {
    uint64_t ideal = (uint64_t)((unsigned __int128)nnz * (unsigned)k / (unsigned)p);
    /* partition_point: the first index of ptr[0..=n] whose start is ≥ ideal. */
    int64_t lo = 0, hi = n + 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if ((uint64_t)ptr[mid] < ideal) lo = mid + 1;
      else hi = mid;
    }
    int64_t b = lo;
    uint64_t after = (uint64_t)ptr[b < n ? b : n];
    after = after > ideal ? after - ideal : 0;
    if (b > 0 && ideal - (uint64_t)ptr[b - 1] < after) b--;
    int64_t min = bounds[k - 1] + 1, max = n - (p - k);
    bounds[k] = b < min ? min : b > max ? max : b;
  }
}

static const char *arg(int argc, char **argv, const char *name, const char *def) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return argv[i + 1];
  return def;
}

int main(int argc, char **argv) {
  /* PETSc sees no command line (ours uses `--flag value`); PETSC_OPTIONS still works. */
  int pargc = 1;
  char **pargv = argv;
  PetscCall(PetscInitialize(&pargc, &pargv, NULL, NULL));
  MPI_Comm comm = PETSC_COMM_WORLD;
  PetscMPIInt rank, size;
  PetscCallMPI(MPI_Comm_rank(comm, &rank));
  PetscCallMPI(MPI_Comm_size(comm, &size));
  int code = 1;
  Csr a = {0};
  double *rhs = NULL;
  int64_t *bounds = NULL;
  PetscInt *li = NULL, *lj = NULL;

  for (int i = 1; i < argc; i += 2) {
    const char *known[] = {"--matrix", "--rhs", "--solver", "--tol", "--max-iters", "--norm"};
    int ok = 0;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++) ok |= !strcmp(argv[i], known[k]);
    if (!ok || i + 1 >= argc) {
      snprintf(err, sizeof err, "%s `%s` (usage: --matrix A.mtx [--rhs B.mtx] --solver "
               "cg|jacobi [--tol T] [--max-iters N] [--norm natural|unpreconditioned])",
               ok ? "no value after" : "unknown argument", argv[i]);
      goto bad;
    }
  }
  const char *mpath = arg(argc, argv, "--matrix", NULL);
  const char *bpath = arg(argc, argv, "--rhs", NULL);
  const char *solver = arg(argc, argv, "--solver", "cg");
  const char *norm = arg(argc, argv, "--norm", "natural");
  char *end;
  double tol = strtod(arg(argc, argv, "--tol", "1e-8"), &end);
  if (*end || !(tol > 0 && tol < 1)) {
    snprintf(err, sizeof err, "--tol must be a number in (0, 1)");
    goto bad;
  }
  long long max_iters = strtoll(arg(argc, argv, "--max-iters", "100000"), &end, 10);
  if (*end || max_iters < 1 || max_iters > PETSC_MAX_INT) {
    snprintf(err, sizeof err, "--max-iters must be a whole number from 1");
    goto bad;
  }
  int cg = !strcmp(solver, "cg");
  if (!cg && strcmp(solver, "jacobi")) {
    snprintf(err, sizeof err, "--solver must be cg or jacobi, got `%s`", solver);
    goto bad;
  }
  int natural = !strcmp(norm, "natural");
  if (!natural && strcmp(norm, "unpreconditioned")) {
    snprintf(err, sizeof err, "--norm must be natural or unpreconditioned, got `%s`", norm);
    goto bad;
  }
  if (!cg) natural = 0; /* Richardson's norm is the unpreconditioned residual's. */
  if (!mpath) {
    snprintf(err, sizeof err, "--matrix is required");
    goto bad;
  }
  if (read_matrix(mpath, &a)) goto bad;
  if (a.n > PETSC_MAX_INT || a.ptr[a.n] > PETSC_MAX_INT) {
    snprintf(err, sizeof err, "%s: too large for PETSc's 32-bit indices", mpath);
    goto bad;
  }
  if (size > a.n) {
    snprintf(err, sizeof err, "%d ranks for %lld rows: at most one rank per row", size,
             (long long)a.n);
    goto bad;
  }
  if (bpath) {
    rhs = malloc((size_t)a.n * sizeof *rhs);
    if (!rhs) {
      snprintf(err, sizeof err, "no memory for the right-hand side");
      goto bad;
    }
    if (read_vector(bpath, a.n, rhs)) goto bad;
  }

  /* This rank's rows, set from the CSR (local row pointers, global columns). */
  bounds = malloc(((size_t)size + 1) * sizeof *bounds);
  if (!bounds) {
    snprintf(err, sizeof err, "no memory");
    goto bad;
  }
  row_blocks(a.ptr, a.n, size, bounds);
  int64_t r0 = bounds[rank], r1 = bounds[rank + 1], m = r1 - r0;
  int64_t base = a.ptr[r0], own = a.ptr[r1] - base;
  PetscCall(PetscMalloc1(m + 1, &li));
  PetscCall(PetscMalloc1(own ? own : 1, &lj));
  for (int64_t i = 0; i <= m; i++) li[i] = (PetscInt)(a.ptr[r0 + i] - base);
  for (int64_t k = 0; k < own; k++) lj[k] = (PetscInt)a.col[base + k];

  Mat A;
  Vec x, b, r;
  KSP ksp;
  PC pc;
  PetscCall(MatCreate(comm, &A));
  PetscCall(MatSetSizes(A, (PetscInt)m, (PetscInt)m, (PetscInt)a.n, (PetscInt)a.n));
  PetscCall(MatSetType(A, MATMPIAIJ));
  PetscCall(MatMPIAIJSetPreallocationCSR(A, li, lj, a.val + base));
  PetscCall(MatCreateVecs(A, &x, &b));
  PetscCall(VecDuplicate(b, &r));
  /* b = A·1 summed along each row in column order, as jacobi's Csr::mul (MatMult would sum
   * the diagonal block first, another rounding), or the file's. */
  PetscScalar *bv;
  PetscCall(VecGetArray(b, &bv));
  for (int64_t i = 0; i < m; i++) {
    double s = 0.0;
    for (int64_t k = a.ptr[r0 + i]; k < a.ptr[r0 + i + 1]; k++) s += a.val[k];
    bv[i] = rhs ? rhs[r0 + i] : s;
  }
  PetscCall(VecRestoreArray(b, &bv));
  PetscCall(VecSet(x, 0.0));

  PetscCall(KSPCreate(comm, &ksp));
  PetscCall(KSPSetOperators(ksp, A, A));
  PetscCall(KSPSetType(ksp, cg ? KSPCG : KSPRICHARDSON));
  if (!cg) PetscCall(KSPRichardsonSetScale(ksp, 1.0));
  PetscCall(KSPGetPC(ksp, &pc));
  PetscCall(PCSetType(pc, cg ? PCNONE : PCJACOBI));
  PetscCall(KSPSetNormType(ksp, natural ? KSP_NORM_NATURAL : KSP_NORM_UNPRECONDITIONED));
  PetscCall(KSPSetTolerances(ksp, tol, 0.0, PETSC_DEFAULT, (PetscInt)max_iters));
  PetscCall(KSPSetInitialGuessNonzero(ksp, PETSC_FALSE));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(KSPSetUp(ksp));

  PetscCallMPI(MPI_Barrier(comm));
  double t0 = MPI_Wtime();
  PetscCall(KSPSolve(ksp, b, x));
  double dt = MPI_Wtime() - t0, solve_s;
  PetscCallMPI(MPI_Allreduce(&dt, &solve_s, 1, MPI_DOUBLE, MPI_MAX, comm));

  PetscInt its;
  KSPConvergedReason reason;
  PetscReal bnorm, rnorm;
  PetscCall(KSPGetIterationNumber(ksp, &its));
  PetscCall(KSPGetConvergedReason(ksp, &reason));
  PetscCall(MatMult(A, x, r));
  PetscCall(VecAYPX(r, -1.0, b)); /* r = b − A x */
  PetscCall(VecNorm(r, NORM_2, &rnorm));
  PetscCall(VecNorm(b, NORM_2, &bnorm));
  double rel = bnorm > 0 ? rnorm / bnorm : 0.0;
  char blocks[256] = "", *w = blocks;
  for (int k = 0; k <= size && w < blocks + sizeof blocks - 24; k++)
    w += snprintf(w, 24, "%s%lld", k ? "," : "", (long long)bounds[k]);
  PetscCall(PetscPrintf(comm,
                        "petsc_mtx solver=%s ksp=%s pc=%s norm=%s np=%d n=%lld nnz=%lld its=%d "
                        "solve_s=%.6e s_per_iter=%.6e true_rel_res=%.3e reason=%s bounds=%s\n",
                        solver, cg ? "cg" : "richardson", cg ? "none" : "jacobi",
                        natural ? "natural" : "unpreconditioned", size, (long long)a.n,
                        (long long)a.ptr[a.n], (int)its, solve_s, its > 0 ? solve_s / its : 0.0,
                        rel, KSPConvergedReasons[reason], blocks));
  code = rel <= tol ? 0 : 2;

  PetscCall(KSPDestroy(&ksp));
  PetscCall(VecDestroy(&r));
  PetscCall(VecDestroy(&b));
  PetscCall(VecDestroy(&x));
  PetscCall(MatDestroy(&A));
  goto done;
bad:
  /* Every rank parsed the same arguments and read the same files: all fail here alike. */
  PetscCall(PetscFPrintf(comm, PETSC_STDERR, "petsc_mtx: error: %s\n", err));
done:
  PetscCall(PetscFree(li));
  PetscCall(PetscFree(lj));
  free(bounds);
  free(rhs);
  free(a.ptr);
  free(a.col);
  free(a.val);
  PetscCall(PetscFinalize());
  return code;
}
