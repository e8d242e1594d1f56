/* SPDX-License-Identifier: MIT */
/*
 * pingpong: two processes on one CPU hand a byte back and forth through two
 * pipes, so every round trip is two context switches and little else. What
 * a tracer adds to the context switches of processes it does not trace
 * shows plainly in the time a round trip takes (tests/bench/switches.py).
 *
 * usage: pingpong [ROUNDS [CPU]]   (default 200000 rounds on CPU 0)
 * prints: pingpong: rounds=N ns_per_round=T ns_per_switch=T/2
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("pingpong: sched_setaffinity");
		exit(1);
	}
}

static void xfer(int in, int out, char *c)
{
	if (read(in, c, 1) != 1 || write(out, c, 1) != 1)
		_exit(1);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 200000;
	int cpu = argc > 2 ? atoi(argv[2]) : 0;
	int ping[2], pong[2], status;
	struct timespec a, b;
	char c = 0;
	pid_t child;
	double ns;

	if (rounds <= 0 || pipe(ping) || pipe(pong)) {
		fprintf(stderr, "usage: pingpong [ROUNDS [CPU]]\n");
		return 2;
	}
	pin(cpu);
	child = fork();
	if (child < 0) {
		perror("pingpong: fork");
		return 1;
	}
	if (child == 0) {
		for (long i = 0; i < rounds; i++)
			xfer(ping[0], pong[1], &c);
		_exit(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < rounds; i++) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) {
			perror("pingpong: pipe");
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "pingpong: the other side failed\n");
		return 1;
	}
	ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)rounds;
	printf("pingpong: rounds=%ld ns_per_round=%.0f ns_per_switch=%.0f\n", rounds, ns, ns / 2);
	return 0;
}
