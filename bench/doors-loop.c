// doors-loop: a loop of cheap system calls, timed from inside, for bench/doors.sh.
//
//   doors-loop MODE N [allow]
//
// Makes N system calls of one kind, in 20 slices, and prints one line: MODE, N, CPU ns per
// call (the thread's CPU clock, which time spent waiting for a core on a busy machine does
// not move), wall ns per call, CPU ns per call of the fastest slice, and this process's
// seccomp mode and filter count (/proc/self/status), so that the script can check which
// runs had a filter. With `allow`, it first installs a
// seccomp filter of one instruction, "allow" (the verdict cache then skips it for every
// call): what having any filter at all costs a call, the floor under landwall's.
//
//   getppid     syscall(SYS_getppid): the cheapest call there is; the seccomp verdict cache
//               (Linux 5.11) allows it without running a filter that looks only at the number
//   ioctl       ioctl(FIONREAD) on a pipe: a filter that inspects ioctl's request runs on
//               every one
//   stat        stat() of a file in the working directory (doors-stat, created here)
//   read        read() of 1 byte from /dev/zero
//   socketpair  socketpair(AF_UNIX, SOCK_STREAM) and two close(): 3 calls per iteration, the
//               first inspected by a filter that refuses datagram pairs (N counts the calls)
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 20

static double ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "allow") != 0)) {
		fprintf(stderr, "usage: doors-loop getppid|ioctl|stat|read|socketpair N [allow]\n");
		return 2;
	}
	if (argc == 4) {
		struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {1, allow};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			die("seccomp");
	}
	const char *mode = argv[1];
	long n = atol(argv[2]);
	int fd = -1, p[2];
	char c;
	struct stat st;
	if (strcmp(mode, "ioctl") == 0) {
		if (pipe(p) < 0)
			die("pipe");
		fd = p[0];
	} else if (strcmp(mode, "read") == 0) {
		if ((fd = open("/dev/zero", O_RDONLY)) < 0)
			die("/dev/zero");
	} else if (strcmp(mode, "stat") == 0) {
		if ((fd = open("doors-stat", O_WRONLY | O_CREAT, 0644)) < 0)
			die("doors-stat");
		close(fd);
	} else if (strcmp(mode, "socketpair") == 0) {
	} else if (strcmp(mode, "getppid") != 0) {
		fprintf(stderr, "doors-loop: unknown mode %s\n", mode);
		return 2;
	}
	// BATCHES slices of the loop, each timed: the fastest slice is the one other work on
	// the machine disturbed least (cache and sibling-thread contention are not in the CPU
	// clock's favour, preemption is not in it at all).
	long per = n / BATCHES, done = 0;
	double best = 0, c0 = ns(CLOCK_THREAD_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
	for (int b = 0; b < BATCHES; b++) {
		long m = b == BATCHES - 1 ? n - done : per;
		if (mode[0] == 's' && mode[1] == 'o')
			m -= m % 3;
		double t0 = ns(CLOCK_THREAD_CPUTIME_ID);
		if (mode[0] == 'g') {
			for (long i = 0; i < m; i++)
				syscall(SYS_getppid);
		} else if (mode[0] == 'i') {
			int avail;
			for (long i = 0; i < m; i++)
				if (ioctl(fd, FIONREAD, &avail) < 0)
					die("ioctl");
		} else if (mode[0] == 's' && mode[1] == 't') {
			for (long i = 0; i < m; i++)
				if (stat("doors-stat", &st) < 0)
					die("stat");
		} else if (mode[0] == 'r') {
			for (long i = 0; i < m; i++)
				if (read(fd, &c, 1) != 1)
					die("read");
		} else {
			int sp[2];
			for (long i = 0; i < m; i += 3) {
				if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
					die("socketpair");
				close(sp[0]);
				close(sp[1]);
			}
		}
		double t = (ns(CLOCK_THREAD_CPUTIME_ID) - t0) / m;
		if (b == 0 || t < best)
			best = t;
		done += m;
	}
	n = done;
	double cpu = ns(CLOCK_THREAD_CPUTIME_ID) - c0, wall = ns(CLOCK_MONOTONIC) - w0;
	int mode_sc = -1, filters = 0;
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof line, f)) {
		sscanf(line, "Seccomp: %d", &mode_sc);
		sscanf(line, "Seccomp_filters: %d", &filters);
	}
	printf("%s\t%ld\t%.2f\t%.2f\t%.2f\t%d\t%d\n", mode, n, cpu / n, wall / n, best, mode_sc,
	       filters);
	return 0;
}
