#include "nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hp_nodes_format(const struct hp_nodes *s, char *buf, unsigned long cap)
{
    size_t used = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    for (unsigned n = 0; n < HP_NODES_MAX; n++) {
        if (!hp_nodes_has(s, n) || (n > 0 && hp_nodes_has(s, n - 1)))
            continue;
        unsigned hi = n;
        while (hi + 1 < HP_NODES_MAX && hp_nodes_has(s, hi + 1))
            hi++;
        char one[32];
        int k = hi == n ? snprintf(one, sizeof(one), "%s%u", used ? "," : "", n)
                        : snprintf(one, sizeof(one), "%s%u-%u", used ? "," : "", n, hi);
        if (k < 0 || used + (size_t)k + 4 > cap) {
            if (used + 4 <= cap)
                memcpy(buf + used, "...", 4);
            return;
        }
        memcpy(buf + used, one, (size_t)k + 1);
        used += (size_t)k;
    }
}

int hp_nodes_parse(const char *text, struct hp_nodes *nodes)
{
    const char *s = text;
    hp_nodes_clear(nodes);
    while (*s && *s != '\n') {
        char *end;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        s = end;
        if (*s == '-') {
            if (s[1] < '0' || s[1] > '9')
                return -EINVAL;
            hi = strtoul(s + 1, &end, 10);
            s = end;
        }
        if (lo > hi || hi >= HP_NODES_MAX)
            return -EINVAL;
        for (unsigned long i = lo; i <= hi; i++)
            hp_nodes_set(nodes, (unsigned)i);
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return -EINVAL;
    }
    return *s == '\n' && s[1] ? -EINVAL : 0;
}
