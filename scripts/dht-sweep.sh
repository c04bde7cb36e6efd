#!/usr/bin/env bash
# Maynard's hash table benchmark: `aiac dht` under mpirun (MPI RMA) and oshrun (OpenSHMEM) at
# each rank count, one JSON per run, then one table and the scaling plot.
#
#   scripts/dht-sweep.sh OUTDIR [RANKS] [VOLUMES] [BACKENDS] [INSERTS]
#
# RANKS (default "1 2 4 8"); VOLUMES (default 10000,20000,40000,80000,160000) objects per rank
# (weak scaling, the plot OUTDIR/dht-weak), or total:N[,M...] objects in all (strong scaling,
# OUTDIR/dht-strong); BACKENDS (default "shmem mpi:sm mpi:ucx"; mpi:X runs MPI with
# OMPI_MCA_osc=X); INSERTS (default cas; cas,lock runs both). Each job has a 600 s limit, and
# stops with the script (SIGINT, SIGTERM, SIGHUP, or the script killed: scripts/bounded.sh).
set -u
out=${1:?usage: scripts/dht-sweep.sh OUTDIR [RANKS] [VOLUMES] [BACKENDS] [INSERTS]}
ranks=${2:-1 2 4 8}
volumes=${3:-10000,20000,40000,80000,160000}
backends=${4:-shmem mpi:sm mpi:ucx}
inserts=${5:-cas}
here=$(cd "$(dirname "$0")/.." && pwd)
aiac=${AIAC:-$here/target/release/aiac}
# shellcheck source=scripts/mpi-env.sh
source "$here/scripts/mpi-env.sh"
# shellcheck source=scripts/bounded.sh
source "$here/scripts/bounded.sh"
case $volumes in
  total:*) volume=(--total "${volumes#total:}"); plot=dht-strong ;;
  *) volume=(--local-volume "$volumes"); plot=dht-weak ;;
esac
mkdir -p "$out"
status=0
for b in $backends; do
  for n in $ranks; do
    case $b in
      shmem) name=shmem; cmd=(oshrun --oversubscribe -np "$n" "$aiac" dht --backend shmem) ;;
      mpi:*) osc=${b#mpi:}; name=mpi-$osc
             cmd=(env OMPI_MCA_osc="$osc" mpirun --oversubscribe -np "$n" "$aiac" dht --backend mpi) ;;
      *) echo "unknown backend $b" >&2; exit 1 ;;
    esac
    echo "== $name, $n ranks, ${volume[*]}, --insert $inserts ($(uptime | sed 's/.*load/load/'))"
    if ! bounded 600 "${cmd[@]}" "${volume[@]}" --insert "$inserts" \
        --json "$out/$name-$n.json"; then
      echo "   $name at $n ranks failed or timed out" >&2
      status=1
    fi
  done
done
"$aiac" dht --from "$out"/*.json --plot "$out/$plot" || status=1
exit $status
