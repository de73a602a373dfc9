/* tests/unit/core/routing/topo.h: topologies as text and the canonical form of a path
 * computation's result, shared by path_test.c and rt_paths.c (test code only).
 *
 * Topology text: routers separated by '|', each "ID:PEER=COST,PEER=COST" (its advertised link
 * state; "ID:" for none) or "ID!" (only a peer of others, not in the collection: a stub).
 * Canonical result (gen_paths.py writes the same from qdrouterd's path.py):
 *     radius=R; B:nh=B,cost=1,vo=[C,D]; C:nh=B,cost=2,vo=[]; ...
 * reachable routers sorted by id, valid origins sorted by id.
 */
#ifndef JUNCTION_TESTS_ROUTING_TOPO_H
#define JUNCTION_TESTS_ROUTING_TOPO_H

#include "core/routing/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_R 16
#define MAX_P 16

/* A topology parsed from its text: "A:B=1,C=2|B:A=1|X!" ('!': only a peer, no entry). */
typedef struct topo {
    char            text[512]; /* the text, cut in place into ids */
    uint32_t        n;         /* collection entries */
    codec_bytes_t   peers[MAX_R][MAX_P];
    int64_t         costs[MAX_R][MAX_P];
    core_rt_ls_in_t ls[MAX_R];
} topo_t;

static inline codec_bytes_t view(const char *s)
{
    return (codec_bytes_t){(const uint8_t *)s, strlen(s)};
}

static inline void topo_parse(topo_t *t, const char *text, const char *self)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->text, sizeof(t->text), "%s", text);
    core_rt_ls_in_t all[MAX_R] = {0};
    uint32_t        n = 0;
    for (char *r = strtok(t->text, "|"); r; r = strtok(NULL, "|")) {
        char *colon = strchr(r, ':');
        if (!colon)
            continue; /* "X!": not in the collection */
        *colon = 0;
        core_rt_ls_in_t *ls = &all[n];
        ls->id = view(r);
        ls->peers = t->peers[n];
        ls->costs = t->costs[n];
        for (char *p = colon + 1; *p;) {
            char *comma = strchr(p, ',');
            char *next = comma ? comma + 1 : p + strlen(p);
            if (comma)
                *comma = 0;
            char *eq = strchr(p, '=');
            *eq = 0;
            t->peers[n][ls->n_peers] = view(p);
            t->costs[n][ls->n_peers] = strtoll(eq + 1, NULL, 10);
            ls->n_peers++;
            p = next;
        }
        n++;
    }
    /* self first, then the others in order */
    for (uint32_t i = 0; i < n; i++)
        if (strlen(self) == all[i].id.len && memcmp(self, all[i].id.ptr, all[i].id.len) == 0)
            t->ls[t->n++] = all[i];
    for (uint32_t i = 0; i < n; i++)
        if (!(strlen(self) == all[i].id.len && memcmp(self, all[i].id.ptr, all[i].id.len) == 0))
            t->ls[t->n++] = all[i];
}

static inline int id_sort(const void *a, const void *b)
{
    const codec_bytes_t *x = *(const codec_bytes_t *const *)a,
                        *y = *(const codec_bytes_t *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int    c = memcmp(x->ptr, y->ptr, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The canonical line gen_paths.py writes. */
static inline void canonical(const core_rt_paths_t *p, char *out, size_t cap)
{
    size_t               len = (size_t)snprintf(out, cap, "radius=%u", p->radius);
    const codec_bytes_t *order[256];
    uint32_t             n = 0;
    for (uint32_t i = 0; i < p->n; i++)
        if (p->next_hop[i] >= 0)
            order[n++] = &p->ids[i];
    qsort(order, n, sizeof(order[0]), id_sort);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t             d = (uint32_t)(order[k] - p->ids);
        const codec_bytes_t *nh = &p->ids[p->next_hop[d]];
        len += (size_t)snprintf(out + len, cap - len, "; %.*s:nh=%.*s,cost=%lld,vo=[",
                                (int)p->ids[d].len, (const char *)p->ids[d].ptr, (int)nh->len,
                                (const char *)nh->ptr, (long long)p->cost[d]);
        const codec_bytes_t *vo[256];
        uint32_t             nv = 0;
        for (uint32_t o = 0; o < p->n; o++)
            if (core_rt_paths_is_valid_origin(p, d, o))
                vo[nv++] = &p->ids[o];
        qsort(vo, nv, sizeof(vo[0]), id_sort);
        for (uint32_t j = 0; j < nv; j++)
            len += (size_t)snprintf(out + len, cap - len, "%s%.*s", j ? "," : "", (int)vo[j]->len,
                                    (const char *)vo[j]->ptr);
        len += (size_t)snprintf(out + len, cap - len, "]");
    }
}

#endif
