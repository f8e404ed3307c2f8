/* mpi_allreduce.c - Open MPI's MPI_Allreduce measured the way `ringside bench` measures its back ends */
/* Build: mpicc -O2 -rdynamic -o build/mpi_allreduce experiments/benchmarks/mpi_allreduce.c -ldl
 * Run:   mpirun -np N build/mpi_allreduce [minbytes maxbytes factor warmup iters]
 * Per size: in-place sum of floats; a barrier before each iteration; time = the median of each
 * rank's timed iterations, then the maximum over ranks (as ringside bench); busbw = algbw x 2(N-1)/N.
 *
 * Ranks in other network namespaces (ring_vs_mpi.sh's netns case: each rank started inside its
 * namespace "host"): Open MPI's ranks reach mpirun's PMIx server over loopback TCP, which a
 * network namespace does not share. With MPI_ALLREDUCE_ROOT_NETNS set to a namespace file (e.g.
 * /proc/PID/ns/net of a process on mpirun's side), connect() to 127.0.0.1 is made from a socket
 * of that namespace (this program's connect, exported by -rdynamic, stands in for libc's);
 * everything else, the MPI traffic between ranks included, stays in the rank's namespace. Needs
 * CAP_SYS_ADMIN (setns). */
#define _GNU_SOURCE /* setns, RTLD_NEXT */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* connect(2), with loopback IPv4 reached from MPI_ALLREDUCE_ROOT_NETNS's namespace when set. */
int connect(int fd, const struct sockaddr *sa, socklen_t len) {
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    const char *root = getenv("MPI_ALLREDUCE_ROOT_NETNS");
    if (root && *root && sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in) &&
        ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_LOOPBACK)) {
        int type = 0, fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
        socklen_t tl = sizeof type;
        int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), there = open(root, O_RDONLY | O_CLOEXEC);
        if (self >= 0 && there >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && setns(there, CLONE_NEWNET) == 0) {
            int s = socket(AF_INET, type, 0);
            setns(self, CLONE_NEWNET);
            if (s >= 0) {
                dup2(s, fd);
                close(s);
                fcntl(fd, F_SETFL, fl);
                fcntl(fd, F_SETFD, fdfl);
            }
        }
        if (self >= 0) close(self);
        if (there >= 0) close(there);
    }
    return real(fd, sa, len);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t minb = argc > 1 ? strtoull(argv[1], NULL, 10) : 65536;
    size_t maxb = argc > 2 ? strtoull(argv[2], NULL, 10) : 64u << 20;
    int factor = argc > 3 ? atoi(argv[3]) : 2, warm = argc > 4 ? atoi(argv[4]) : 5, iters = argc > 5 ? atoi(argv[5]) : 20;
    float *buf = malloc(maxb);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!buf || !t || factor < 2 || iters < 1) MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0) {
        printf("# MPI_Allreduce (Open MPI), %d ranks, in place, float sum\n", n);
        printf("# %12s %12s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    double sum_bus = 0;
    int rows = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        size_t count = bytes / sizeof(float);
        long long wrong = 0;
        for (int it = 0; it < warm + iters; it++) {
            for (size_t i = 0; i < count; i++) buf[i] = (float)((int)((i * 7 + (size_t)rank * 13) % 17) - 8);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double dt = MPI_Wtime() - t0;
            if (it >= warm) {
                t[it - warm] = dt;
                for (size_t i = 0; i < count; i++) {
                    float want = 0;
                    for (int r = 0; r < n; r++) want += (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
                    wrong += buf[i] != want;
                }
            }
        }
        qsort(t, (size_t)iters, sizeof *t, cmp);
        double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]), worst;
        long long all_wrong;
        MPI_Reduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double alg = bytes / worst / 1e9, bus = alg * 2.0 * (n - 1) / n;
            printf("  %12zu %12zu %6s %12.1f %12.3f %12.3f %8lld\n", bytes, count, "float", worst * 1e6, alg, bus, all_wrong);
            sum_bus += bus;
            rows++;
        }
    }
    if (rank == 0) printf("# Avg bus bandwidth    : %.3f\n", rows ? sum_bus / rows : 0.0);
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
}
