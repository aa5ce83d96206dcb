// cpu-runs: CPU time of commands, run interleaved, for bench/wall.sh.
//
//   cpu-runs RUNS OUT.tsv NAME 'CMD ARGS...' [NAME 'CMD ARGS...']...
//
// Runs every command RUNS times, one run of each in turn (the order reverses every other
// round, so drift in the machine's load touches every command alike), with stdout and stderr
// on /dev/null, and appends one line per run to OUT.tsv: name, CPU ms (user + system of the
// process and what it execs, from wait4: the clock perf's task-clock reads), wall ms, minor
// page faults. Arguments are split on spaces. A run that exits with a status above
// CPU_RUNS_MAX_STATUS (default 0) or dies of a signal stops everything with status 1.
//
// A NAME that ends in "@tty" runs its command on a terminal: in a new session whose
// controlling terminal is a pseudo-terminal cpu-runs made (stdout and stderr still go to
// /dev/null). landwall installs its terminal filter only when a terminal is within reach.
// A NAME that ends in "@cold" runs its command without XDG_RUNTIME_DIR, where landwall keeps
// the names of /etc's links between launches (as in a CI job, which has no login session).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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

int main(int argc, char **argv)
{
	if (argc < 5 || (argc - 3) % 2) {
		fprintf(stderr, "usage: cpu-runs RUNS OUT.tsv NAME 'CMD ARGS...' ...\n");
		return 2;
	}
	int runs = atoi(argv[1]), k = (argc - 3) / 2;
	const char *max_env = getenv("CPU_RUNS_MAX_STATUS");
	int max_status = max_env ? atoi(max_env) : 0;
	FILE *out = fopen(argv[2], "a");
	if (!out) {
		perror(argv[2]);
		return 1;
	}
	char ***cmd = calloc(k, sizeof(char **));
	for (int j = 0; j < k; j++) {
		char *s = strdup(argv[4 + 2 * j]);
		cmd[j] = calloc(strlen(s) / 2 + 2, sizeof(char *));
		int c = 0;
		for (char *save = NULL, *t = strtok_r(s, " ", &save); t; t = strtok_r(NULL, " ", &save))
			cmd[j][c++] = t;
	}
	// The terminal for "@tty" runs: each run's session takes it as its controlling terminal
	// and gives it back when its leader exits.
	int ptm = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	const char *pts = ptm >= 0 && grantpt(ptm) == 0 && unlockpt(ptm) == 0 ? ptsname(ptm) : NULL;
	char *tty = pts ? strdup(pts) : NULL;
	for (int i = 0; i < runs; i++) {
		for (int jj = 0; jj < k; jj++) {
			int j = (i % 2) ? k - 1 - jj : jj;
			double t0 = now_ms();
			pid_t pid = fork();
			if (pid == 0) {
				const char *name = argv[3 + 2 * j];
				size_t len = strlen(name);
				if (len > 4 && strcmp(name + len - 4, "@tty") == 0) {
					int t = -1;
					if (!tty || setsid() < 0 || (t = open(tty, O_RDWR)) < 0 ||
					    ioctl(t, TIOCSCTTY, 0) < 0)
						_exit(126);
					close(t);
				}
				if (len > 5 && strcmp(name + len - 5, "@cold") == 0)
					unsetenv("XDG_RUNTIME_DIR");
				int fd = open("/dev/null", O_WRONLY);
				dup2(fd, 1);
				dup2(fd, 2);
				execvp(cmd[j][0], cmd[j]);
				_exit(127);
			}
			int st;
			struct rusage ru;
			if (pid < 0 || wait4(pid, &st, 0, &ru) < 0) {
				perror("cpu-runs");
				return 1;
			}
			double wall = now_ms() - t0;
			if (!WIFEXITED(st) || WEXITSTATUS(st) > max_status) {
				fprintf(stderr, "cpu-runs: %s (%s) failed: status %d\n", argv[3 + 2 * j],
					argv[4 + 2 * j], WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
				return 1;
			}
			double cpu = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 +
				     ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
			fprintf(out, "%s\t%.4f\t%.4f\t%ld\n", argv[3 + 2 * j], cpu, wall, ru.ru_minflt);
		}
	}
	return fclose(out) ? 1 : 0;
}
