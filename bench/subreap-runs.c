// subreap-runs: launches, interleaved, with everything they leave behind counted, for
// bench/linked.sh.
//
//   subreap-runs RUNS OUT.tsv NAME DIR 'CMD ARGS...' [NAME DIR 'CMD ARGS...']...
//
// Each command runs RUNS times, one run of each in turn (the order reverses every other
// round), in DIR, with stdout and stderr on /dev/null. This process is a child subreaper,
// so a process a launch detaches (landwall's quarantine watcher) is reparented here and
// waited for too. One line per run is appended to OUT.tsv: name, CPU ms of the launch and
// of every process it left behind (user + system, from RUSAGE_CHILDREN), wall ms until the
// launched process exited (what a shell waits for), wall ms until the last of them exited.
// A run that exits non-zero or dies of a signal stops everything with status 1.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
	struct rusage r;
	getrusage(RUSAGE_CHILDREN, &r);
	return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
	       (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static char **split(const char *cmd)
{
	char *copy = strdup(cmd);
	char **argv = calloc(strlen(cmd) + 2, sizeof(char *));
	int n = 0;
	for (char *t = strtok(copy, " "); t; t = strtok(NULL, " "))
		argv[n++] = t;
	return argv;
}

int main(int argc, char **argv)
{
	if (argc < 6 || (argc - 3) % 3 != 0) {
		fprintf(stderr, "usage: subreap-runs RUNS OUT.tsv NAME DIR 'CMD' [NAME DIR 'CMD']...\n");
		return 2;
	}
	int runs = atoi(argv[1]);
	FILE *out = fopen(argv[2], "a");
	if (!out || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		perror("subreap-runs");
		return 1;
	}
	int n = (argc - 3) / 3;
	for (int round = 0; round < runs; round++) {
		for (int k = 0; k < n; k++) {
			int i = round % 2 ? n - 1 - k : k;
			char *name = argv[3 + 3 * i], *dir = argv[4 + 3 * i];
			char **cmd = split(argv[5 + 3 * i]);
			double c0 = cpu_ms(), t0 = now_ms();
			pid_t pid = fork();
			if (pid == 0) {
				int null = open("/dev/null", O_RDWR);
				if (null < 0 || chdir(dir) != 0)
					_exit(126);
				dup2(null, 0);
				dup2(null, 1);
				dup2(null, 2);
				execvp(cmd[0], cmd);
				_exit(127);
			}
			int status;
			if (pid < 0 || waitpid(pid, &status, 0) != pid) {
				perror("subreap-runs: wait");
				return 1;
			}
			double t_exit = now_ms();
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "subreap-runs: %s failed (status %d)\n", name, status);
				return 1;
			}
			while (wait(NULL) > 0 || errno == EINTR)
				;
			double t_all = now_ms();
			fprintf(out, "%s\t%.4f\t%.4f\t%.4f\n", name, cpu_ms() - c0, t_exit - t0, t_all - t0);
		}
	}
	fclose(out);
	return 0;
}
