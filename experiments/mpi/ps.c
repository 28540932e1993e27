/*
 * ps.c - time a parameter-server exchange across ranks.
 *
 * The gradient (<bytes> of floats) is sharded over the first <servers> ranks (default 1), which
 * are workers too. Each iteration every rank pushes shard j to server j (MPI_Isend), each server
 * sums the shards it receives with its own (MPI_Irecv from every other rank), and then sends the
 * sum back to every other rank, which receives each shard from its server - the parameter server
 * of zonemesh's collective model (engine/src/collective.rs).
 *
 * usage: ps <bytes> <iters> [warmup] [servers]
 *
 * Records and timing: zmlab_mpi.h. Bus bandwidth: 2 * bytes / t (a rank's push and pull).
 */
#include "zmlab_mpi.h"

int main(int argc, char **argv)
{
    int rank, size;
    struct args a = start(&argc, &argv, &rank, &size);
    int servers = a.extra > 0 ? a.extra : 1;
    if (servers > size) {
        if (rank == 0) fprintf(stderr, "%d servers for %d ranks\n", servers, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    a.extra = servers;
    long shard = a.bytes / (long)sizeof(float) / servers;
    if (shard < 1) {
        if (rank == 0) fprintf(stderr, "%ld bytes is less than a float per server\n", a.bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long count = shard * servers;
    a.bytes = count * (long)sizeof(float);
    report_ranks(rank, size, "ps", a);

    int serving = rank < servers;
    float *grad = malloc(count * sizeof(float));
    float *incoming = serving ? malloc((size_t)shard * size * sizeof(float)) : NULL;
    MPI_Request *req = malloc((size_t)2 * size * sizeof(MPI_Request));
    double *t = malloc(a.iters * sizeof(double));
    if (!grad || (serving && !incoming) || !req || !t) MPI_Abort(MPI_COMM_WORLD, 3);

    for (int i = 0; i < a.warmup + a.iters; i++) {
        for (long k = 0; k < count; k++) grad[k] = (float)(rank + 1);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        /* push: shard j to server j; a server receives every other rank's copy of its shard */
        int n = 0;
        if (serving)
            for (int r = 0; r < size; r++)
                if (r != rank)
                    MPI_Irecv(incoming + (size_t)r * shard, (int)shard, MPI_FLOAT, r, 1,
                              MPI_COMM_WORLD, &req[n++]);
        for (int j = 0; j < servers; j++)
            if (j != rank)
                MPI_Isend(grad + (size_t)j * shard, (int)shard, MPI_FLOAT, j, 1, MPI_COMM_WORLD,
                          &req[n++]);
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        if (serving) {
            float *mine = grad + (size_t)rank * shard;
            for (int r = 0; r < size; r++)
                if (r != rank)
                    for (long k = 0; k < shard; k++) mine[k] += incoming[(size_t)r * shard + k];
        }
        /* pull: a server sends its summed shard to every other rank */
        n = 0;
        for (int j = 0; j < servers; j++)
            if (j != rank)
                MPI_Irecv(grad + (size_t)j * shard, (int)shard, MPI_FLOAT, j, 2, MPI_COMM_WORLD,
                          &req[n++]);
        if (serving)
            for (int r = 0; r < size; r++)
                if (r != rank)
                    MPI_Isend(grad + (size_t)rank * shard, (int)shard, MPI_FLOAT, r, 2,
                              MPI_COMM_WORLD, &req[n++]);
        MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        report_iteration(rank, a, i, MPI_Wtime() - t0, t);
    }

    /* correctness: every element must be 1+2+...+size */
    float want = (float)size * (size + 1) / 2.0f;
    int ok = 1;
    for (long k = 0; k < count; k++)
        if (grad[k] != want) { ok = 0; break; }
    report_summary(rank, size, a, t, ok, 2.0 * (double)a.bytes);
    free(grad); free(incoming); free(req); free(t);
    MPI_Finalize();
    return 0;
}
