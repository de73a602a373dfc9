/* router/mgmt/agent.h: the AMQP management agent - qdrouterd's `$management` node - on a thread
 * of its own.
 *
 * The core sees the agent as one more worker (queue index n_workers): the agent attaches
 * two consumer links, to `$management` and to `_local/$management` (the address
 * `_topo/0/<router id>/$management` resolves to), and one anonymous sender.  Requests reach
 * it through normal routing as CORE_W_SEND copies; it settles each (ACCEPTED, or REJECTED
 * when it cannot be answered), computes the reply (mgmt_amqp_handle, mgmt.h) and injects it as a
 * new presettled delivery to the request's reply-to, which the core routes to the client's
 * dynamic receiver like any message.  The agent's state is passed in (no globals).
 *
 * Threads: mgmt_agent_new/start/stop/free run on the main thread (new before the core
 * starts, start after it, stop after the core stopped, free after the workers are gone).
 * Everything else in agent.c runs on the agent thread.
 */
#ifndef JUNCTION_ROUTER_MGMT_AGENT_H
#define JUNCTION_ROUTER_MGMT_AGENT_H

#include "config/config.h"
#include "core/base/mpsc.h"
#include "core/core.h"
#include "stats/stats.h"

typedef struct mgmt_agent  mgmt_agent_t;
typedef struct rtr_connmgr rtr_connmgr_t;
typedef struct rtr_ctx     rtr_ctx_t; /* router/ctx.h */

/* A new agent in *out: its loop, its inbox, its state for `cfg` (borrowed).  `ctx` is the
 * workers' context (borrowed: link ids, connection closes).  `index` is the core queue
 * index it answers to (the number of workers); listeners are created and deleted through
 * `connmgr` (borrowed, started; outlives the agent).  Returns 0 or a negative errno (*out
 * untouched). */
int mgmt_agent_new(const cfg_t *cfg, core_t *core, rtr_ctx_t *ctx, int index,
                   stats_registry_t *reg, rtr_connmgr_t *connmgr, mgmt_agent_t **out);
/* The agent's inbox, for the core (valid from new to free). */
base_mpsc_t *mgmt_agent_queue(mgmt_agent_t *a);
/* Start the thread; it attaches its links at once.  Returns 0 or a negative errno. */
int mgmt_agent_start(mgmt_agent_t *a);
/* Stop and join the thread (the core must have stopped).  Safe when not started or NULL. */
void mgmt_agent_stop(mgmt_agent_t *a);
/* Free everything, including configurations made by CREATE.  NULL is fine. */
void mgmt_agent_free(mgmt_agent_t *a);

#endif
