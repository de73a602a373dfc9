/* router/tls.h: TLS below the frame guard (docs/decisions/0005): one OpenSSL context per
 * sslProfile, made and checked at start-up, and one TLS session per connection whose bytes
 * go through memory BIOs - the transport (transport.c) gives it the socket's bytes and takes
 * the plaintext for the frame guard, and gives it Proton's output and takes the records for
 * the socket.
 *
 * Threads: rtr_tls_new/free on the main thread (start-up, end); a profile's context is then
 * read-only and shared by the workers (OpenSSL's SSL_CTX is safe for that); an rtr_tls_conn_t
 * is its connection's worker's only (_WT).
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
 * authServicePlugin names gets a client context too.  Returns NULL with one line
 * in err naming the profile, the file and what is wrong.  A cfg without profiles gives an
 * empty (non-NULL) set. */
rtr_tls_t *rtr_tls_new(const cfg_t *cfg, char *err, size_t errlen);
void       rtr_tls_free(rtr_tls_t *tls);

/* A new server session of the profile named `profile` (which the load checked exists). */
rtr_tls_conn_t *rtr_tls_conn_new_WT(const rtr_tls_t *tls, const char *profile);
void            rtr_tls_conn_free_WT(rtr_tls_conn_t *t);

/* A new client session of the profile named `profile` (an authServicePlugin's, whose client
 * context rtr_tls_new made) to the server `host` (for SNI, and checked against its certificate
 * when the profile has no caCertFile); its ClientHello already waits for the socket.  NULL
 * when the profile has no client context. */
rtr_tls_conn_t *rtr_tls_client_new_WT(const rtr_tls_t *tls, const char *profile,
                                      const char *host);

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
 * context is only read). */
int rtr_tls_profile_copy(const rtr_tls_t *tls, const char *profile, struct ssl_ctx_st *dst,
                         char *err, size_t errlen);

#endif
