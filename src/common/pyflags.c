/* pyflags.c - see pyflags.h. */
#include "pyflags.h"

#include <string.h>

bool pyflags_skips_site(char *const *argv)
{
    if (argv == NULL || argv[0] == NULL)
        return false;
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    if (strncmp(base, "python", 6) != 0)
        return false;
    for (char *const *a = argv + 1; *a != NULL; a++) {
        const char *o = *a;
        if (o[0] != '-' || o[1] == '\0' || strcmp(o, "--") == 0)
            return false; /* the script, stdin or the end of options */
        if (o[1] == '-') {
            if (strcmp(o, "--check-hash-based-pycs") == 0 && a[1] != NULL)
                a++;
            continue;
        }
        for (const char *c = o + 1; *c; c++) {
            if (*c == 'S' || *c == 'E' || *c == 'I')
                return true;
            if (*c == 'c' || *c == 'm')
                return false; /* what follows is code or a module name */
            if (*c == 'W' || *c == 'X') {
                if (c[1] == '\0' && a[1] != NULL)
                    a++; /* the option's value is the next word */
                break;
            }
        }
    }
    return false;
}
