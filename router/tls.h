/* router/tls.h: TLS below the frame guard (docs/decisions/0005): one OpenSSL context per
 * sslProfile, made and checked at start-up, and one TLS session per connection whose bytes
 * go through memory BIOs - the transport (transport.c) gives it the socket's bytes and takes
 * the plaintext for the frame guard, and gives it Proton's output and takes the records for
 * the socket.
 *
 * Threads:
 *  - rtr_tls_new/free on the main thread (start-up, end: after the workers and the agent).
 *  - The set of profiles is shared: the workers read it (rtr_tls_conn_new_WT), management
 *    changes it at run time from the agent thread or the admin thread (rtr_tls_profile_*,
 *    thread-safe).  One mutex guards the set; it is held only to look a profile up and take
 *    a reference to its context, to swap a context in, or to copy the attributes - never
 *    while a file is read or a context is built (that happens before the lock is taken), so
 *    a worker making a session never waits on a disk.
 *  - A context is immutable once built (OpenSSL's SSL_CTX is safe to share so).  An UPDATE
 *    builds a new one and swaps it in; every session keeps its own reference to the context
 *    it was made from (SSL_new), so the connections that have one go on untouched and the
 *    old context is freed with the last of them.
 *  - An https listener's context is a copy (rtr_tls_profile_copy) that the HTTP server
 *    copies again after an UPDATE: rtr_tls_watch calls its one watcher (under the lock)
 *    after each, and rtr_tls_profile_gen says which listeners are behind.
 *  - An rtr_tls_conn_t is its connection's worker's only (_WT).
 */
#ifndef JUNCTION_ROUTER_TLS_H
#define JUNCTION_ROUTER_TLS_H

#include "config/config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rtr_tls      rtr_tls_t;
typedef struct rtr_tls_conn rtr_tls_conn_t;

/* Ciphertext one connection may hold unread by TLS before the socket is not read. */
#define RTR_TLS_IN_MAX (64u << 10)

/* Build the context of every sslProfile of cfg: certificate, key (with the password resolved
 * as qdrouterd does), CA list, ciphers and protocols, each checked; a profile that an
 * authServicePlugin or a connector names gets a client context too.  Returns NULL with one line
 * in err naming the profile, the file and what is wrong.  A cfg without profiles gives an
 * empty (non-NULL) set. */
rtr_tls_t *rtr_tls_new(const cfg_t *cfg, char *err, size_t errlen);
void       rtr_tls_free(rtr_tls_t *tls);

/* ---- run-time changes (management); every one is thread-safe ----
 * The ones that take a profile build its context first, with the checks of rtr_tls_new (the
 * same code), outside the lock; a failure leaves the set as it was and writes one line in
 * err naming the profile, the file and what is wrong. */

/* A new profile p (copied).  0, -EINVAL (a file, the password, ciphers or protocols: err),
 * or -EEXIST (a profile of that name exists). */
int rtr_tls_profile_add(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen);
/* Replace profile p->name's attributes with p's (copied) and its context with one built from
 * them: new sessions use it at once, existing ones keep theirs.  0, -EINVAL (the old context
 * stays in force), or -ENOENT. */
int rtr_tls_profile_update(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen);
/* Remove profile `name`: 0, -ENOENT, or -EBUSY while a listener holds it (err says so). */
int rtr_tls_profile_del(rtr_tls_t *tls, const char *name, char *err, size_t errlen);
/* A listener names profile `name` (0), or there is none (-ENOENT); release when it goes.
 * rtr_tls_new counts the configured listeners itself. */
int  rtr_tls_profile_hold(rtr_tls_t *tls, const char *name);
void rtr_tls_profile_release(rtr_tls_t *tls, const char *name);
/* A connector made at run time names profile `name` (0) until it goes (release_client): the
 * profile gets a client context first if it had none.  -ENOENT (no such profile) or -EINVAL
 * (the client context cannot be built), with one line in err.  rtr_tls_new counts the
 * configured connectors itself. */
int  rtr_tls_profile_hold_client(rtr_tls_t *tls, const char *name, char *err, size_t errlen);
void rtr_tls_profile_release_client(rtr_tls_t *tls, const char *name);
/* How many UPDATEs profile `name` had (0 for none, or no such profile): a user of a copy of
 * its context (rtr_tls_profile_copy) reads it before copying and copies again once it grew. */
unsigned long rtr_tls_profile_gen(const rtr_tls_t *tls, const char *name);
/* Call fn(arg) after each successful UPDATE (NULL: no more; one watcher at a time).  fn runs
 * on the updating thread with the set's lock held, so it must only wake its owner (a
 * uv_async_send); once rtr_tls_watch(tls, NULL, NULL) returned, fn is not running and is not
 * called again. */
void rtr_tls_watch(rtr_tls_t *tls, void (*fn)(void *arg), void *arg);
/* Copies of every profile's attributes (as written: the password too), in order; *n of them.
 * Free with rtr_tls_profiles_list_free(). */
cfg_ssl_profile_t *rtr_tls_profiles_list(rtr_tls_t *tls, size_t *n);
void               rtr_tls_profiles_list_free(cfg_ssl_profile_t *v, size_t n);
/* Management's view of the set (router/mgmt/mgmt.h's mgmt_tls_t) over these calls; tls
 * must outlive every user of *out. */
struct mgmt_tls;
void rtr_tls_mgmt(rtr_tls_t *tls, struct mgmt_tls *out);

/* A new server session with the current context of the profile named `profile`; NULL when
 * there is no such profile (any more) or OpenSSL has no memory.  Takes the set's lock briefly. */
rtr_tls_conn_t *rtr_tls_conn_new_WT(const rtr_tls_t *tls, const char *profile);
void            rtr_tls_conn_free_WT(rtr_tls_conn_t *t);

/* A new client session of the profile named `profile` (an authServicePlugin's, whose client
 * context rtr_tls_new made) to the server `host` (for SNI, and checked against its certificate
 * when the profile has no caCertFile); its ClientHello already waits for the socket.  NULL
 * when the profile has no client context. */
rtr_tls_conn_t *rtr_tls_client_new_WT(const rtr_tls_t *tls, const char *profile,
                                      const char *host);

/* A connector's client session (router/connector.h): as rtr_tls_client_new_WT, but the
 * server's certificate (verified against the system's CAs and the profile's caCertFile) must
 * name `host` exactly when verify_host (its verifyHostname), whatever the caCertFile. */
rtr_tls_conn_t *rtr_tls_connector_new_WT(const rtr_tls_t *tls, const char *profile,
                                         const char *host, bool verify_host);

/* Socket bytes in (copied into the session). */
void rtr_tls_put_cipher_WT(rtr_tls_conn_t *t, const void *p, size_t n);
/* Ciphertext held, not yet decrypted (for the input budget). */
size_t rtr_tls_cipher_in_WT(const rtr_tls_conn_t *t);
/* Plaintext out into buf[cap]: > 0 bytes, 0 when it needs more ciphertext, -1 when the peer
 * closed TLS (close_notify), -2 on a failure (why: a line for the log). */
long rtr_tls_read_WT(rtr_tls_conn_t *t, void *buf, size_t cap, const char **why);
/* True once the handshake is done (plaintext may be written). */
bool rtr_tls_ready_WT(const rtr_tls_conn_t *t);
/* Encrypt up to n bytes of p: returns bytes taken (> 0) or -1. */
long rtr_tls_write_WT(rtr_tls_conn_t *t, const void *p, size_t n);
/* Records waiting for the socket, and taking up to cap of them into buf. */
size_t rtr_tls_cipher_out_WT(const rtr_tls_conn_t *t);
size_t rtr_tls_take_cipher_WT(rtr_tls_conn_t *t, void *buf, size_t cap);
/* Queue a close_notify (once). */
void rtr_tls_shutdown_WT(rtr_tls_conn_t *t);
/* The session's protocol ("TLSv1.3"), cipher, and cipher bits (0 before the handshake). */
/* Ask the client for a certificate that the profile's CAs signed (the listener offers
 * EXTERNAL): a client without one fails the handshake.  Before the handshake starts. */
void rtr_tls_conn_ask_cert_WT(rtr_tls_conn_t *t);
/* True once the handshake is done with a client certificate that verified. */
bool rtr_tls_peer_verified_WT(const rtr_tls_conn_t *t);
/* The user that the client's verified certificate names, by the profile's uidFormat and
 * uidNameMappingFile (tls_uid.h): a new string the caller frees, or NULL without one. */
char *rtr_tls_peer_user_WT(const rtr_tls_conn_t *t);
const char *rtr_tls_proto_WT(const rtr_tls_conn_t *t);
const char *rtr_tls_cipher_WT(const rtr_tls_conn_t *t);
int         rtr_tls_ssf_WT(const rtr_tls_conn_t *t);

/* struct ssl_ctx_st is OpenSSL's SSL_CTX (this header does not include OpenSSL's). */
struct ssl_ctx_st;

/* Give `dst`, a server context another TLS server made (libwebsockets' for an https
 * listener), what profile `profile`'s checked context has: the certificate with its chain,
 * the key (already decrypted: no password is needed again), the trusted CAs, the cipher lists
 * and the protocol range.  Returns 0, or -1 with one line in err.  Thread-safe (the profile's
 * current context is read with a reference of its own; a later UPDATE does not reach dst by
 * itself: rtr_tls_watch says when to copy again). */
int rtr_tls_profile_copy(const rtr_tls_t *tls, const char *profile, struct ssl_ctx_st *dst,
                         char *err, size_t errlen);

#endif
