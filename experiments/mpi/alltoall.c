/*
 * alltoall.c - time MPI_Alltoall(MPI_FLOAT) across ranks.
 *
 * Every rank sends <bytes> per iteration: bytes / (p - 1) to each other rank (and a block of the
 * same size to itself, which stays in memory) - the all-to-all of zonemesh's collective model
 * (engine/src/collective.rs), which experiments/src/mpi.rs runs with Open MPI's pairwise
 * exchange.
 *
 * usage: alltoall <bytes> <iters> [warmup]
 *
 * Records and timing: zmlab_mpi.h. Bus bandwidth: the bytes a rank sends / t.
 */
#include "zmlab_mpi.h"

int main(int argc, char **argv)
{
    int rank, size;
    struct args a = start(&argc, &argv, &rank, &size);
    long block = a.bytes / (long)sizeof(float) / (size > 1 ? size - 1 : 1);
    if (block < 1) {
        if (rank == 0) fprintf(stderr, "%ld bytes is less than a float per rank\n", a.bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    a.bytes = block * (long)sizeof(float) * (size > 1 ? size - 1 : 1);
    report_ranks(rank, size, "alltoall", a);

    float *sbuf = malloc(block * size * sizeof(float));
    float *rbuf = malloc(block * size * sizeof(float));
    double *t = malloc(a.iters * sizeof(double));
    if (!sbuf || !rbuf || !t) MPI_Abort(MPI_COMM_WORLD, 3);
    /* block j goes to rank j: every element says who sent it to whom */
    for (int j = 0; j < size; j++)
        for (long k = 0; k < block; k++) sbuf[j * block + k] = (float)(rank * size + j);

    for (int i = 0; i < a.warmup + a.iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Alltoall(sbuf, (int)block, MPI_FLOAT, rbuf, (int)block, MPI_FLOAT, MPI_COMM_WORLD);
        report_iteration(rank, a, i, MPI_Wtime() - t0, t);
    }

    /* correctness: block i came from rank i, addressed to this rank */
    int ok = 1;
    for (int i = 0; i < size && ok; i++)
        for (long k = 0; k < block; k++)
            if (rbuf[i * block + k] != (float)(i * size + rank)) { ok = 0; break; }
    report_summary(rank, size, a, t, ok, (double)a.bytes);
    free(sbuf); free(rbuf); free(t);
    MPI_Finalize();
    return 0;
}
