/* SPDX-License-Identifier: MIT */
/*
 * The live view when several processes are traced: one line per process,
 * the worst first (open alerts, then the slowest polls), redrawn once a
 * second in place on a terminal. Each process's console sink fills in its
 * row (console.c); the session draws the board once every row is fresh.
 */
#ifndef BOARD_H
#define BOARD_H

#include <stdint.h>
#include <stdio.h>

struct board_row {
	uint32_t pid;
	char comm[16];
	double polls_per_s;
	double busy;		/* of the workers' time, 0..1 */
	uint64_t p99_ns;	/* polls of the last second (log2 bound); 0: none */
	uint64_t max_ns;
	int open_alerts;
	char alert[48];		/* the first open alert's kind (and task) */
};

struct board;

int board__new(struct board **b, FILE *out);
void board__free(struct board *b);
/* Takes the board off the screen, so that other lines (alerts) can be printed. */
void board__erase(struct board *b);
/* The row of the process behind key, copied. */
int board__set(struct board *b, const void *key, const struct board_row *row);
/* That process is gone from the board. */
void board__remove(struct board *b, const void *key);
/* Draws every row, the worst first, as many as the terminal has lines for. */
void board__draw(struct board *b);

#endif
