# Sourced by scripts/run and scripts/test, and by users before launching aiac under mpirun or
# oshrun by hand: `source scripts/mpi-env.sh`. Values already set by the user are kept.
# - Open MPI refuses to start as root (containers, CI) without the two ALLOW variables.
# - Open MPI refuses more ranks than cores without --oversubscribe; this is that flag as an
#   MCA parameter. Ranks up to the number of cores keep Open MPI's binding (one per core).
# - Open MPI 4.1's OpenSHMEM crashes in finalize with its default one-sided components; with
#   the list `sm,ucx` it does not. Of those two, MPI windows take sm when every rank is on one
#   node (atomics in tens of nanoseconds) and ucx otherwise (ucx alone costs microseconds per
#   atomic even on one node: docs/performance.md, "One-sided windows"). aiac also sets it in
#   its own environment before initialising SHMEM when unset.
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-1}"
export OMPI_MCA_osc="${OMPI_MCA_osc:-sm,ucx}"
