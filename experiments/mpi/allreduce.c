/*
 * allreduce.c - time MPI_Allreduce(SUM, MPI_FLOAT) across ranks.
 *
 * The all-reduce of the zonemesh lab's evaluation (experiments/src/mpi.rs compiles it with mpicc
 * at run time and runs it under mpirun, one rank per lab node namespace).
 *
 * usage: allreduce <bytes> <iters> [warmup]
 *
 * Records and timing: zmlab_mpi.h. Bus bandwidth as nccl-tests defines it for all-reduce:
 * 2(n-1)/n * bytes / t.
 */
#include "zmlab_mpi.h"

int main(int argc, char **argv)
{
    int rank, size;
    struct args a = start(&argc, &argv, &rank, &size);
    long count = a.bytes / (long)sizeof(float);
    a.bytes = count * (long)sizeof(float);
    report_ranks(rank, size, "allreduce", a);

    float *sbuf = malloc(count * sizeof(float));
    float *rbuf = malloc(count * sizeof(float));
    double *t = malloc(a.iters * sizeof(double));
    if (!sbuf || !rbuf || !t) MPI_Abort(MPI_COMM_WORLD, 3);
    for (long k = 0; k < count; k++) sbuf[k] = (float)(rank + 1);

    for (int i = 0; i < a.warmup + a.iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        report_iteration(rank, a, i, MPI_Wtime() - t0, t);
    }

    /* correctness: every element must be 1+2+...+size */
    float want = (float)size * (size + 1) / 2.0f;
    int ok = 1;
    for (long k = 0; k < count; k++)
        if (rbuf[k] != want) { ok = 0; break; }
    report_summary(rank, size, a, t, ok, 2.0 * (size - 1) / size * (double)a.bytes);
    free(sbuf); free(rbuf); free(t);
    MPI_Finalize();
    return 0;
}
