/*
 * peak_rss.c — run a command and write down its peak resident memory, for
 * test_replay_memory.py.
 *
 * usage: peak_rss OUTFILE AS_LIMIT_BYTES CMD [ARGS...]
 *
 * The one idea: a process's peak RSS (ru_maxrss) counts what it held before
 * it called exec, so a command started from Python would show Python's own
 * ten-odd MB. Started from this small program instead, its peak is its own.
 * AS_LIMIT_BYTES (0: none) caps the command's address space (RLIMIT_AS), so
 * that a command that would take more fails at once instead of filling the
 * machine. OUTFILE gets "<exit status> <peak RSS in KiB>"; the exit status
 * is the command's (128 + the signal when it was killed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: peak_rss OUTFILE AS_LIMIT_BYTES CMD [ARGS...]\n");
        return 2;
    }
    unsigned long long limit = strtoull(argv[2], NULL, 10);
    pid_t pid = fork();
    if (pid < 0) {
        perror("peak_rss: fork");
        return 1;
    }
    if (pid == 0) {
        if (limit) {
            struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
            if (setrlimit(RLIMIT_AS, &rl) != 0) {
                perror("peak_rss: setrlimit");
                _exit(126);
            }
        }
        execvp(argv[3], argv + 3);
        perror("peak_rss: exec");
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("peak_rss: wait4");
        return 1;
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "%d %ld\n", rc, ru.ru_maxrss) < 0 || fclose(f) != 0) {
        perror("peak_rss: writing the result");
        return 1;
    }
    return rc;
}
