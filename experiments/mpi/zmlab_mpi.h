/*
 * zmlab_mpi.h - what the zonemesh lab's MPI programs share: their arguments, the proof of where
 * every rank runs, and the records they print (experiments/src/mpi.rs reads them).
 *
 * usage: <program> <bytes> <iters> [warmup] [extra]
 *
 * Output (rank 0 only, stdout, one record per line, all JSON):
 *   {"type":"rank", "rank":R, "size":N, "host":"...", "ifaddrs":"eth0=10.77.z.x[,...]", "pid":P}
 *   {"type":"config", ...}
 *   {"type":"iter", "i":I, "seconds":S}          (one per timed iteration)
 *   {"type":"summary", "median":S, "min":S, "max":S, "mean":S, "busbw_gbps":G, "check":"ok"|"FAIL"}
 *
 * Each rank reports its own host name and the IPv4 addresses it sees (getifaddrs), which proves
 * which network namespace it runs in: every namespace has its own eth0 address (the host name is
 * only what the launcher's UTS namespace says).
 *
 * Each iteration: MPI_Barrier, then the collective timed with MPI_Wtime; the time reported is
 * the slowest rank's (MPI_Reduce MAX).
 */
#ifndef ZMLAB_MPI_H
#define ZMLAB_MPI_H

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

/* What every program is given. */
struct args {
    long bytes;
    int iters;
    int warmup;
    int extra; /* a program's own fifth argument (ps: servers), 0 when absent */
};

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

/* The arguments, or an abort naming what is wrong. */
static struct args parse_args(int argc, char **argv, int rank)
{
    struct args a = {0, 0, 3, 0};
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: %s <bytes> <iters> [warmup] [extra]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    a.bytes = atol(argv[1]);
    a.iters = atoi(argv[2]);
    if (argc > 3) a.warmup = atoi(argv[3]);
    if (argc > 4) a.extra = atoi(argv[4]);
    if (a.bytes < (long)sizeof(float) || a.iters < 1 || a.warmup < 0 || a.extra < 0) {
        if (rank == 0) fprintf(stderr, "bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return a;
}

/* MPI_Init, this rank and the communicator's size, and the arguments. */
static struct args start(int *argc, char ***argv, int *rank, int *size)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return parse_args(*argc, *argv, *rank);
}

/* Gathers every rank's host and addresses to rank 0, which prints them and the config line. */
static void report_ranks(int rank, int size, const char *program, struct args a)
{
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
        printf("{\"type\":\"config\",\"program\":\"%s\",\"bytes\":%ld,\"iters\":%d,\"warmup\":%d,"
               "\"extra\":%d,\"ranks\":%d}\n",
               program, a.bytes, a.iters, a.warmup, a.extra, size);
        fflush(stdout);
        free(all);
    }
}

/* Keeps iteration i's time (the slowest rank's) when it is a timed one, and prints it. */
static void report_iteration(int rank, struct args a, int i, double dt, double *t)
{
    double dtmax;
    MPI_Reduce(&dt, &dtmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (i >= a.warmup) {
        t[i - a.warmup] = dtmax;
        if (rank == 0) {
            printf("{\"type\":\"iter\",\"i\":%d,\"seconds\":%.6f}\n", i - a.warmup, dtmax);
            fflush(stdout);
        }
    }
}

/* The summary line: `ok` is this rank's check, `bus_bytes` the bytes per iteration that the
 * bus bandwidth counts. */
static void report_summary(int rank, int size, struct args a, double *t, int ok, double bus_bytes)
{
    int all_ok;
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    if (rank != 0) return;
    int n = a.iters;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    qsort(t, n, sizeof(double), cmp_double);
    double med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    printf("{\"type\":\"summary\",\"bytes\":%ld,\"ranks\":%d,\"median\":%.6f,\"min\":%.6f,\"max\":%.6f,"
           "\"mean\":%.6f,\"busbw_gbps\":%.4f,\"check\":\"%s\"}\n",
           a.bytes, size, med, t[0], t[n - 1], sum / n, bus_bytes / med / 1e9 * 8,
           all_ok ? "ok" : "FAIL");
    fflush(stdout);
}

#endif
