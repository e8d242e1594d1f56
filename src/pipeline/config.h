/* SPDX-License-Identifier: MIT */
/*
 * The detectors' thresholds, listed once. Each line makes a field of struct
 * detect_config, its default, its bit among those given on the command
 * line, its option (cmd/options.c parses it as a time or a count), and each
 * copy made of it: into a capture's process record and back
 * (capture/capture.c), and replay's merge of the two (a threshold given on
 * the command line wins over the one a capture was recorded with). The BPF
 * side filters by three of them (source/tracer.c).
 *
 * A threshold of 0 turns its detector off (episode_gap_ns: never).
 */
#ifndef PIPELINE_CONFIG_H
#define PIPELINE_CONFIG_H

#include <stdint.h>

#define NS_PER_MS (1000 * 1000ull)

/*  X(field,          type,     option,         parsed as, default) */
#define DETECT_THRESHOLDS(X)                                                                       \
	/* a poll this long on the CPU or asleep */                                                \
	X(long_poll_ns,   uint64_t, "long-poll",    time,  10 * NS_PER_MS)                         \
	/* a wake-to-poll delay nothing else explains */                                           \
	X(sched_delay_ns, uint64_t, "sched-delay",  time,  20 * NS_PER_MS)                         \
	/* a worker's average queue depth, while another idles, that starves it ... */             \
	X(starve_depth,   uint32_t, "starve-depth", count, 16)                                     \
	/* ... for this long */                                                                    \
	X(starve_ns,      uint64_t, "starve-time",  time,  200 * NS_PER_MS)                        \
	/* a task's wakes a second that thrash */                                                  \
	X(thrash_rate,    uint32_t, "thrash-rate",  count, 1000)                                   \
	/* a task not woken this long after it returned Pending */                                 \
	X(lost_waker_ns,  uint64_t, "lost-waker",   time,  10000 * NS_PER_MS)                      \
	/* quiet this long ends an episode */                                                      \
	X(episode_gap_ns, uint64_t, "episode-gap",  time,  1000 * NS_PER_MS)

enum detect_threshold {
#define X(field, ...) DETECT_##field,
	DETECT_THRESHOLDS(X)
#undef X
	DETECT_NR_THRESHOLDS
};

/* The bit of a threshold in detect_config.given: DETECT_GIVEN(long_poll_ns). */
#define DETECT_GIVEN(field) (1u << DETECT_##field)

struct detect_config {
#define X(field, type, ...) type field;
	DETECT_THRESHOLDS(X)
#undef X
	uint32_t given;		/* DETECT_GIVEN bits: the thresholds the command line set */
};

/* Every threshold at its default; none given. */
void detect_config__defaults(struct detect_config *c);
/* The thresholds c was not given, taken from recorded (a capture's). */
void detect_config__merge(struct detect_config *c, const struct detect_config *recorded);

#endif
