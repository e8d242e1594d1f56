/* SPDX-License-Identifier: MIT */
/*
 * Starting the command `asynctraced run` traces, with no race: it is
 * started under ptrace and held at its entry point (AT_ENTRY: the dynamic
 * loader has mapped its libraries, none of its own code has run), the
 * probes are attached to it there, and only then is it let go.
 */
#ifndef LAUNCH_H
#define LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct launch {
	pid_t pid;		/* 0: not started */
	bool held;		/* still stopped under ptrace */
	uint64_t held_at;	/* when it stopped at its entry point (now_ns()) */
	uint64_t held_ns;	/* how long it was held there */
	int status;		/* ended before its entry point: its exit status */
};

/* Who the command runs as. */
struct launch_user {
	bool change;		/* false: asynctraced's own user */
	uid_t uid;
	gid_t gid;		/* its primary group */
	char *name;		/* its name (its groups, USER, LOGNAME); NULL: no passwd entry */
	char *home;		/* HOME; NULL: left as it is */
	mode_t umask;		/* the umask the command starts with */
};

/*
 * Who --user names (a name or a uid); NULL: the user sudo was run by
 * (SUDO_UID), if any, else no change. 0, or -ENOENT for no such user.
 */
int launch__user(struct launch_user *u, const char *user);
void launch__user_free(struct launch_user *u);

/*
 * Starts argv (argv[0] searched in PATH, as a shell does) as user u, with
 * no_new_privs (a setuid or file-capability program it runs gains nothing),
 * and holds it at its entry point. 0; or, after a message, EXIT_NOT_FOUND
 * (127: no such command), EXIT_CANNOT_EXEC (126: not executable) or
 * EXIT_FAIL.
 */
int launch__start(struct launch *l, char *const argv[], const struct launch_user *u);
/* Lets it run (detaching ptrace); a no-op once done. */
void launch__release(struct launch *l);
/* Waits for it to end: its exit status, 128 + N when killed by signal N. */
int launch__wait(struct launch *l);

#endif
