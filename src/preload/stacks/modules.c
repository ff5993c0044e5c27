/* modules.c - path, build-id and load bias of the modules on our stacks. */
#include "modules.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

struct describe_ctx {
    struct module_info *mods;
    size_t n;
};

/* The NT_GNU_BUILD_ID note of a loaded object, read from its PT_NOTE
 * segments (they lie inside a PT_LOAD, so the memory is mapped). */
static void read_build_id(const struct dl_phdr_info *info, struct module_info *m)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        size_t left = ph->p_memsz;
        while (left >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            size_t name = (nh->n_namesz + 3) & ~(size_t)3;
            size_t desc = (nh->n_descsz + 3) & ~(size_t)3;
            size_t total = sizeof *nh + name + desc;
            if (total > left)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                memcmp(p + sizeof *nh, "GNU", 4) == 0 && nh->n_descsz > 0 &&
                nh->n_descsz <= MODULE_BUILD_ID_MAX) {
                memcpy(m->build_id, p + sizeof *nh + name, nh->n_descsz);
                m->build_id_len = nh->n_descsz;
                return;
            }
            p += total;
            left -= total;
        }
    }
}

static int describe_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct describe_ctx *c = arg;
    /* dladdr's dli_fbase is the start of the object's first mapping: the
     * lowest PT_LOAD, rounded down to its page. */
    uintptr_t low = UINTPTR_MAX;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && ph->p_vaddr < low)
            low = ph->p_vaddr;
    }
    if (low == UINTPTR_MAX)
        return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = info->dlpi_addr + (low & ~(page - 1));
    for (size_t k = 0; k < c->n; k++) {
        struct module_info *m = &c->mods[k];
        if (m->found || m->base != start)
            continue;
        m->found = 1;
        m->vaddr_base = start - info->dlpi_addr;
        const char *name = info->dlpi_name;
        if (name == NULL || name[0] == '\0') {
            /* The main program: the loader keeps no name for it. */
            ssize_t len = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
            m->path[len > 0 ? len : 0] = '\0';
        } else {
            size_t len = strlen(name);
            if (len >= sizeof m->path)
                len = sizeof m->path - 1;
            memcpy(m->path, name, len);
            m->path[len] = '\0';
        }
        read_build_id(info, m);
    }
    return 0;
}

void modules_describe(struct module_info *mods, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        mods[k].found = 0;
        mods[k].path[0] = '\0';
        mods[k].build_id_len = 0;
        mods[k].vaddr_base = 0;
    }
    struct describe_ctx c = {mods, n};
    dl_iterate_phdr(describe_one, &c);
}
