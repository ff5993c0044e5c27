/* html_roles.c - whose PyTorch's tensors are, in the HTML page's model:
 * one bar per measured state (the out-of-memory failure, each device at
 * exit), cut into the roles of docs/snapshot-format.md (allocator.roles)
 * and the allocator's cache; drawn by html/roles.js. */
#include "html.h"

#include <inttypes.h>
#include <stdio.h>

#include "report_allocator.h"

static void bar(struct json_out *w, const char *title, const struct snap_allocator *a)
{
    static const char *const names[SNAP_ROLES + 1] = {"parameters", "buffers", "gradients",
                                                      "optimizer state", "other tensors",
                                                      "cache"};
    uint64_t cache = a->reserved_bytes != SNAP_UNKNOWN && a->reserved_bytes > a->allocated_bytes
                         ? a->reserved_bytes - a->allocated_bytes : 0;
    char text[512];
    json_out_begin_object(w);
    json_out_key_string(w, "title", title);
    json_out_key_string(w, "text", report_allocator_roles_text(a, text, sizeof text));
    json_out_key_string(w, "optimizers", a->optimizers);
    json_out_key(w, "parts");
    json_out_begin_array(w);
    for (int i = 0; i <= SNAP_ROLES; i++) { /* the roles, then the allocator's cache */
        json_out_begin_array(w);
        json_out_string(w, names[i]);
        json_out_u64(w, i < SNAP_ROLES ? a->roles[i] : cache);
        json_out_end_array(w);
    }
    json_out_end_array(w);
    json_out_end_object(w);
}

void html_roles_write(struct json_out *w, const struct snapshot *s)
{
    json_out_key(w, "roles");
    json_out_begin_array(w);
    char title[96];
    const struct snap_oom *o = &s->oom;
    if (o->present && o->allocator.present && o->allocator.has_roles) {
        snprintf(title, sizeof title, "device %" PRId64 " at the out-of-memory failure",
                 o->device);
        bar(w, title, &o->allocator);
    }
    for (size_t d = 0; d < s->ndevices; d++) {
        const struct snap_device *dv = &s->devices[d];
        if (!dv->allocator.present || !dv->allocator.has_roles)
            continue;
        snprintf(title, sizeof title, "device %" PRId64 " at exit", dv->ordinal);
        bar(w, title, &dv->allocator);
    }
    json_out_end_array(w);
}
