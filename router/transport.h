/* router/transport.h: a connection's transport, the lowest of its layers (router/DESIGN.md
 * "A connection's layers"): the socket, the frame guard, the Proton connection driver's
 * bytes, the per-connection byte budgets, and the records' lifetimes: it defines the
 * connection and link records every layer above reads.  Above ctx.h; included by the
 * link layers (link_out.h, link_in.h) and so by conn.h; it includes nothing of theirs.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_TRANSPORT_H
#define JUNCTION_ROUTER_TRANSPORT_H

#include "router/ctx.h"

#include "codec/frame.h"
#include "router/zin.h"

#include <proton/connection_driver.h>

/* The per-connection budget: what one client can make the router hold.
 * RTR_CONN_OUT_MAX: bytes of outgoing copies handed to Proton and not yet taken by the socket,
 * all sessions together; past it the connection's links stop until the client reads.
 * RTR_CONN_IN_UNANSWERED_MAX: bytes read from a client while Proton still holds output for
 * it; past it the router stops reading it until it has read what the router wrote.
 * RTR_WRITE_COPY_MAX: the most copied out of Proton's buffer for a write the socket could not
 * take at once (one write in flight per connection).
 * RTR_CONN_IN_MAX: bytes of incoming transfers held unread for the connection's links: on a
 * plain connection the payloads queued beside Proton (router/zin.h), all links together; on a
 * TLS connection what Proton holds for links stopped by Q2, all sessions together; past it
 * the router stops reading the client (also the largest incoming window of one session).
 * The frame guard and Proton's input buffer hold at most one frame each (maxFrameSize, itself
 * capped by the configuration at CFG_MAX_FRAME_SIZE_MAX). */
#define RTR_CONN_OUT_MAX           (1u << 20)
#define RTR_CONN_IN_UNANSWERED_MAX (1u << 20)
#define RTR_WRITE_COPY_MAX         (64u << 10)
#define RTR_CONN_IN_MAX            (8u << 20)
/* TLS: one socket read (a TLS record and its header fit). */
#define RTR_TLS_READ               (17u << 10)

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
    uint32_t     drain_left; /* IN: credit a drain asked back that the sender has neither given
                                back nor used yet (link_in.c: not counted in the window) */
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
    uint32_t     al_id;      /* an autoLink's link (link_auto.c): the autoLink, else 0 */
    uint32_t     al_gen;     /* its activation */
    bool         overrun_logged; /* IN, autoLink or link route: its peer's transfers beyond
                                    credit logged */
    bool         credit_given; /* IN: the router granted it credit once (a broker's transfers
                                  beyond credit are taken only then: link_in.c) */
    struct rtr_lr_end *lr;  /* a link-routed link's end (router/linkroute.c), or NULL */
    unsigned     quirks;     /* a link the router attached on a route container's connection:
                                what its peer cannot take (RTR_QUIRK_*, router/peer_quirks.h) */
    uint32_t     revoked;    /* IN, RTR_QUIRK_NO_DRAIN or an autoLink's: credit taken back by
                                lowering it, which transfers already on their way may use */
    bool         lr_paused;  /* link-routed, receiving: its bytes wait in Proton until the
                                other end caught up (counts as q2 for RTR_CONN_IN_MAX) */
    /* zero-copy output (router/zc_out.h) */
    struct rtr_zc_fifo *zc;  /* OUT: its FIFO record (made with the link, so that its attach
                                frame binds it), NULL once gone or on a TLS connection */
    bool         zc_decided; /* OUT: the mode was chosen (at its first pump) */
    bool         zc_on;      /* OUT: placeholder mode; false: the old path */
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
    const cfg_listener_t  *listener;   /* how it was accepted (a connector's: its settings) */
    struct rtr_connector  *connector;  /* the connector it was made for (router/connector.h),
                                          or NULL: accepted */
    bool                   peer_opened; /* a connector's: the peer's open came */
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
    bool                   idle_held;  /* not read: Proton's local idle timeout is off (the
                                          peer's bytes wait unread, rtr_transport_arm_WT) */
    uint64_t               idle_resumed; /* uv_now() when reading started again while held
                                            (0: not yet) */
    uint64_t               idle_frames; /* pn_transport_get_frames_input() then */
    int64_t                tick_due;   /* the deadline Proton's last tick returned (0: none) */
    bool                   read_since_tick; /* bytes read since that tick */
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
    bool                   counted;    /* counted in its context's n_open_conns */
    /* TLS (router/tls.h), on a listener with an sslProfile */
    struct rtr_tls_conn   *tls;        /* the session, or NULL: plain */
    bool                   tls_detect; /* no requireSsl: the first byte decides TLS or plain */
    bool                   tls_stalled; /* plaintext may wait in the session: Proton's input
                                           buffer or the budget stopped taking it */
    bool                   tls_eof;    /* the client's input ended: once the session has
                                          given Proton everything, Proton's input ends */
    bool                   end_logged; /* the line that says why the connection ends is
                                          out (the transport refused the client before
                                          Proton saw a byte; a TLS or authentication failure
                                          or a bad protocol header, router/lstats.h):
                                          Proton's own line for that end would repeat it */
    bool                   lr_drain_due; /* a link-routed link's drain answer waits for its
                                            queued transfers (rtr_lr_conn_written_WT) */
    uint32_t               n_lr_paused; /* links with `lr_paused` set (RTR_CONN_IN_MAX) */
    uint32_t               n_lr_backlog; /* link-routed links whose messages wait for the
                                            output budget (rtr_lr_conn_written_WT) */
    char                  *ws_tls;     /* a WebSocket of an https listener: the `tls` label of
                                          its TLS session (libwebsockets'), heap; else NULL */
    bool                   route_announced; /* told the core it opened (link_auto.c) */
    struct rtr_ir         *ir;         /* an inter-router connection's layer (irconn.c), or
                                          NULL */
    struct rtr_edge       *edge;       /* an edge router's connection to an interior
                                          (edgeconn.c), or NULL */
    struct rtr_pconn      *pconn;      /* vhost policy: what its open was admitted with
                                          (router/policy.h), or NULL: not under vhost policy */
    uint32_t               n_sessions; /* sessions the client began and has not ended */
    uint64_t               max_message_size; /* maxMessageSize: the listener's, or the vhost
                                                group's once admitted; 0 = none */
    /* zero-copy input (router/zin.h) */
    rtr_zin_t              zin;        /* read buffers and payload queues (split mode) */
    /* zero-copy output (router/zc_out.h) */
    struct rtr_zc_conn    *zc;         /* the writer that splices shares in (to the socket,
                                          or to a TLS connection's session) */
};

/* Log lines of a connection (LOGC) and of a link (LOGL), prefixed with qdrouterd's ids. */
#define LOGC(c, lvl, ...)                                                                          \
    do {                                                                                           \
        if (base_log_enabled(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl))                                 \
            rtr_log_ids(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, (c)->id, 0, __VA_ARGS__);             \
    } while (0)
#define LOGL(k, lvl, ...)                                                                          \
    do {                                                                                           \
        if (base_log_enabled(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl))                                 \
            rtr_log_ids(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl, (k)->conn->id, (k)->id, __VA_ARGS__); \
    } while (0)

/* One log line prefixed with qdrouterd's [C<conn>][L<link>] ids (link 0: none).
 * Thread-safe. */
void rtr_log_ids(base_log_module_t mod, base_log_level_t lvl, uint64_t conn, uint64_t link,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A worker counts into its own shard (w->shard) with stats_obj_add(), stats_obj_set() and
 * stats_obj_gauge_add(): any object may be written without a check, one without stats (not
 * attached yet: none; no room in the registry: a sink) writes into the sink (stats/stats.h
 * "The sink rule"). */

/* Put c on its worker's dirty list: processed once the worker's inbox is done. */
void rtr_conn_mark_dirty_WT(rtr_conn_t *c);
/* Free c (its handles closed and its last link gone); the worker may exit after it. */
void rtr_conn_free_WT(rtr_conn_t *c);
/* Free link record k; frees its connection too when that is closed and k was its last. */
void rtr_link_unlink_WT(rtr_link_t *k);

/* The one way the router ends a connection or a link with an AMQP error: set the endpoint's
 * local condition to `name` and `desc` (NULL: an empty description), and close it (the
 * frames go out with the next write).  Logging stays with the caller, whose line says why.
 * pc or pl must belong to a connection of the calling worker. */
void rtr_pn_conn_close_error_WT(pn_connection_t *pc, const char *name, const char *desc);
void rtr_pn_link_close_error_WT(pn_link_t *pl, const char *name, const char *desc);
/* Only set connection pc's local condition, for a close that follows through
 * rtr_conn_close_WT() (which keeps a condition already set).  The calling worker's
 * connections only. */
void rtr_pn_conn_set_error_WT(pn_connection_t *pc, const char *name, const char *desc);

/* Set up c's socket (fd, a TCP socket or a WebSocket's socketpair end; peer non-NULL for
 * the latter), its timer, its Proton transport and driver and its frame guard.  Returns
 * false when the socket cannot be taken (fd closed, c's handles closing). */
bool rtr_transport_open_WT(rtr_conn_t *c, int fd, bool websocket);
/* Write what Proton framed (uv_try_write, then one uv_write of a copy when the socket is
 * full; on a plain connection with the outgoing copies' payloads spliced in beside Proton,
 * router/zc_out.h); resets the budgets once the client took everything. */
void rtr_conn_write_WT(rtr_conn_t *c);
/* initialHandshakeTimeoutSeconds ran out: close with an error once written. */
void rtr_conn_handshake_expired_WT(rtr_conn_t *c);
/* A protocol error found above Proton that Proton cannot end with a plain close (the
 * close would wait behind the peer's errant frames, link_in.c): the connection ends at the
 * transport with error `name`/`desc` (Proton's close frame goes out when it can), no more
 * input is read, and the connection's one line is the transport error's (conn.c). */
void rtr_conn_protocol_error_WT(rtr_conn_t *c, const char *name, const char *desc);
/* The connection's `tls` stats label: "<protocol> <cipher> <bits>" ("TLSv1.3
 * TLS_AES_256_GCM_SHA384 256"), or "" when plain (management's isEncrypted, ssl, sslProto,
 * sslCipher, sslSsf). */
void rtr_transport_tls_label_WT(const rtr_conn_t *c, char *buf, size_t len);
/* Proton's tick at `now` (uv_now), or not yet: a tick past Proton's deadline with nothing
 * read since the last one while the peer's bytes wait in the socket could judge the peer
 * idle on input the router has not read.  libuv runs timers and other connections' callbacks
 * before it polls for input, so after a long pass of the worker's loop (a large message
 * written out on a loaded machine) heartbeats waited unread while the idle timeout closed
 * the connection.  Then the tick waits 1 ms, for the poll to read them.  Returns the
 * deadline to arm the timer for (0: none). */
int64_t rtr_transport_tick_WT(rtr_conn_t *c, uint64_t now);
/* After a round of processing: read the client or stop reading it, by the input budgets,
 * and arm the timer for Proton's deadline (0: none) or the handshake's. */
void rtr_transport_arm_WT(rtr_conn_t *c, int64_t deadline);

/* Close c's socket and timer (once; Proton's last bytes are the caller's to have written).
 * When both closed, the layers above let go of Proton's objects (rtr_conn_closed_WT), the
 * driver is destroyed and c is freed, or once its last link is (rtr_link_unlink_WT). */
void rtr_transport_close_WT(rtr_conn_t *c);

/* Provided by conn.c, the layer above, and called back by the transport (as a libuv stream
 * calls its owner's read callback).  rtr_conn_process_WT, from the socket and timer
 * callbacks: run Proton's events, the links and the writes of c.  rtr_conn_closed_WT, once
 * c's handles closed: forget every link's Proton objects before the driver goes. */
void rtr_conn_process_WT(rtr_conn_t *c);
void rtr_conn_closed_WT(rtr_conn_t *c);

#endif
