/* router/router_int.h: the router module's private types, shared by the router's .c files only.
 *
 * Ownership (see router/DESIGN.md for the picture):
 *  - rtr_worker_t: one per worker thread; everything reachable from it is _WT (its thread).
 *  - rtr_conn_t, rtr_link_t, rtr_in_t, rtr_out_t: owned by the worker of their connection.
 *  - rtr_msg_t: message content, shared read-only by every copy once routed; reference
 *    counted (core_content_t first); freed by whichever worker drops the last reference.
 */
#ifndef JUNCTION_ROUTER_INT_H
#define JUNCTION_ROUTER_INT_H

#include "router/router.h"

#include "codec/codec.h"
#include "config/config.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/mpsc.h"
#include "core/core.h"

#include <proton/connection_driver.h>
#include <uv.h>

typedef struct rtr_worker rtr_worker_t;
typedef struct rtr_conn rtr_conn_t;
typedef struct rtr_link rtr_link_t;
typedef struct rtr_msg rtr_msg_t;
typedef struct rtr_in rtr_in_t;
typedef struct rtr_out rtr_out_t;

/* Kinds of CORE_W_EXTERNAL work posted to a worker by the main thread. */
enum {
    RTR_EXT_ACCEPT = 0, /* arg = socket fd, ptr = the listener's cfg_listener_t */
    RTR_EXT_SHUTDOWN,   /* close every connection, then stop */
};

/* Largest message prefix (sections before the body) the router accepts. */
#define RTR_PREFIX_MAX (1u << 20)
/* Outgoing bytes a session may hold in Proton before the router stops writing into it. */
#define RTR_SESSION_OUT_MAX (1u << 20)
/* Bytes handed to pn_link_send() at a time. */
#define RTR_SEND_CHUNK (64u << 10)

/* rtr_msg_t: one received message's bytes and what the codec found in them.
 * Written only by the receiving worker until the message is routed; read-only afterwards. */
struct rtr_msg {
    core_content_t c;         /* first: reference count shared with the core */
    uint8_t       *data;      /* the encoded message, contiguous (heap) */
    size_t         len;       /* bytes received */
    size_t         cap;       /* bytes allocated */
    codec_scan_t   scan;      /* sections, valid once routed */
    bool           ra_in;     /* scan.ra came from a client whose annotations are kept */
};

/* rtr_in_t: an incoming delivery (the client's transfer to the router). Owner: the worker
 * of its connection. Freed when both the worker (Proton side done) and the core (posted
 * CORE_W_SETTLE/RELEASE) are done with it. */
struct rtr_in {
    core_delivery_t dlv;      /* first: what the core sees */
    rtr_link_t     *link;     /* NULL once the link is gone */
    pn_delivery_t  *pn;       /* NULL once settled or the link is gone */
    rtr_msg_t      *msg;      /* our content reference */
    rtr_in_t       *prev;     /* in link->ins */
    rtr_in_t       *next;     /* in link->ins */
    bool            at_core;  /* posted to the core, no answer yet */
};

/* rtr_out_t: one outgoing copy on a link toward a client. Owner: that link's worker. */
struct rtr_out {
    rtr_out_t       *next;     /* in link->outs */
    rtr_out_t       *prev;     /* in link->outs */
    core_delivery_t *in;       /* the incoming delivery to report to; NULL if presettled */
    rtr_msg_t       *msg;      /* content reference */
    pn_delivery_t   *pn;       /* once started */
    size_t           sent;     /* bytes of the message body part sent (from body_off) */
    bool             prefix_done; /* composed prefix sent */
    bool             done_sending; /* all bytes sent and the delivery advanced */
};

/* rtr_link_t: one link. Owner: its connection's worker. Lives until the core confirmed the
 * detach (CORE_W_LINK_DETACHED) or, when never announced to the core, until cleanup. */
struct rtr_link {
    uint64_t     id;         /* process-unique; [L<id>] */
    rtr_conn_t  *conn;       /* its connection */
    pn_link_t   *pn;         /* NULL after cleanup */
    rtr_link_t  *next;       /* in conn->links */
    rtr_link_t  *prev;       /* in conn->links */
    bool         out;        /* the router sends on it (the client's receiver) */
    bool         at_core;    /* announced to the core, detach not yet confirmed */
    bool         open;       /* attach answered */
    bool         credit_on;  /* IN: the core wants the sender to have credit */
    bool         in_pump;    /* OUT: on conn's pump list */
    bool         blocked;    /* OUT: stopped on a full session window */
    uint32_t     held;       /* IN: deliveries taken from credit, not yet returned */
    rtr_in_t    *ins;        /* IN: routed deliveries awaiting the core */
    rtr_in_t    *receiving;  /* IN: the delivery being received (not yet routed) */
    rtr_out_t   *outs;       /* OUT: copies, oldest first (queued, sending, unsettled) */
    rtr_out_t   *outs_tail;  /* OUT: last */
    rtr_out_t   *next_send;  /* OUT: first copy not completely sent */
    uint32_t     queued;     /* OUT: copies not completely sent */
    rtr_link_t  *pump_next;  /* OUT: on conn->pump */
    uint64_t     tag;        /* OUT: delivery tag counter */
};

/* rtr_conn_t: one AMQP connection with its Proton driver. Owner: its worker; every field is
 * _WT.  Lifetime: accept .. the uv_close() callback AND every link confirmed detached. */
struct rtr_conn {
    uv_tcp_t               tcp;        /* first member: handle <-> conn cast */
    uv_timer_t             timer;      /* Proton's tick (idle timeout) */
    pn_connection_driver_t driver;     /* not thread-safe: owner only (Proton) */
    rtr_worker_t          *worker;     /* owner */
    const cfg_listener_t  *listener;   /* how it was accepted */
    uint64_t               id;         /* process-unique; [C<id>] */
    rtr_link_t            *links;      /* every link not yet freed */
    rtr_link_t            *pump;       /* OUT links with bytes or copies to send */
    rtr_conn_t            *next;       /* in worker->conns */
    rtr_conn_t            *prev;       /* in worker->conns */
    char                   peer[64];   /* "host:port" of the client */
    char                  *wbuf;       /* bytes in flight in uv_write (copy of Proton's) */
    size_t                 wlen;       /* their count */
    uv_write_t             wreq;       /* the write in flight */
    bool                   writing;    /* a uv_write is in flight */
    bool                   closing;    /* uv_close called */
    bool                   closed;     /* uv_close callback ran */
    bool                   reading;    /* uv_read_start active */
    bool                   dirty;      /* on worker->dirty: process after the inbox */
    rtr_conn_t            *dirty_next; /* in worker->dirty */
    int                    handles;    /* uv handles not yet closed */
    int                    n_blocked;  /* links with `blocked` set */
    bool                   strip_in;   /* drop client x-opt-qd.* annotations */
    bool                   strip_out;  /* write no router annotations toward the client */
};

/* rtr_worker_t: one worker thread. */
struct rtr_worker {
    int               index;     /* 0..n-1 */
    uv_loop_t         loop;      /* the worker's loop */
    uv_async_t        wake;      /* core / main thread -> this worker */
    uv_prepare_t      flush;     /* end of each loop iteration: push the batch to the core */
    uv_thread_t       thread;    /* the thread */
    base_mpsc_t       inbox;     /* core_work_t from the core and the main thread */
    base_mpsc_batch_t to_core;   /* actions built this iteration */
    core_t           *core;      /* the core */
    rtr_conn_t       *conns;     /* live connections */
    rtr_conn_t       *dirty;     /* connections touched by inbox work, to process */
    size_t            n_conns;   /* their count */
    size_t            n_ins;     /* rtr_in_t alive (shutdown waits for zero) */
    size_t            n_links;   /* rtr_link_t alive */
    bool              stopping;  /* RTR_EXT_SHUTDOWN seen */
};

/* Process-wide read-mostly state, written on the main thread before the workers start. */
typedef struct rtr_globals {
    const cfg_t   *cfg;          /* the configuration */
    const char    *router_id;    /* cfg router id */
    char          *node_id;      /* "0/<router id>", used in x-opt-qd.ingress/trace */
    size_t         node_id_len;  /* its length */
    uint8_t       *node_id_enc;  /* node_id encoded as an AMQP str8/str32 (trace element) */
    size_t         node_id_enc_len;
    _Atomic uint64_t next_conn_id; /* connection id counter (any worker) */
    _Atomic uint64_t next_link_id; /* link id counter (any worker) */
} rtr_globals_t;
extern rtr_globals_t g_rtr;

/* worker.c */
int rtr_worker_init(rtr_worker_t *w, int index, core_t *core);
int rtr_worker_start(rtr_worker_t *w);
void rtr_worker_join(rtr_worker_t *w);
void rtr_worker_fini(rtr_worker_t *w);
void rtr_worker_post_ext(rtr_worker_t *w, int kind, void *ptr, long arg);
core_action_t *rtr_worker_action_WT(rtr_worker_t *w);
void rtr_worker_maybe_exit_WT(rtr_worker_t *w);

/* conn.c */
void rtr_conn_accept_WT(rtr_worker_t *w, int fd, const cfg_listener_t *l);
void rtr_conn_close_WT(rtr_conn_t *c);
void rtr_conn_work_WT(rtr_worker_t *w, core_work_t *work);
void rtr_conn_process_dirty_WT(rtr_worker_t *w);

/* msg.c */
rtr_msg_t *rtr_msg_new(void);
void rtr_msg_unref(rtr_msg_t *m);

#endif
