/* html_roles.c - whose PyTorch's tensors are, in the HTML page's model:
 * one bar per measured state (the out-of-memory failure, each device at
 * exit), cut into the roles of docs/snapshot-format.md (allocator.roles)
 * and the allocator's cache; drawn by html/roles.js. */
#include "html.h"

#include <inttypes.h>
#include <stdio.h>

#include "report_allocator.h"

static void bar(struct jsonw *w, const char *title, const struct snap_allocator *a)
{
    static const char *const names[SNAP_ROLES] = {"parameters", "buffers", "gradients",
                                                  "optimizer state", "other tensors"};
    char text[512];
    jsonw_begin_object(w);
    jsonw_key(w, "title");
    jsonw_string(w, title);
    jsonw_key(w, "text");
    jsonw_string(w, report_allocator_roles_text(a, text, sizeof text));
    jsonw_key(w, "optimizers");
    jsonw_string(w, a->optimizers);
    jsonw_key(w, "parts");
    jsonw_begin_array(w);
    for (int i = 0; i < SNAP_ROLES; i++) {
        jsonw_begin_array(w);
        jsonw_string(w, names[i]);
        jsonw_u64(w, a->roles[i]);
        jsonw_end_array(w);
    }
    jsonw_begin_array(w);
    jsonw_string(w, "cache");
    jsonw_u64(w, a->reserved_bytes != SNAP_UNKNOWN && a->reserved_bytes > a->allocated_bytes
                     ? a->reserved_bytes - a->allocated_bytes
                     : 0);
    jsonw_end_array(w);
    jsonw_end_array(w);
    jsonw_end_object(w);
}

void html_roles_write(struct jsonw *w, const struct snapshot *s)
{
    jsonw_key(w, "roles");
    jsonw_begin_array(w);
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
    jsonw_end_array(w);
}
