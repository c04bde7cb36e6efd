/* One-way time of an MPI_Send/MPI_Recv ping-pong between ranks 0 and 1, for 8 B, 3,200 B
 * (a face of a 20^3 block) and 1 MiB: the figures scale/platforms/here.xml is calibrated
 * with. `scripts/scale --calibrate` builds and runs it under mpirun -np 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  static char buf[1 << 22];
  int sizes[] = {8, 3200, 1 << 20};
  for (int s = 0; s < 3; s++) {
    int n = sizes[s], reps = n > 100000 ? 200 : 20000;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; i++) {
      if (rank == 0) { MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD); MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
      else { MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD); }
    }
    double t = (MPI_Wtime() - t0) / reps / 2;
    if (rank == 0) printf("bytes %d one-way %.3f us  %.2f GB/s\n", n, t * 1e6, n / t / 1e9);
  }
  MPI_Finalize();
  return 0;
}
