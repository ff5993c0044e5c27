/* snapshot_check.c - what the format promises across fields, checked on
 * the model after the parse (docs/snapshot-format.md, "Invariants"): stack
 * ids unique, every reference to a stack defined.  A file that breaks one
 * is refused with a message naming the file and the rule, rather than
 * shown as numbers that contradict each other.
 */
#include "snapshot_check.h"

#include <stdio.h>
#include <stdlib.h>

static int stack_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct snap_stack *)a)->id;
    int64_t y = ((const struct snap_stack *)b)->id;
    return (x > y) - (x < y);
}

static int device_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct snap_device *)a)->ordinal;
    int64_t y = ((const struct snap_device *)b)->ordinal;
    return (x > y) - (x < y);
}

/* Stacks are looked up by id with a binary search. */
static int sort_stacks(struct snapshot *s, struct cli_error *err)
{
    bool sorted = true;
    for (size_t i = 1; i < s->nstacks && sorted; i++)
        if (s->stacks[i - 1].id >= s->stacks[i].id)
            sorted = false;
    if (sorted)
        return 0;
    qsort(s->stacks, s->nstacks, sizeof *s->stacks, stack_cmp);
    for (size_t i = 1; i < s->nstacks; i++)
        if (s->stacks[i - 1].id == s->stacks[i].id)
            return errors_set(err, CLI_EVALUE,
                              "cannot read snapshot '%s': stack id %lld is defined twice",
                              s->file, (long long)s->stacks[i].id);
    return 0;
}

static int resolve_groups(struct snapshot *s, struct cli_error *err, struct snap_groups *g,
                          const char *where)
{
    for (size_t i = 0; i < g->n; i++) {
        struct snap_group *e = &g->v[i];
        if (e->stack_id == 0)
            continue;
        e->stack = snapshot_stack_index(s, e->stack_id);
        if (e->stack == SNAP_NO_STACK)
            return errors_set(err, CLI_EBADREF,
                              "cannot read snapshot '%s': %s[%zu] refers to stack %lld, "
                              "which \"stacks\" does not define",
                              s->file, where, i, (long long)e->stack_id);
    }
    return 0;
}

static int resolve(struct snapshot *s, struct cli_error *err)
{
    char where[64];
    for (size_t d = 0; d < s->ndevices; d++) {
        snprintf(where, sizeof where, "devices[%zu].live", d);
        if (resolve_groups(s, err, &s->devices[d].live, where))
            return err->code;
        snprintf(where, sizeof where, "devices[%zu].at_peak", d);
        if (resolve_groups(s, err, &s->devices[d].at_peak, where))
            return err->code;
    }
    if (resolve_groups(s, err, &s->host.live, "host_pinned.live") ||
        resolve_groups(s, err, &s->host.at_peak, "host_pinned.at_peak") ||
        resolve_groups(s, err, &s->oom.live, "oom.live") ||
        resolve_groups(s, err, &s->oom.released, "oom.released"))
        return err->code;
    if (s->oom.present && s->oom.stack_id > 0) {
        s->oom.stack = snapshot_stack_index(s, s->oom.stack_id);
        if (s->oom.stack == SNAP_NO_STACK)
            return errors_set(err, CLI_EBADREF,
                              "cannot read snapshot '%s': oom.stack refers to stack %lld, "
                              "which \"stacks\" does not define",
                              s->file, (long long)s->oom.stack_id);
    }
    return 0;
}

int snapshot_check(struct snapshot *s, struct cli_error *err)
{
    int rc = sort_stacks(s, err);
    if (rc == 0)
        rc = resolve(s, err);
    if (rc != 0)
        return rc;
    /* The format promises ascending ordinals; views rely on it. */
    if (s->ndevices > 1)
        qsort(s->devices, s->ndevices, sizeof *s->devices, device_cmp);
    return 0;
}
