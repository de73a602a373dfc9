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
#include "codec/frame.h"
#include "config/config.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/mpsc.h"
#include "core/base/pool.h"
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
    RTR_EXT_SHUTDOWN,   /* quiesce: stop granting credit, let deliveries in flight settle
                           for up to arg ms, release the rest, close every connection, stop */
    RTR_EXT_STREAM,     /* a streamed message changed: re-check waiters and Q2 links */
    RTR_EXT_CLOSE_CONN, /* arg = connection id: close it if this worker owns it
                           (management UPDATE adminStatus=deleted; posted to every worker) */
    RTR_EXT_ACCEPT_WS,  /* arg = one end of a socketpair carrying an AMQP-over-WebSocket
                           connection (http.c pumps the other end), ptr = rtr_accept_t (heap,
                           the worker frees it) */
};

/* What RTR_EXT_ACCEPT_WS carries besides the socket. */
typedef struct rtr_accept {
    const cfg_listener_t *listener; /* the http listener the WebSocket came in on */
    char                  peer[64]; /* "host:port" of the WebSocket's client, for logs */
} rtr_accept_t;

/* Most worker threads (the management agent takes the next queue index, and indexes are
 * uint8_t in core_action_t). */
#define RTR_MAX_WORKERS 254
static_assert(CFG_WORKER_THREADS_MAX <= RTR_MAX_WORKERS, "workerThreads is capped by the config");

/* Largest message prefix (sections before the body) the router accepts. */
#define RTR_PREFIX_MAX (1u << 20)
/* The per-connection budget: what one client can make the router hold.
 * RTR_CONN_OUT_MAX: bytes of outgoing copies handed to Proton and not yet taken by the socket,
 * all sessions together; past it the connection's links stop until the client reads.
 * RTR_CONN_IN_UNANSWERED_MAX: bytes read from a client while Proton still holds output for
 * it; past it the router stops reading it until it has read what the router wrote.
 * RTR_WRITE_COPY_MAX: the most copied out of Proton's buffer for a write the socket could not
 * take at once (one write in flight per connection).
 * RTR_CONN_IN_MAX: bytes of incoming transfers Proton may hold unread for the connection's
 * links stopped by Q2, all sessions together; past it the router stops reading the client
 * (also the largest incoming window of one session).
 * The frame guard and Proton's input buffer hold at most one frame each (maxFrameSize, itself
 * capped by the configuration at CFG_MAX_FRAME_SIZE_MAX). */
#define RTR_CONN_OUT_MAX           (1u << 20)
#define RTR_CONN_IN_UNANSWERED_MAX (1u << 20)
#define RTR_WRITE_COPY_MAX         (64u << 10)
#define RTR_CONN_IN_MAX            (8u << 20)
/* Bytes handed to pn_link_send() at a time. */
#define RTR_SEND_CHUNK (64u << 10)
/* Head room given at once to a message that arrives in several frames. */
#define RTR_HEAD_FIRST_PARTIAL (64u << 10)
/* A message still arriving after this many bytes is routed at once and streamed. */
#define RTR_STREAM_THRESHOLD (256u << 10)
/* Size of each buffer a streamed message's later bytes arrive in. */
#define RTR_BUF_SIZE (64u << 10)
/* Q2: a streamed message stops being read when it holds this many bytes that some copy has
 * not sent yet, and goes on below RTR_Q2_LOW. */
#define RTR_Q2_HIGH (1u << 20)
#define RTR_Q2_LOW  (512u << 10)

/* Attaches refused on one connection (maxSenders/maxReceivers) before it is closed. */
#define RTR_REFUSED_LINKS_MAX 1000u

/* Seconds between two trims of the pools and of malloc (server.c), and the bytes of free
 * items each pool keeps on its global list (base_pool_trim()). */
#define RTR_TRIM_PERIOD  5u
#define RTR_POOL_RESERVE (256u << 10)

/* A buffer of a streamed message's bytes after the head. */
typedef struct rtr_buf rtr_buf_t;
struct rtr_buf {
    rtr_buf_t *next;               /* next buffer (written under the message lock) */
    size_t     off;                /* message offset of data[0]; immutable */
    uint8_t    data[RTR_BUF_SIZE]; /* bytes; valid up to the message's `total` */
};

/* rtr_msg_t: one received message's bytes and what the codec found in them.
 * The head (`data`) is written only by the receiving worker until the message is routed and
 * is read-only afterwards.  A streamed message (c.streaming) keeps arriving after it is
 * routed: its later bytes go to `chain` and the fields marked [lock] are guarded by `lock`.
 * DESIGN: copies register as readers; each reader's position says what it has sent, and the
 * receiving worker frees chain buffers every reader has passed (once the core has said how
 * many readers there will be), and stops reading (Q2) while the slowest reader lags by
 * RTR_Q2_HIGH bytes.  Whoever changes what the other side waits for posts RTR_EXT_STREAM to
 * the other's worker; workers then re-check their waiting lists, so a wake carries no
 * pointer that could outlive its object. */
struct rtr_msg {
    core_content_t  c;          /* first: reference count shared with the core */
    uint8_t        *data;       /* the encoded message's head, contiguous (heap) */
    size_t          len;        /* head bytes */
    size_t          cap;        /* head bytes allocated */
    codec_scan_t    scan;       /* sections, valid once routed */
    bool            ra_in;      /* scan.ra came from a client whose annotations are kept */
    int             owner;      /* streaming: the receiving worker's index */
    pthread_mutex_t lock;       /* streaming: guards the [lock] fields */
    rtr_buf_t      *chain;      /* [lock] buffers after the head, oldest kept first */
    rtr_buf_t      *chain_tail; /* [lock] newest buffer (receiving worker only) */
    size_t          total;      /* [lock] bytes received: head + chain */
    bool            complete;   /* [lock] the last byte arrived */
    bool            aborted;    /* [lock] the sender aborted the delivery */
    bool            q2_blocked; /* [lock] the receiving worker waits for readers */
    rtr_out_t      *readers;    /* [lock] registered copies */
    uint32_t        n_readers;  /* [lock] their count */
    uint32_t        _readers_gone; /* [lock] copies that deregistered (or never could) */
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
    bool            at_core;  /* posted to the core */
    bool            core_done; /* the core answered (CORE_W_SETTLE / CORE_W_RELEASE) */
    bool            has_final; /* `final` holds the outcome to give the sender */
    bool            discard;  /* drop the rest of the bytes, then reject (or drop) */
    const char     *discard_why; /* static reason for the rejection */
    size_t          head_limit; /* bytes to gather before routing it as a stream */
    core_disposition_t final; /* the core's outcome, kept until the last byte arrived */
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
    int              worker;   /* owning worker index (read by the receiving worker) */
    /* streaming only */
    size_t           pos;      /* [msg lock] message offset sent up to */
    rtr_buf_t       *buf;      /* chain buffer holding pos (never freed under a reader) */
    bool             waiting;  /* [msg lock] wants RTR_EXT_STREAM when bytes arrive */
    bool             on_wait;  /* on worker->waiters */
    rtr_out_t       *rnext;    /* [msg lock] in msg->readers */
    rtr_out_t       *rprev;    /* [msg lock] in msg->readers */
    rtr_out_t       *wnext;    /* on worker->waiters */
    rtr_out_t       *wprev;    /* on worker->waiters */
    rtr_link_t      *link;     /* its link */
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
    bool         credit_sync; /* IN: credit to reconcile before the next write */
    bool         drain_out;  /* IN: a drain was sent; the sender still has credit (unanswered) */
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
    bool         q2;         /* IN: reading stopped until readers catch up */
    rtr_link_t  *q2_next;    /* IN: on worker->q2_links */
    stats_obj_t  stats;      /* its `link` stats object (made and retired by the core) */
    uint64_t     zero_since; /* uv_now() when its credit was first seen at zero; 0: credit */
    bool         reported_blocked; /* counted in the router's linksBlocked */
};

/* A write the socket could not take at once: the request and its copy of Proton's bytes (at
 * most RTR_WRITE_COPY_MAX; Proton may move its buffer before the write ends).  Allocated for
 * the write and freed by its callback, so a connection whose socket keeps up holds none. */
typedef struct rtr_wreq {
    uv_write_t req;                       /* first member: request <-> rtr_wreq_t cast */
    char       data[RTR_WRITE_COPY_MAX];  /* the bytes in flight */
} rtr_wreq_t;

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
    rtr_wreq_t            *wreq;       /* the write in flight (uv_write), NULL when none */
    size_t                 wlen;       /* its bytes */
    size_t                 out_queued; /* bytes of copies handed to Proton since it last had
                                          nothing framed left to write (RTR_CONN_OUT_MAX) */
    size_t                 in_unanswered; /* bytes read since Proton last had nothing left to
                                             write (RTR_CONN_IN_UNANSWERED_MAX) */
    bool                   writing;    /* a uv_write is in flight */
    bool                   closing;    /* uv_close called */
    bool                   closed;     /* uv_close callback ran */
    bool                   reading;    /* uv_read_start active */
    bool                   dirty;      /* on worker->dirty: process after the inbox */
    bool                   credit_sync; /* some link's credit_sync is set */
    rtr_conn_t            *dirty_next; /* in worker->dirty */
    int                    handles;    /* uv handles not yet closed */
    int                    n_blocked;  /* links with `blocked` set */
    codec_guard_t          guard;      /* checks every byte before Proton sees it */
    stats_obj_t            stats;      /* its `connection` stats object, once opened */
    bool                   strip_in;   /* drop client x-opt-qd.* annotations */
    bool                   strip_out;  /* write no router annotations toward the client */
    uint64_t               handshake_due; /* uv_now() by which the client must have sent
                                             its AMQP open; 0 once it did (or no limit) */
    bool                   close_after_write; /* the handshake timed out or the client's
                                                 input ended: close once written */
    uint32_t               n_in_links; /* links the client sends on (maxSenders) */
    uint32_t               n_out_links; /* links the client receives on (maxReceivers) */
    uint32_t               n_refused;  /* attaches refused so far (RTR_REFUSED_LINKS_MAX) */
    uint32_t               n_q2;       /* links with `q2` set (RTR_CONN_IN_MAX) */
    bool                   counted;    /* counted in g_rtr.n_open_conns */
};

/* rtr_worker_t: one worker thread. */
struct rtr_worker {
    int               index;     /* 0..n-1 */
    uv_loop_t         loop;      /* the worker's loop */
    uv_async_t        wake;      /* core / main thread -> this worker */
    uv_prepare_t      flush;     /* end of each loop iteration: push the batch to the core */
    uv_timer_t        sweep;     /* once a second: zeroCreditSeconds, linksBlocked */
    uv_thread_t       thread;    /* the thread */
    base_mpsc_t       inbox;     /* core_work_t from the core and the main thread */
    base_mpsc_batch_t to_core;   /* actions built this iteration */
    core_t           *core;      /* the core */
    rtr_conn_t       *conns;     /* live connections */
    rtr_conn_t       *dirty;     /* connections touched by inbox work, to process */
    rtr_out_t        *waiters;   /* streamed copies waiting for more bytes */
    rtr_link_t       *q2_links;  /* incoming links stopped by Q2 */
    stats_shard_t    *shard;     /* this thread's stats shard */
    size_t            n_conns;   /* their count */
    size_t            n_ins;     /* rtr_in_t alive (shutdown waits for zero) */
    size_t            n_links;   /* rtr_link_t alive */
    bool              stopping;  /* RTR_EXT_SHUTDOWN seen: no credit, no new connections */
    bool              closing_all; /* in-flight work settled or the grace period is over:
                                      every connection is being closed */
    uv_timer_t        grace;     /* the shutdown grace period */
    size_t            n_outs;    /* rtr_out_t alive (shutdown waits for zero, grace allowing) */
};

/* Process-wide read-mostly state, written on the main thread before the workers start. */
/* The `policy` entity's counters, as plain stats named by rtr_policy_stat_names[]. */
enum {
    RTR_POLICY_PROCESSED = 0, /* connections that reached the maxConnections check */
    RTR_POLICY_CONN_DENIED,   /* refused by maxConnections */
    RTR_POLICY_LINK_DENIED,   /* links refused by maxSenders / maxReceivers */
    RTR_POLICY_SIZE_DENIED,   /* messages refused by maxMessageSize */
    RTR_POLICY_N
};
extern const char *const rtr_policy_stat_names[RTR_POLICY_N];

typedef struct rtr_globals {
    const cfg_t   *cfg;          /* the configuration */
    const char    *router_id;    /* cfg router id */
    char          *node_id;      /* "0/<router id>", used in x-opt-qd.ingress/trace */
    size_t         node_id_len;  /* its length */
    uint8_t       *node_id_enc;  /* node_id encoded as an AMQP str8/str32 (trace element) */
    size_t         node_id_enc_len;
    _Atomic uint64_t next_conn_id; /* connection id counter (any worker) */
    _Atomic uint64_t next_link_id; /* link id counter (any worker) */
    _Atomic uint32_t n_open_conns; /* client connections past their AMQP open (policy
                                      maxConnections; any worker) */
    const core_stats_t *stats;   /* the built-in stat families */
    stats_handle_t policy_stats[RTR_POLICY_N]; /* the policy entity's counters (plain stats
                                      made at start; workers count into their shard) */
    rtr_worker_t  *workers;      /* every worker, for RTR_EXT_STREAM wake-ups */
    int            n_workers;    /* their count */
} rtr_globals_t;
extern rtr_globals_t g_rtr;

/* Pooled records (core/base/pool.h): allocated and freed on any worker, moved between
 * threads in batches. */
BASE_POOL_DECLARE(rtr_in_t);
BASE_POOL_DECLARE(rtr_out_t);
BASE_POOL_DECLARE(rtr_msg_t);
BASE_POOL_DECLARE(rtr_buf_t);

/* connmgr.c: "host:port" of a socket address (thread-safe). */
struct sockaddr_storage;
void rtr_sockaddr_format(const struct sockaddr_storage *ss, char *buf, size_t len);

/* worker.c */
int rtr_worker_init(rtr_worker_t *w, int index, core_t *core);
int rtr_worker_start(rtr_worker_t *w);
void rtr_worker_join(rtr_worker_t *w);
void rtr_worker_fini(rtr_worker_t *w);
void rtr_worker_post_ext(rtr_worker_t *w, int kind, void *ptr, long arg);
core_action_t *rtr_worker_action_WT(rtr_worker_t *w);
void rtr_worker_maybe_exit_WT(rtr_worker_t *w);
/* Shutdown: once nothing is in flight (or the grace period is over), close every
 * connection. */
void rtr_worker_maybe_close_all_WT(rtr_worker_t *w);
/* RTR_EXT_SHUTDOWN: stop granting credit and taking connections; close everything once
 * nothing is in flight, or after grace_ms with what is left released. */
void rtr_worker_shutdown_WT(rtr_worker_t *w, uint64_t grace_ms);

/* conn.c */
/* Serve socket fd as an AMQP connection of listener l; peer NULL = ask the socket. */
void rtr_conn_accept_WT(rtr_worker_t *w, int fd, const cfg_listener_t *l, const char *peer);
void rtr_conn_close_WT(rtr_conn_t *c);
void rtr_conn_work_WT(rtr_worker_t *w, core_work_t *work);
void rtr_conn_process_dirty_WT(rtr_worker_t *w);
/* link_out.c: once a second, every link's credit (creditAvailable), zero-credit time
 * (zeroCreditSeconds) and whether it has been blocked long enough to count in the router's
 * linksBlocked. */
void rtr_conn_sweep_WT(rtr_worker_t *w);
/* link_in.c: shutdown, stop granting credit on every incoming link of the worker (drain). */
void rtr_conn_quiesce_WT(rtr_worker_t *w);
/* link_in.c: shutdown, at the end of the grace period: give RELEASED to every delivery a client sent
 * that is still waiting for its outcome, so its sender may send it elsewhere. */
void rtr_conn_release_all_WT(rtr_worker_t *w);

/* msg.c: thread-safe except where marked _WT (the receiving worker) */
rtr_msg_t *rtr_msg_new(void);
void rtr_msg_unref(rtr_msg_t *m);
/* Head: make room for `more` bytes. Receiving worker, before routing. */
void rtr_msg_reserve(rtr_msg_t *m, size_t more);
/* Switch a partly received message to streaming (before CORE_A_DELIVER). */
void rtr_msg_stream_start_WT(rtr_msg_t *m, int owner);
/* Receiving worker: read everything Proton holds for d into the chain, unless Q2 says stop.
 * Returns true when reading stopped on Q2.  Wakes waiting readers. */
bool rtr_msg_stream_recv_WT(rtr_msg_t *m, pn_link_t *pl, pn_delivery_t *d);
/* Receiving worker: the last byte arrived, or the sender aborted. Wakes waiting readers. */
void rtr_msg_stream_end_WT(rtr_msg_t *m, bool aborted);
/* Readers (any worker): register / deregister a copy; o NULL deregisters a copy that could
 * not register (its link was gone), so the receiving worker stops waiting for it. */
void rtr_msg_reader_add(rtr_msg_t *m, rtr_out_t *o);
void rtr_msg_reader_del(rtr_msg_t *m, rtr_out_t *o);
/* Reader: the next bytes for o at o->pos (up to max), or len 0 when none are there yet;
 * *complete / *aborted report the message's state. */
codec_bytes_t rtr_msg_reader_peek(rtr_msg_t *m, rtr_out_t *o, size_t max, bool *complete,
                                  bool *aborted);
/* Reader: o sent n more bytes; returns true if o must wait (no more bytes yet, and it asked
 * to be woken). Frees nothing (the receiving worker frees). Wakes the owner on Q2 low. */
void rtr_msg_reader_advance(rtr_msg_t *m, rtr_out_t *o, size_t n);
bool rtr_msg_reader_wait(rtr_msg_t *m, rtr_out_t *o);

#endif
