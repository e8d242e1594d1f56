/* SPDX-License-Identifier: MIT */
/*
 * Scenarios: named workloads whose shape a tracer should recognise. Task
 * names are part of the contract (tests match on them), so they are spelled
 * out at each task_spawn() call.
 */
#ifndef SE_SCENARIO_H
#define SE_SCENARIO_H

#include <stdbool.h>
#include <stdint.h>

/* --rate max: as fast as the scenario can go (its max_rate is RATE_MAX). */
#define RATE_MAX UINT32_MAX

struct scenario {
	const char *name;
	const char *summary;        /* one line, for --help */
	const char *rate_help;      /* what --rate means here */
	unsigned default_rate;
	unsigned max_rate;
	bool steal;                 /* runtime_config.steal */
	bool unpark_on_local_push;  /* runtime_config.unpark_on_local_push */
	uint64_t lazy_unpark_ns;    /* runtime_config.lazy_unpark_ns */
	/* Spawn the tasks from the main thread (onto the injection queue). */
	void (*start)(unsigned rate);
	/* Runtime threads are gone: stop the scenario's own threads. */
	void (*stop)(void);
	/* Runtime tasks are freed: release what start() set up. */
	void (*cleanup)(void);
};

extern const struct scenario scenarios[];
extern const unsigned nscenarios;
const struct scenario *scenario_find(const char *name);

/*
 * A periodic timer for long-lived tasks. Returns true when a period has
 * elapsed (and arms the next one); false on the first call (which arms the
 * first one) and on an early wake, whose timer is still armed.
 */
struct period {
	uint64_t next;
};
bool period_due(struct period *p, uint64_t interval_ns);

/* scenario_healthy.c: the background load most scenarios run. */
void background_start(unsigned rate);
void background_cleanup(void);
void spawn_ticker(void);

/* scenario_faults.c */
void noisy_start(unsigned rate);
void blocking_start(unsigned rate);
void blocking_stop(void);
void blocking_cleanup(void);
void thrash_start(unsigned rate);
void starve_start(unsigned rate);
void lost_start(unsigned rate);

/* scenario_fanout.c */
void fanout_start(unsigned rate);

/* scenario_spin.c */
void spin_start(unsigned rate);

#endif /* SE_SCENARIO_H */
