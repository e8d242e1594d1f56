// SPDX-License-Identifier: MIT
/*
 * A program asynctraced takes for tokio, whose functions hold instructions
 * the kernel refuses to probe: nops with a CS prefix, as LLVM pads loops
 * with (docs/cli.md, "Where probes go").
 *
 * - waker::wake_by_ref begins with one, and nothing cheaper follows it: its
 *   probe is refused where it is placed and at the entry. Real compilers do
 *   not begin a function so; this one does, so that the tests see what a
 *   refused probe costs: the process is traced without it, and a warning
 *   says what is lost.
 * - raw::schedule has one after its first instruction, then a push: placed
 *   on the push, past the nop; and when rules that lie say the nop is
 *   emulated, refused there and placed at the entry instead.
 * - raw::poll is an ordinary function.
 *
 *   refused-probe        prints its pid, then calls them at each byte on stdin
 */
#include <stdio.h>
#include <unistd.h>

/* Legacy-mangled as rustc names tokio's functions: asynctraced finds them by these names. */
#define POLL "_ZN5tokio7runtime4task3raw4poll17h0123456789abcdefE"
#define WAKE "_ZN5tokio7runtime4task5waker11wake_by_ref17h0123456789abcdefE"
#define SCHEDULE "_ZN5tokio7runtime4task3raw8schedule17h0123456789abcdefE"

__asm__(".text\n"
	".globl " POLL "\n.type " POLL ",@function\n" POLL ":\n"
	"	push %rbx\n"
	"	pop %rbx\n"
	"	ret\n"
	".size " POLL ", .-" POLL "\n"
	".globl " WAKE "\n.type " WAKE ",@function\n" WAKE ":\n"
	"	.byte 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n" /* cs nopl 0(%rax,%rax,1) */
	"	ret\n"
	".size " WAKE ", .-" WAKE "\n"
	".globl " SCHEDULE "\n.type " SCHEDULE ",@function\n" SCHEDULE ":\n"
	"	mov %rdi,%rax\n"
	"	.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n" /* cs nopw */
	"	push %rbx\n"
	"	pop %rbx\n"
	"	ret\n"
	".size " SCHEDULE ", .-" SCHEDULE "\n");

void tokio_poll(void) __asm__(POLL);
void tokio_wake(void) __asm__(WAKE);
void tokio_schedule(void) __asm__(SCHEDULE);

int main(void)
{
	char c;

	printf("refused-probe: pid %d\n", (int)getpid());
	fflush(stdout);
	while (read(0, &c, 1) > 0) {
		tokio_poll();
		tokio_wake();
		tokio_schedule();
	}
	return 0;
}
