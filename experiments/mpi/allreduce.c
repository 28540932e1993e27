/*
 * allreduce.c - time MPI_Allreduce(SUM, MPI_FLOAT) across ranks.
 *
 * The all-reduce of the zonemesh lab's evaluation (lab/src/mpi.rs compiles it with mpicc at run
 * time and runs it under mpirun, one rank per lab node namespace).
 *
 * usage: allreduce <bytes> <iters> [warmup]
 *
 * Output (rank 0 only, stdout, one record per line, all JSON):
 *   {"type":"rank", "rank":R, "size":N, "host":"...", "ifaddrs":"eth0=10.77.z.x[,...]", "pid":P}
 *   {"type":"config", ...}
 *   {"type":"iter", "i":I, "seconds":S}          (one per timed iteration)
 *   {"type":"summary", "median":S, "min":S, "max":S, "mean":S, "busbw_gbps":G, "check":"ok"|"FAIL"}
 *
 * Each rank reports its own host name and the IPv4 addresses it sees
 * (getifaddrs), which proves which network namespace it runs in: every
 * namespace has its own eth0 address (the host name is only what the
 * launcher's UTS namespace says).
 *
 * Each iteration: MPI_Barrier, then MPI_Allreduce timed with MPI_Wtime; the
 * time reported is the slowest rank's (MPI_Reduce MAX).
 */
#include <mpi.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INFO_LEN 512

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* "eth0=10.88.0.11,..." for every non-loopback IPv4 interface that is up */
static void my_addrs(char *out, size_t len)
{
    struct ifaddrs *ifa, *p;
    out[0] = '\0';
    if (getifaddrs(&ifa) != 0) {
        snprintf(out, len, "getifaddrs-failed");
        return;
    }
    for (p = ifa; p; p = p->ifa_next) {
        char buf[INET_ADDRSTRLEN];
        if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET) continue;
        if (p->ifa_flags & IFF_LOOPBACK) continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, buf, sizeof buf);
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s=%s", used ? "," : "", p->ifa_name, buf);
    }
    freeifaddrs(ifa);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s <bytes> <iters> [warmup]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long bytes = atol(argv[1]);
    int iters = atoi(argv[2]);
    int warmup = argc > 3 ? atoi(argv[3]) : 3;
    long count = bytes / (long)sizeof(float);
    if (count < 1 || iters < 1 || warmup < 0) {
        if (rank == 0) fprintf(stderr, "bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* --- rank -> host/namespace mapping, gathered to rank 0 --- */
    char info[INFO_LEN], host[128], addrs[300];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    my_addrs(addrs, sizeof addrs);
    snprintf(info, sizeof info,
             "{\"type\":\"rank\",\"rank\":%d,\"size\":%d,\"host\":\"%s\",\"ifaddrs\":\"%s\",\"pid\":%d}",
             rank, size, host, addrs, (int)getpid());
    char *all = NULL;
    if (rank == 0) all = malloc((size_t)INFO_LEN * size);
    MPI_Gather(info, INFO_LEN, MPI_CHAR, all, INFO_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++) printf("%s\n", all + (size_t)r * INFO_LEN);
        printf("{\"type\":\"config\",\"bytes\":%ld,\"floats\":%ld,\"iters\":%d,\"warmup\":%d,\"ranks\":%d}\n",
               count * (long)sizeof(float), count, iters, warmup, size);
        fflush(stdout);
        free(all);
    }

    float *sbuf = malloc(count * sizeof(float));
    float *rbuf = malloc(count * sizeof(float));
    double *t = malloc(iters * sizeof(double));
    if (!sbuf || !rbuf || !t) MPI_Abort(MPI_COMM_WORLD, 3);
    for (long k = 0; k < count; k++) sbuf[k] = (float)(rank + 1);

    for (int i = 0; i < warmup + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        /* report the slowest rank's time: the collective is done when all are */
        double dtmax;
        MPI_Reduce(&dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (i >= warmup) {
            t[i - warmup] = dtmax;
            if (rank == 0) {
                printf("{\"type\":\"iter\",\"i\":%d,\"seconds\":%.6f}\n", i - warmup, dtmax);
                fflush(stdout);
            }
        }
    }

    /* correctness: every element must be 1+2+...+size */
    float want = (float)size * (size + 1) / 2.0f;
    int ok = 1;
    for (long k = 0; k < count; k++)
        if (rbuf[k] != want) { ok = 0; break; }
    int all_ok;
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        double sum = 0;
        for (int i = 0; i < iters; i++) sum += t[i];
        qsort(t, iters, sizeof(double), cmp_double);
        double med = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
        /* bus bandwidth as nccl-tests defines it for allreduce: 2(n-1)/n * bytes / t */
        double busbw = 2.0 * (size - 1) / size * (double)(count * sizeof(float)) / med / 1e9 * 8;
        printf("{\"type\":\"summary\",\"bytes\":%ld,\"ranks\":%d,\"median\":%.6f,\"min\":%.6f,\"max\":%.6f,"
               "\"mean\":%.6f,\"busbw_gbps\":%.4f,\"check\":\"%s\"}\n",
               count * (long)sizeof(float), size, med, t[0], t[iters - 1], sum / iters, busbw,
               all_ok ? "ok" : "FAIL");
        fflush(stdout);
    }
    free(sbuf); free(rbuf); free(t);
    MPI_Finalize();
    return 0;
}
