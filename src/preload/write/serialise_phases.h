/* serialise_phases.h - the snapshot's phases: each pool's bytes by phase
 * and the top-level "phases" section, names and ranges
 * (serialise_phases.c, docs/snapshot-format.md "phases"). */
#ifndef CUMEMTRACE_SERIALISE_PHASES_H
#define CUMEMTRACE_SERIALISE_PHASES_H

#include <stdint.h>

#include "snapshot_json.h"
#include "record.h"

/* Writes ,"by_phase":[...] for `pool`, when some site has a phase. */
void serialise_phases_pool(struct snapshot_json *w, const struct record_view *v, uint32_t pool);
/* Writes "phases":{...},\n when the process opened any range. */
void serialise_phases(struct snapshot_json *w);

#endif
