/* start_probe: runs a program and reports its own peak resident memory, as the kernel counts
 * it for the program's address space (VmHWM), read at the moment the program exits.
 *
 * Why not wait4's ru_maxrss: the child of a fork or posix_spawn inherits the high-water mark of
 * the address space it replaced at exec (the parent's, a whole Python interpreter for
 * bench/start_ratios.py), so a 1 MiB /bin/true reads as 12 MiB. Here the child is traced
 * (PTRACE_O_TRACEEXIT): it stops on its way out with its address space still whole, and
 * /proc/PID/status gives the figure of the program alone.
 *
 * usage: start_probe PROGRAM [ARG...]
 * prints one line: "hwm_kib=N status=S" (S: the exit status, or 128+signal), exit status 0, or
 * 2 with a message on stderr when the probe itself fails. The environment is passed on as is
 * (LD_PRELOAD included: the probe is a plain C program, so run it without a preload and give
 * the allocator to the child with `env LD_PRELOAD=... PROGRAM`, or preload the probe too: its
 * own memory is not counted either way). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static long read_hwm_kib(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: start_probe PROGRAM [ARG...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("start_probe: fork");
        return 2;
    }
    if (pid == 0) {
        /* Stopped until the parent has set its options; the exec then stops with SIGTRAP. */
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(126);
        raise(SIGSTOP);
        execvp(argv[1], argv + 1);
        fprintf(stderr, "start_probe: cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    int st;
    long hwm = -1;
    if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) {
        fprintf(stderr, "start_probe: the child did not stop (ptrace not allowed?)\n");
        return 2;
    }
    if (ptrace(PTRACE_SETOPTIONS, pid, NULL,
               (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC)) != 0) {
        perror("start_probe: PTRACE_SETOPTIONS");
        return 2;
    }
    int deliver = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)deliver) != 0) {
            perror("start_probe: PTRACE_CONT");
            return 2;
        }
        deliver = 0;
        if (waitpid(pid, &st, 0) != pid) {
            perror("start_probe: waitpid");
            return 2;
        }
        if (WIFEXITED(st) || WIFSIGNALED(st)) break;
        if (!WIFSTOPPED(st)) continue;
        const int event = (st >> 16) & 0xff;
        if (event == PTRACE_EVENT_EXIT) {
            hwm = read_hwm_kib(pid);
        } else if (event == 0 && WSTOPSIG(st) != SIGTRAP) {
            deliver = WSTOPSIG(st); /* the program's own signals go on to it */
        }
    }
    const int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (hwm < 0) {
        fprintf(stderr, "start_probe: no VmHWM read at the exit of %s\n", argv[1]);
        return 2;
    }
    printf("hwm_kib=%ld status=%d\n", hwm, status);
    return 0;
}
