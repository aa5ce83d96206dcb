// A minimal Landlock sandboxer: one layer, the paths given, then exec. The baseline the
// benchmark compares landwall with ("a single minimal Landlock layer with equivalent paths").
//
// Same interface as the kernel's samples/landlock/sandboxer (written afresh here, since the
// kernel source is not at hand):
//
//   LL_FS_RO=/usr:/etc LL_FS_RW=/tmp:/home/me minimal-sandboxer CMD [ARGS...]
//   minimal-sandboxer --abi      (prints the kernel's Landlock ABI)
//
// Every filesystem right of the running kernel's ABI (up to IOCTL_DEV, ABI 5) is handled;
// LL_FS_RO paths get read, read-dir and execute; LL_FS_RW paths get every handled right.
// Each path is opened with O_PATH and fstat'ed, and a file gets file rights only, as the
// kernel sample does. Then no_new_privs, landlock_restrict_self, execvp. No seccomp, no
// capability drop, no environment filter: the bare kernel mechanism.
//
// LL_SECCOMP=1, or running it under a name that ends in "-seccomp", adds landwall's seccomp
// filter (the same 41 instructions: TIOCSTI and TIOCLINUX refused; x86_64 only), to tell the
// cost of a seccomp filter on every system call apart from the rest of landwall.
//
// Under a name that ends in "-same" it reads LL_SAME_RO and LL_SAME_RW instead: the bench
// gives it landwall's own rule list there (`landwall policy --json`), rule for rule.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_TRUNCATE (1ULL << 14)
#define FS_IOCTL_DEV (1ULL << 15)
#define FS_FILE (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
#define FS_READ (FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)

// landwall's terminal filter as seccompiler compiles it (common/src/seccomp.rs, TTY_X86_64).
static struct sock_filter tty_filter[] = {
	{ 0x0020, 0, 0, 0x4 },
	{ 0x0015, 1, 0, 0xc000003e },
	{ 0x0006, 0, 0, 0x80000000 },
	{ 0x0020, 0, 0, 0x0 },
	{ 0x0015, 0, 1, 0x10 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x5412 },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x541c },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0006, 0, 0, 0x7fff0000 },
	{ 0x0015, 0, 1, 0x40000010 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x5412 },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x541c },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0006, 0, 0, 0x7fff0000 },
	{ 0x0015, 0, 1, 0x40000202 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x5412 },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0005, 0, 0, 0x1 },
	{ 0x0005, 0, 0, 0x4 },
	{ 0x0020, 0, 0, 0x18 },
	{ 0x0015, 0, 1, 0x541c },
	{ 0x0006, 0, 0, 0x50001 },
	{ 0x0006, 0, 0, 0x7fff0000 },
	{ 0x0006, 0, 0, 0x7fff0000 },
};

struct ruleset_attr {
	uint64_t handled_access_fs;
};

struct path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

static int add_paths(int ruleset, const char *var, uint64_t access)
{
	const char *list = getenv(var);
	if (!list || !*list)
		return 0;
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		return -1;
	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		struct stat st;
		struct path_beneath_attr attr = { .allowed_access = access };
		attr.parent_fd = open(p, O_PATH | O_CLOEXEC);
		if (attr.parent_fd < 0) {
			fprintf(stderr, "minimal-sandboxer: %s: %s\n", p, strerror(errno));
			return -1;
		}
		if (fstat(attr.parent_fd, &st) == 0 && !S_ISDIR(st.st_mode))
			attr.allowed_access &= FS_FILE;
		if (syscall(SYS_landlock_add_rule, ruleset, 1, &attr, 0)) {
			fprintf(stderr, "minimal-sandboxer: rule for %s: %s\n", p, strerror(errno));
			return -1;
		}
		close(attr.parent_fd);
	}
	free(copy);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: LL_FS_RO=a:b LL_FS_RW=c:d %s CMD [ARGS...]\n", argv[0]);
		return 2;
	}
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1);
	if (abi < 1) {
		perror("minimal-sandboxer: landlock ABI");
		return 1;
	}
	if (strcmp(argv[1], "--abi") == 0) {
		printf("%ld\n", abi);
		return 0;
	}
	// ABI 1: bits 0-12; ABI 2 adds REFER (13); ABI 3 TRUNCATE (14); ABI 5 IOCTL_DEV (15).
	int bits = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;
	struct ruleset_attr attr = { .handled_access_fs = (1ULL << bits) - 1 };
	int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0) {
		perror("minimal-sandboxer: create ruleset");
		return 1;
	}
	// Invoked as ...-same (bench/wall.sh: landwall's own rule list), the paths come from
	// LL_SAME_RO and LL_SAME_RW, so that both sets can sit in one environment.
	size_t len = strlen(argv[0]);
	int same = len >= 5 && strcmp(argv[0] + len - 5, "-same") == 0;
	if (add_paths(ruleset, same ? "LL_SAME_RO" : "LL_FS_RO", FS_READ) ||
	    add_paths(ruleset, same ? "LL_SAME_RW" : "LL_FS_RW", attr.handled_access_fs))
		return 1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		perror("minimal-sandboxer: no_new_privs");
		return 1;
	}
	if (syscall(SYS_landlock_restrict_self, ruleset, 0)) {
		perror("minimal-sandboxer: restrict");
		return 1;
	}
	close(ruleset);
	const char *sc = getenv("LL_SECCOMP");
	int by_name = len >= 8 && strcmp(argv[0] + len - 8, "-seccomp") == 0;
	if (by_name || (sc && strcmp(sc, "1") == 0)) {
		struct sock_fprog fprog = { sizeof(tty_filter) / sizeof(tty_filter[0]), tty_filter };
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog)) {
			perror("minimal-sandboxer: seccomp");
			return 1;
		}
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "minimal-sandboxer: exec %s: %s\n", argv[1], strerror(errno));
	return 127;
}
