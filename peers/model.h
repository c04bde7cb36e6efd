/*
 * model.h: where the C peers' computation could be modelled instead of measured.
 *
 * Every compute section of the peers (a sweep, the copy u = u_new, packing a face into a
 * message, unpacking one into the halo) is written as
 *
 *     MODELLED(MODEL_SWEEP, points, statement);
 *
 * with the amount of work it does (grid points swept, values copied). By default the macro
 * just runs the statement, so the programs measure their real computation. A build that
 * simulates the machine (SimGrid's SMPI, scripts/scale) can define MODELLED before this
 * header, e.g. to charge a simulated time per point for each kind of section, exactly as
 * aiac's `--compute` settings charge its own sweeps and copies.
 */
#ifndef PEERS_MODEL_H
#define PEERS_MODEL_H

/* The kinds of compute section. */
enum model_kind {
    MODEL_SWEEP,  /* one Jacobi sweep (and its residual) over `points` grid points */
    MODEL_COPY,   /* u = u_new over `points` values (the programs run without --swap) */
    MODEL_PACK,   /* `points` halo values gathered into a message */
    MODEL_UNPACK, /* `points` values of a message written into the halo */
};

#ifndef MODELLED
/* No model: run the section. The statement may contain commas (it is the variadic part). */
#define MODELLED(kind, points, ...)                                                            \
    do {                                                                                       \
        (void)(kind);                                                                          \
        (void)(points);                                                                        \
        __VA_ARGS__;                                                                           \
    } while (0)
#endif

#endif
