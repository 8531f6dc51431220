/* The floor of a metadata benchmark: the system calls storlab meta and mdtest make per file, and
 * nothing else (no timing per call, no names kept, no statistics), from RANKS forked processes in
 * one shared directory, as mdtest's ranks. No tool that makes the same calls can beat its rates by
 * more than the host's noise, so floor/mdtest bounds the ratio any tool can reach over mdtest.
 *
 *   meta_floor DIR FILES_PER_RANK RANKS [FILE_SIZE]
 *
 * Phases, each between barriers of all ranks: create (openat O_CREAT|O_EXCL|O_WRONLY, FILE_SIZE
 * bytes written, close), stat (fstatat), read (openat O_RDONLY, FILE_SIZE bytes read, close) and
 * remove (unlinkat). A phase's rate is the files of all ranks over the time from the first rank's
 * start to the last rank's end. Prints one JSON object: {"create": files/s, ...}. DIR is made and
 * removed; it must not exist. Built and run by vs_mdtest.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { CREATE, STAT, READ, REMOVE, PHASES };
static const char *phase_name[PHASES] = {"create", "stat", "read", "remove"};

struct shared {               /* one page shared by the ranks */
    int arrived[PHASES];      /* ranks at each phase's starting barrier */
    int failed;
    double rank_start[64][PHASES];   /* each rank's start and end of each phase */
    double rank_end[64][PHASES];
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void barrier(struct shared *sh, int phase, int ranks) {
    __atomic_add_fetch(&sh->arrived[phase], 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&sh->arrived[phase], __ATOMIC_SEQ_CST) < ranks)
        sched_yield();   /* more ranks than CPUs: let the others arrive */
}

static int fail(struct shared *sh, const char *what, const char *name) {
    fprintf(stderr, "meta_floor: %s %s: %s\n", what, name, strerror(errno));
    __atomic_store_n(&sh->failed, 1, __ATOMIC_SEQ_CST);
    return 1;
}

static int rank_main(struct shared *sh, int dir, int rank, int ranks, long files, size_t size, char *buf) {
    char name[64];
    struct stat st;
    for (int phase = 0; phase < PHASES; phase++) {
        barrier(sh, phase, ranks);
        sh->rank_start[rank][phase] = now();
        for (long i = 0; i < files; i++) {
            snprintf(name, sizeof name, "file.floor.%d.%ld", rank, i);
            if (phase == CREATE) {
                int fd = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
                if (fd < 0 || (size && write(fd, buf, size) != (ssize_t)size) || close(fd) != 0)
                    return fail(sh, "create", name);
            } else if (phase == STAT) {
                if (fstatat(dir, name, &st, 0) != 0)
                    return fail(sh, "stat", name);
            } else if (phase == READ) {
                int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || (size && read(fd, buf, size) != (ssize_t)size) || close(fd) != 0)
                    return fail(sh, "read", name);
            } else if (unlinkat(dir, name, 0) != 0) {
                return fail(sh, "remove", name);
            }
        }
        sh->rank_end[rank][phase] = now();
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: meta_floor DIR FILES_PER_RANK RANKS [FILE_SIZE]\n");
        return 2;
    }
    const char *path = argv[1];
    long files = atol(argv[2]);
    int ranks = atoi(argv[3]);
    size_t size = argc == 5 ? (size_t)atol(argv[4]) : 0;
    if (files < 1 || ranks < 1 || ranks > 64) {
        fprintf(stderr, "meta_floor: FILES_PER_RANK must be >= 1 and RANKS 1 to 64\n");
        return 2;
    }
    if (mkdir(path, 0755) != 0) {
        fprintf(stderr, "meta_floor: mkdir %s: %s\n", path, strerror(errno));
        return 1;
    }
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *buf = calloc(1, size ? size : 1);
    if (sh == MAP_FAILED || !buf) {
        perror("meta_floor: memory");
        return 1;
    }
    for (int rank = 0; rank < ranks; rank++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("meta_floor: fork");
            return 1;
        }
        if (pid == 0) {
            int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            _exit(dir < 0 ? fail(sh, "open", path) : rank_main(sh, dir, rank, ranks, files, size, buf));
        }
    }
    int bad = 0, status;
    while (wait(&status) > 0)
        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    rmdir(path);
    if (bad || sh->failed)
        return 1;
    printf("{");
    for (int phase = 0; phase < PHASES; phase++) {
        double first = sh->rank_start[0][phase], last = sh->rank_end[0][phase];
        for (int r = 1; r < ranks; r++) {
            if (sh->rank_start[r][phase] < first) first = sh->rank_start[r][phase];
            if (sh->rank_end[r][phase] > last) last = sh->rank_end[r][phase];
        }
        printf("%s\"%s\": %.1f", phase ? ", " : "", phase_name[phase], files * ranks / (last - first));
    }
    printf("}\n");
    return 0;
}
