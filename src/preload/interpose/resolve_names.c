/* resolve_names.c - the name of each slot of hooks_table.h (the exported
 * symbol), beside the table itself: the snapshot writer and the OOM report
 * name a call's entry point without linking the resolver, which holds
 * every wrapper's address and so reaches the whole interposer. */
#include "resolve.h"

#define SLOT_NAME(sym, base, ver, ptsz) #sym,
static const char *const names[SLOT_COUNT] = {
    CUMEMTRACE_DRIVER_HOOKS(SLOT_NAME)
    CUMEMTRACE_RUNTIME_HOOKS(SLOT_NAME)
    CUMEMTRACE_HELPERS(SLOT_NAME)
};
#undef SLOT_NAME

const char *resolve_name(unsigned slot)
{
    return slot < SLOT_COUNT ? names[slot] : "?";
}
