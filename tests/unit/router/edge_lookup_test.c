/* tests/unit/router/edge_lookup_test.c: the address lookup messages (router/edge_lookup.c,
 * qdrouterd 1.19's `_$qd.addr_lookup`): requests and replies made and read back, their
 * sections as qdrouterd writes them, every way a request or a reply can be wrong (each with
 * qdrouterd's status), and every truncation of a good message read as a bad one. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "router/edge_lookup.h"

#include <proton/codec.h>
#include <proton/message.h>
#include <stdlib.h>
#include <string.h>

/* A request built with Proton from parts, any of which may be left out or changed. */
typedef struct parts {
    bool        props;     /* application properties present */
    int64_t     version;   /* < 0: no version key */
    int64_t     opcode;    /* < 0: no opcode key */
    bool        list_body; /* the body is a list (else a string) */
    int         body_n;    /* items of the list: address, then the bool */
    const char *reply_to;  /* or NULL */
    const char *cid;       /* or NULL */
} parts_t;

static uint8_t *build(const parts_t *p, size_t *len)
{
    pn_message_t *m = pn_message();
    if (p->reply_to)
        pn_message_set_reply_to(m, p->reply_to);
    if (p->cid) {
        pn_atom_t id = {.type = PN_STRING};
        id.u.as_bytes = pn_bytes(strlen(p->cid), p->cid);
        pn_message_set_correlation_id(m, id);
    }
    if (p->props) {
        pn_data_t *d = pn_message_properties(m);
        pn_data_put_map(d);
        pn_data_enter(d);
        if (p->version >= 0) {
            pn_data_put_string(d, pn_bytes(7, "version"));
            pn_data_put_long(d, p->version);
        }
        if (p->opcode >= 0) {
            pn_data_put_string(d, pn_bytes(6, "opcode"));
            pn_data_put_ubyte(d, (uint8_t)p->opcode);
        }
        pn_data_exit(d);
    }
    pn_data_t *b = pn_message_body(m);
    if (p->list_body) {
        pn_data_put_list(b);
        pn_data_enter(b);
        if (p->body_n > 0)
            pn_data_put_symbol(b, pn_bytes(5, "a.b.c"));
        if (p->body_n > 1)
            pn_data_put_bool(b, false);
        pn_data_exit(b);
    } else {
        pn_data_put_string(b, pn_bytes(5, "a.b.c"));
    }
    size_t   cap = 1024;
    uint8_t *buf = malloc(cap);
    assert_int_equal(pn_message_encode(m, (char *)buf, &cap), 0);
    pn_message_free(m);
    *len = cap;
    return buf;
}

static const parts_t GOOD = {true, 1, 1, true, 2, "amqp:/_topo/0/I/temp.x", "c-1"};

static rtr_elk_status_t decode_parts(const parts_t *p)
{
    size_t           len;
    uint8_t         *buf = build(p, &len);
    rtr_elk_req_t    q;
    const char      *why = NULL;
    rtr_elk_status_t st = rtr_elk_request_decode(buf, len, &q, &why);
    if (st == RTR_ELK_OK) {
        assert_non_null(q.msg);
        pn_message_free(q.msg);
    } else {
        assert_null(q.msg);
        assert_non_null(why);
    }
    free(buf);
    return st;
}

static void request_round_trip(void **state)
{
    (void)state;
    for (int recv = 0; recv < 2; recv++) {
        size_t   len = 0;
        uint8_t *buf =
            rtr_elk_request_encode("queue.x/y", recv, "amqp:/_topo/0/I/temp.q", "elk-1", &len);
        assert_non_null(buf);
        rtr_elk_req_t q;
        const char   *why = "x";
        assert_int_equal(rtr_elk_request_decode(buf, len, &q, &why), RTR_ELK_OK);
        assert_null(why);
        assert_int_equal(q.address.size, 9);
        assert_memory_equal(q.address.start, "queue.x/y", 9);
        assert_int_equal(q.receiver, recv);
        assert_string_equal(pn_message_get_reply_to(q.msg), "amqp:/_topo/0/I/temp.q");
        /* qdrouterd's sections: string keys, uint values, an amqp-value list [string, bool] */
        pn_data_t *d = pn_message_properties(q.msg);
        pn_data_rewind(d);
        assert_true(pn_data_next(d));
        assert_int_equal(pn_data_type(d), PN_MAP);
        assert_int_equal(pn_data_get_map(d), 4);
        pn_data_enter(d);
        const char *keys[] = {"version", "opcode"};
        for (int i = 0; i < 2; i++) {
            assert_true(pn_data_next(d));
            assert_int_equal(pn_data_type(d), PN_STRING);
            assert_memory_equal(pn_data_get_string(d).start, keys[i], strlen(keys[i]));
            assert_true(pn_data_next(d));
            assert_int_equal(pn_data_type(d), PN_UINT);
            assert_int_equal(pn_data_get_uint(d), 1);
        }
        pn_msgid_t id = pn_message_get_correlation_id(q.msg);
        assert_int_equal(id.type, PN_STRING);
        assert_memory_equal(id.u.as_bytes.start, "elk-1", 5);
        pn_message_free(q.msg);
        free(buf);
    }
}

static void request_errors(void **state)
{
    (void)state;
    parts_t p = GOOD;
    assert_int_equal(decode_parts(&p), RTR_ELK_OK); /* a long version, a ubyte opcode, a symbol */
    p = GOOD;
    p.props = false;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
    p = GOOD;
    p.version = -1;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
    p = GOOD;
    p.version = 2;
    assert_int_equal(decode_parts(&p), RTR_ELK_BAD_VERSION);
    p = GOOD;
    p.opcode = -1;
    assert_int_equal(decode_parts(&p), RTR_ELK_BAD_OPCODE);
    p = GOOD;
    p.opcode = 7;
    assert_int_equal(decode_parts(&p), RTR_ELK_BAD_OPCODE);
    p = GOOD;
    p.list_body = false;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
    p = GOOD;
    p.body_n = 1;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
    p = GOOD;
    p.reply_to = NULL;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
    p = GOOD;
    p.cid = NULL;
    assert_int_equal(decode_parts(&p), RTR_ELK_INVALID);
}

static void request_truncated(void **state)
{
    (void)state;
    size_t   len = 0;
    uint8_t *buf = rtr_elk_request_encode("a", true, "r", "c", &len);
    for (size_t n = 0; n < len; n++) {
        /* at the end of its own allocation, so that a read past it is seen by ASan */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        rtr_elk_req_t    q;
        const char      *why = NULL;
        rtr_elk_status_t st = rtr_elk_request_decode(cut, n, &q, &why);
        if (st == RTR_ELK_OK)
            pn_message_free(q.msg); /* a cut between sections can still be a request */
        else
            assert_null(q.msg);
        free(cut);
    }
    uint8_t       junk[] = {0x00, 0x53, 0x74, 0xd1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    rtr_elk_req_t q;
    const char   *why = NULL;
    assert_int_equal(rtr_elk_request_decode(junk, sizeof(junk), &q, &why), RTR_ELK_INVALID);
    free(buf);
}

static void reply_round_trip(void **state)
{
    (void)state;
    size_t   len = 0;
    uint8_t *req =
        rtr_elk_request_encode("a.b", false, "amqp:/_edge/E/temp.r", "elk-00000000002a", &len);
    rtr_elk_req_t q;
    const char   *why;
    assert_int_equal(rtr_elk_request_decode(req, len, &q, &why), RTR_ELK_OK);
    struct {
        rtr_elk_status_t st;
        bool             lr, dest;
    } cases[] = {
        {RTR_ELK_OK, true, true}, {RTR_ELK_OK, true, false}, {RTR_ELK_NOT_FOUND, false, false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t   rlen = 0;
        uint8_t *rep = rtr_elk_reply_encode(q.msg, cases[i].st, cases[i].lr, cases[i].dest, &rlen);
        assert_non_null(rep);
        /* addressed to the request's reply-to */
        pn_message_t *m = pn_message();
        assert_int_equal(pn_message_decode(m, (const char *)rep, rlen), 0);
        assert_string_equal(pn_message_get_address(m), "amqp:/_edge/E/temp.r");
        pn_message_free(m);
        char *cid = NULL;
        bool  lr = !cases[i].lr, dest = !cases[i].dest;
        assert_int_equal(rtr_elk_reply_decode(rep, rlen, &cid, &lr, &dest), (int)cases[i].st);
        assert_string_equal(cid, "elk-00000000002a");
        if (cases[i].st == RTR_ELK_OK) {
            assert_int_equal(lr, cases[i].lr);
            assert_int_equal(dest, cases[i].dest);
        }
        free(cid);
        /* every truncation is no reply, or (cut between sections) the same status */
        for (size_t n = 0; n < rlen; n++) {
            uint8_t *cut = malloc(n ? n : 1);
            memcpy(cut, rep, n);
            char *c2 = NULL;
            int   st = rtr_elk_reply_decode(cut, n, &c2, &lr, &dest);
            assert_true(st == -1 || st == (int)cases[i].st);
            assert_true(st >= 0 || c2 == NULL);
            free(c2);
            free(cut);
        }
        free(rep);
    }
    pn_message_free(q.msg);
    free(req);
}

/* A reply built with Proton: status (< 0: none), body items (bools), correlation-id kind. */
static int reply_parts(int64_t status, int body_n, bool string_cid)
{
    pn_message_t *m = pn_message();
    pn_atom_t     id;
    if (string_cid) {
        id.type = PN_STRING;
        id.u.as_bytes = pn_bytes(3, "c-9");
    } else {
        id.type = PN_ULONG;
        id.u.as_ulong = 9;
    }
    pn_message_set_correlation_id(m, id);
    pn_data_t *d = pn_message_properties(m);
    pn_data_put_map(d);
    pn_data_enter(d);
    if (status >= 0) {
        pn_data_put_string(d, pn_bytes(6, "status"));
        pn_data_put_int(d, (int32_t)status);
    }
    pn_data_exit(d);
    pn_data_t *b = pn_message_body(m);
    pn_data_put_list(b);
    pn_data_enter(b);
    for (int i = 0; i < body_n; i++)
        pn_data_put_bool(b, true);
    pn_data_exit(b);
    char   buf[512];
    size_t len = sizeof(buf);
    assert_int_equal(pn_message_encode(m, buf, &len), 0);
    pn_message_free(m);
    char *cid = NULL;
    bool  lr, dest;
    int   st = rtr_elk_reply_decode((const uint8_t *)buf, len, &cid, &lr, &dest);
    if (st >= 0)
        assert_string_equal(cid, "c-9");
    else
        assert_null(cid);
    free(cid);
    return st;
}

static void reply_errors(void **state)
{
    (void)state;
    assert_int_equal(reply_parts(0, 2, true), 0);
    assert_int_equal(reply_parts(3, 0, true), 3);   /* NOT_FOUND needs no body */
    assert_int_equal(reply_parts(-1, 2, true), -1); /* no status */
    assert_int_equal(reply_parts(0, 1, true), -1);  /* OK with a short body */
    assert_int_equal(reply_parts(0, 2, false), -1); /* not a string correlation-id */
    assert_int_equal(reply_parts(9, 2, true), -1);  /* no such status */
}

/* What a qdrouterd 1.19 edge and interior exchanged (a frame trace): the request for a sender
 * to `elr.x` (router annotations included) and the interior's reply (a link route without
 * destinations), then the request for `other.x` and its reply (NOT_FOUND). */
static const uint8_t QDR_REQ[] = {
    0x00, 0x53, 0x70, 0xd0, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x42, 0x00, 0x53, 0x72,
    0xc1, 0x30, 0x04, 0xa3, 0x10, 0x78, 0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e, 0x69, 0x6e,
    0x67, 0x72, 0x65, 0x73, 0x73, 0xa1, 0x03, 0x30, 0x2f, 0x45, 0xa3, 0x0e, 0x78, 0x2d, 0x6f, 0x70,
    0x74, 0x2d, 0x71, 0x64, 0x2e, 0x74, 0x72, 0x61, 0x63, 0x65, 0xc0, 0x06, 0x01, 0xa1, 0x03, 0x30,
    0x2f, 0x45, 0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x4f, 0x00, 0x00, 0x00, 0x06, 0x40, 0x40,
    0x40, 0x40, 0xa1, 0x24, 0x61, 0x6d, 0x71, 0x70, 0x3a, 0x2f, 0x5f, 0x74, 0x6f, 0x70, 0x6f, 0x2f,
    0x30, 0x2f, 0x49, 0x2f, 0x74, 0x65, 0x6d, 0x70, 0x2e, 0x41, 0x44, 0x32, 0x42, 0x71, 0x38, 0x45,
    0x47, 0x30, 0x78, 0x4b, 0x6a, 0x46, 0x6b, 0x63, 0xa1, 0x1f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x36, 0x62, 0x30, 0x66, 0x62, 0x66, 0x34,
    0x65, 0x33, 0x38, 0x33, 0x35, 0x61, 0x34, 0x37, 0x64, 0x00, 0x53, 0x74, 0xd1, 0x00, 0x00, 0x00,
    0x19, 0x00, 0x00, 0x00, 0x04, 0xa1, 0x07, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x01,
    0xa1, 0x06, 0x6f, 0x70, 0x63, 0x6f, 0x64, 0x65, 0x52, 0x01, 0x00, 0x53, 0x77, 0xd0, 0x00, 0x00,
    0x00, 0x0c, 0x00, 0x00, 0x00, 0x02, 0xa1, 0x05, 0x65, 0x6c, 0x72, 0x2e, 0x78, 0x41,
};
static const uint8_t QDR_REP[] = {
    0x00, 0x53, 0x70, 0xd0, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x42, 0x00, 0x53,
    0x72, 0xc1, 0x30, 0x04, 0xa3, 0x10, 0x78, 0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e,
    0x69, 0x6e, 0x67, 0x72, 0x65, 0x73, 0x73, 0xa1, 0x03, 0x30, 0x2f, 0x49, 0xa3, 0x0e, 0x78,
    0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e, 0x74, 0x72, 0x61, 0x63, 0x65, 0xc0, 0x06,
    0x01, 0xa1, 0x03, 0x30, 0x2f, 0x49, 0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x4f, 0x00,
    0x00, 0x00, 0x06, 0x40, 0x40, 0xa1, 0x24, 0x61, 0x6d, 0x71, 0x70, 0x3a, 0x2f, 0x5f, 0x74,
    0x6f, 0x70, 0x6f, 0x2f, 0x30, 0x2f, 0x49, 0x2f, 0x74, 0x65, 0x6d, 0x70, 0x2e, 0x41, 0x44,
    0x32, 0x42, 0x71, 0x38, 0x45, 0x47, 0x30, 0x78, 0x4b, 0x6a, 0x46, 0x6b, 0x63, 0x40, 0x40,
    0xa1, 0x1f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x30, 0x30, 0x36, 0x62, 0x30, 0x66, 0x62, 0x66, 0x34, 0x65, 0x33, 0x38, 0x33, 0x35, 0x61,
    0x34, 0x37, 0x64, 0x00, 0x53, 0x74, 0xd1, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x06,
    0xa1, 0x07, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x01, 0xa1, 0x06, 0x6f, 0x70,
    0x63, 0x6f, 0x64, 0x65, 0x52, 0x01, 0xa1, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73, 0x43,
    0x00, 0x53, 0x77, 0xd0, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x02, 0x41, 0x42,
};
static const uint8_t QDR_REQ2[] = {
    0x00, 0x53, 0x70, 0xd0, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x42, 0x00, 0x53, 0x72,
    0xc1, 0x30, 0x04, 0xa3, 0x10, 0x78, 0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e, 0x69, 0x6e,
    0x67, 0x72, 0x65, 0x73, 0x73, 0xa1, 0x03, 0x30, 0x2f, 0x45, 0xa3, 0x0e, 0x78, 0x2d, 0x6f, 0x70,
    0x74, 0x2d, 0x71, 0x64, 0x2e, 0x74, 0x72, 0x61, 0x63, 0x65, 0xc0, 0x06, 0x01, 0xa1, 0x03, 0x30,
    0x2f, 0x45, 0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x4f, 0x00, 0x00, 0x00, 0x06, 0x40, 0x40,
    0x40, 0x40, 0xa1, 0x24, 0x61, 0x6d, 0x71, 0x70, 0x3a, 0x2f, 0x5f, 0x74, 0x6f, 0x70, 0x6f, 0x2f,
    0x30, 0x2f, 0x49, 0x2f, 0x74, 0x65, 0x6d, 0x70, 0x2e, 0x41, 0x44, 0x32, 0x42, 0x71, 0x38, 0x45,
    0x47, 0x30, 0x78, 0x4b, 0x6a, 0x46, 0x6b, 0x63, 0xa1, 0x1f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x36, 0x62, 0x30, 0x66, 0x62, 0x66, 0x34,
    0x65, 0x33, 0x38, 0x33, 0x35, 0x61, 0x34, 0x37, 0x65, 0x00, 0x53, 0x74, 0xd1, 0x00, 0x00, 0x00,
    0x19, 0x00, 0x00, 0x00, 0x04, 0xa1, 0x07, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x01,
    0xa1, 0x06, 0x6f, 0x70, 0x63, 0x6f, 0x64, 0x65, 0x52, 0x01, 0x00, 0x53, 0x77, 0xd0, 0x00, 0x00,
    0x00, 0x0e, 0x00, 0x00, 0x00, 0x02, 0xa1, 0x07, 0x6f, 0x74, 0x68, 0x65, 0x72, 0x2e, 0x78, 0x41,
};
static const uint8_t QDR_REP2[] = {
    0x00, 0x53, 0x70, 0xd0, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x42, 0x00, 0x53,
    0x72, 0xc1, 0x30, 0x04, 0xa3, 0x10, 0x78, 0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e,
    0x69, 0x6e, 0x67, 0x72, 0x65, 0x73, 0x73, 0xa1, 0x03, 0x30, 0x2f, 0x49, 0xa3, 0x0e, 0x78,
    0x2d, 0x6f, 0x70, 0x74, 0x2d, 0x71, 0x64, 0x2e, 0x74, 0x72, 0x61, 0x63, 0x65, 0xc0, 0x06,
    0x01, 0xa1, 0x03, 0x30, 0x2f, 0x49, 0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x4f, 0x00,
    0x00, 0x00, 0x06, 0x40, 0x40, 0xa1, 0x24, 0x61, 0x6d, 0x71, 0x70, 0x3a, 0x2f, 0x5f, 0x74,
    0x6f, 0x70, 0x6f, 0x2f, 0x30, 0x2f, 0x49, 0x2f, 0x74, 0x65, 0x6d, 0x70, 0x2e, 0x41, 0x44,
    0x32, 0x42, 0x71, 0x38, 0x45, 0x47, 0x30, 0x78, 0x4b, 0x6a, 0x46, 0x6b, 0x63, 0x40, 0x40,
    0xa1, 0x1f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x30, 0x30, 0x36, 0x62, 0x30, 0x66, 0x62, 0x66, 0x34, 0x65, 0x33, 0x38, 0x33, 0x35, 0x61,
    0x34, 0x37, 0x65, 0x00, 0x53, 0x74, 0xd1, 0x00, 0x00, 0x00, 0x23, 0x00, 0x00, 0x00, 0x06,
    0xa1, 0x07, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x01, 0xa1, 0x06, 0x6f, 0x70,
    0x63, 0x6f, 0x64, 0x65, 0x52, 0x01, 0xa1, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73, 0x52,
    0x03, 0x00, 0x53, 0x77, 0xd0, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x02, 0x42, 0x42,
};

static void qdrouterd_messages(void **state)
{
    (void)state;
    rtr_elk_req_t q;
    const char   *why = NULL;
    assert_int_equal(rtr_elk_request_decode(QDR_REQ, sizeof(QDR_REQ), &q, &why), RTR_ELK_OK);
    assert_int_equal(q.address.size, 5);
    assert_memory_equal(q.address.start, "elr.x", 5);
    assert_true(q.receiver);
    assert_string_equal(pn_message_get_reply_to(q.msg), "amqp:/_topo/0/I/temp.AD2Bq8EG0xKjFkc");
    pn_message_free(q.msg);
    assert_int_equal(rtr_elk_request_decode(QDR_REQ2, sizeof(QDR_REQ2), &q, &why), RTR_ELK_OK);
    assert_memory_equal(q.address.start, "other.x", 7);
    pn_message_free(q.msg);
    char *cid = NULL;
    bool  lr = false, dest = true;
    assert_int_equal(rtr_elk_reply_decode(QDR_REP, sizeof(QDR_REP), &cid, &lr, &dest), RTR_ELK_OK);
    assert_string_equal(cid, "client-000000006b0fbf4e3835a47d");
    assert_true(lr);
    assert_false(dest);
    free(cid);
    assert_int_equal(rtr_elk_reply_decode(QDR_REP2, sizeof(QDR_REP2), &cid, &lr, &dest),
                     RTR_ELK_NOT_FOUND);
    assert_string_equal(cid, "client-000000006b0fbf4e3835a47e");
    free(cid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_round_trip), cmocka_unit_test(request_errors),
        cmocka_unit_test(request_truncated),  cmocka_unit_test(reply_round_trip),
        cmocka_unit_test(reply_errors),       cmocka_unit_test(qdrouterd_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
