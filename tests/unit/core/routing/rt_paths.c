/* tests/unit/core/routing/rt_paths.c: print what core/routing/path.c computes for a
 * topology, in the canonical form of topo.h - for the system test that compares it with the
 * routes a real qdrouterd 1.19 computed (tests/system/test_interrouter_codec.py).
 *
 * Usage: rt_paths SELF TOPOLOGY    (topology text: topo.h; the collection is SELF's entry,
 * then the others in the order given).  Exits 0 after printing the line, 2 on bad input.
 */
#include "core/base/base.h"
#include "core/routing/path.h"
#include "topo.h"

int main(int argc, char **argv)
{
    if (argc != 3 || strlen(argv[2]) >= sizeof(((topo_t *)0)->text)) {
        fprintf(stderr, "usage: rt_paths SELF TOPOLOGY\n");
        return 2;
    }
    static topo_t t;
    topo_parse(&t, argv[2], argv[1]);
    core_rt_paths_t p;
    if (t.n == 0 || core_rt_paths_compute(t.ls, t.n, &p) != 0) {
        fprintf(stderr, "rt_paths: the topology is refused\n");
        return 2;
    }
    char line[8192];
    canonical(&p, line, sizeof(line));
    printf("%s\n", line);
    core_rt_paths_fini(&p);
    return 0;
}
