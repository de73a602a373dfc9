/* router/agent.h: the AMQP management agent - qdrouterd's `$management` node - on a thread
 * of its own.
 *
 * The core sees the agent as one more worker (queue index n_workers): the agent attaches
 * two consumer links, to `$management` and to `_local/$management` (the address
 * `_topo/0/<router id>/$management` resolves to), and one anonymous sender.  Requests reach
 * it through normal routing as CORE_W_SEND copies; it settles each (ACCEPTED, or REJECTED
 * when it cannot be answered), computes the reply (router/agent_ops.c) and injects it as a
 * new presettled delivery to the request's reply-to, which the core routes to the client's
 * dynamic receiver like any message.
 *
 * Threads: rtr_agent_init/start/stop/free run on the main thread (init before the core
 * starts, start after it, stop after the core stopped, free after the workers are gone).
 * Everything else in agent.c runs on the agent thread.
 */
#ifndef JUNCTION_ROUTER_AGENT_H
#define JUNCTION_ROUTER_AGENT_H

#include "config/config.h"
#include "core/base/mpsc.h"
#include "core/core.h"
#include "stats/stats.h"

typedef struct rtr_connmgr rtr_connmgr_t;
typedef struct rtr_ctx rtr_ctx_t; /* router/ctx.h */

/* Prepare the agent: its loop, its inbox, its state for `cfg` (borrowed).  `ctx` is the
 * workers' context (borrowed: link ids, connection closes).  `index` is the core queue
 * index it answers to (the number of workers); listeners are created and deleted through
 * `connmgr` (borrowed, started; outlives the agent).  Returns 0 or a negative errno. */
int rtr_agent_init(const cfg_t *cfg, core_t *core, rtr_ctx_t *ctx, int index,
                   stats_registry_t *reg, rtr_connmgr_t *connmgr);
/* The agent's inbox, for the core (valid from init to free). */
base_mpsc_t *rtr_agent_queue(void);
/* Start the thread; it attaches its links at once.  Returns 0 or a negative errno. */
int rtr_agent_start(void);
/* Stop and join the thread (the core must have stopped).  Safe when not started. */
void rtr_agent_stop(void);
/* Free everything, including configurations made by CREATE. Safe when not initialised. */
void rtr_agent_free(void);

#endif
