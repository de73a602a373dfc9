/* router/msg.c: message content - the bytes of one received message, shared by its copies.
 * Thread-safe reference counting: any worker may drop a reference; the last one frees. */
#include "router/router_int.h"

rtr_msg_t *rtr_msg_new(void)
{
    rtr_msg_t *m = base_calloc(1, sizeof(*m));
    atomic_init(&m->c.refs, 1);
    return m;
}

void rtr_msg_unref(rtr_msg_t *m)
{
    if (atomic_fetch_sub_explicit(&m->c.refs, 1, memory_order_acq_rel) != 1)
        return;
    free(m->data);
    free(m);
}
