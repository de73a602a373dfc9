/* core/routing/msg.c: decode and encode qdrouterd 1.19's routing-protocol messages
 * (layouts and reading rules: msg.h).
 *
 * Threads: none of its own; every function is pure and may run on any thread (the routing
 * engine runs on the core thread).  The reader never reads at or past the end it is given,
 * and does work proportional to the bytes it is given: a count is believed only once it fits
 * the bytes left (each element takes at least one byte), and described values may nest only
 * RD_DEPTH_MAX deep.
 */
#include "core/routing/msg.h"

#include "core/base/base.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Reading one value
 * ------------------------------------------------------------------------------------------ */

enum val_kind {
    K_OTHER = 0, /* anything routing does not read: skipped by its size */
    K_NULL,
    K_BOOL,
    K_INT,
    K_TEXT, /* str8/str32/sym8/sym32 */
    K_LIST, /* list0/list8/list32 (never an array) */
    K_MAP,  /* map8/map32 */
};

/* One encoded value as the reader found it. */
typedef struct val {
    enum val_kind  kind;  /* what it is */
    const uint8_t *next;  /* first byte after the value */
    const uint8_t *body;  /* K_TEXT: the text; K_LIST, K_MAP: the first element */
    size_t         blen;  /* K_TEXT: text bytes; K_LIST, K_MAP: element bytes */
    uint32_t       count; /* K_LIST: elements; K_MAP: keys + values */
    int64_t        i;     /* K_INT: the value */
} val_t;

#define RD_DEPTH_MAX 16

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* Fixed width (bytes after the code) of a fixed-width format code, or -1. */
static int fixed_width(uint8_t code)
{
    switch (code) {
    case 0x40:
    case 0x41:
    case 0x42:
    case 0x43:
    case 0x44:
    case 0x45:
        return 0;
    case 0x50:
    case 0x51:
    case 0x52:
    case 0x53:
    case 0x54:
    case 0x55:
    case 0x56:
        return 1;
    case 0x60:
    case 0x61:
        return 2;
    case 0x70:
    case 0x71:
    case 0x72:
    case 0x73:
    case 0x74:
        return 4;
    case 0x80:
    case 0x81:
    case 0x82:
    case 0x83:
    case 0x84:
        return 8;
    case 0x94:
    case 0x98:
        return 16;
    default:
        return -1;
    }
}

/* Read the value at p (bounded by end) into *v.  Returns 0, or -1 with *why set. */
static int val_read(const uint8_t *p, const uint8_t *end, val_t *v, int depth, const char **why)
{
    memset(v, 0, sizeof(*v));
    if (p >= end) {
        *why = "a value runs past the end of its section or compound";
        return -1;
    }
    uint8_t code = *p++;
    size_t  left = (size_t)(end - p);
    if (code == 0x00) { /* described: descriptor, then the value; routing reads neither */
        val_t d;
        if (depth >= RD_DEPTH_MAX) {
            *why = "described values nest too deeply";
            return -1;
        }
        if (val_read(p, end, &d, depth + 1, why) < 0 ||
            val_read(d.next, end, v, depth + 1, why) < 0)
            return -1;
        v->kind = K_OTHER;
        return 0;
    }
    int w = fixed_width(code);
    if (w >= 0) {
        if (left < (size_t)w) {
            *why = "a value runs past the end of its section or compound";
            return -1;
        }
        v->next = p + w;
        switch (code) {
        case 0x40:
            v->kind = K_NULL;
            break;
        case 0x41:
        case 0x42:
        case 0x56:
            v->kind = K_BOOL;
            break;
        case 0x43:
        case 0x44:
            v->kind = K_INT;
            v->i = 0;
            break;
        case 0x45:
            v->kind = K_LIST;
            v->body = p;
            break;
        case 0x50:
        case 0x52:
        case 0x53:
            v->kind = K_INT;
            v->i = p[0];
            break;
        case 0x51:
        case 0x54:
        case 0x55:
            v->kind = K_INT;
            v->i = (int8_t)p[0];
            break;
        case 0x60:
            v->kind = K_INT;
            v->i = (uint16_t)(p[0] << 8 | p[1]);
            break;
        case 0x61:
            v->kind = K_INT;
            v->i = (int16_t)(uint16_t)(p[0] << 8 | p[1]);
            break;
        case 0x70:
            v->kind = K_INT;
            v->i = get32(p);
            break;
        case 0x71:
            v->kind = K_INT;
            v->i = (int32_t)get32(p);
            break;
        case 0x80:
            if (get64(p) > INT64_MAX) {
                *why = "an integer is out of range";
                return -1;
            }
            v->kind = K_INT;
            v->i = (int64_t)get64(p);
            break;
        case 0x81:
            v->kind = K_INT;
            v->i = (int64_t)get64(p);
            break;
        default:
            v->kind = K_OTHER;
            break;
        }
        return 0;
    }
    size_t size, count = 0, cw;
    switch (code) {
    case 0xa0:
    case 0xa1:
    case 0xa3:
    case 0xc0:
    case 0xc1:
    case 0xe0:
        if (left < 1)
            goto overrun;
        size = p[0];
        p += 1, left -= 1;
        cw = 1;
        break;
    case 0xb0:
    case 0xb1:
    case 0xb3:
    case 0xd0:
    case 0xd1:
    case 0xf0:
        if (left < 4)
            goto overrun;
        size = get32(p);
        p += 4, left -= 4;
        cw = 4;
        break;
    default:
        *why = "unknown type code";
        return -1;
    }
    if (size > left)
        goto overrun;
    v->next = p + size;
    if ((code & 0xf0) == 0xa0 || (code & 0xf0) == 0xb0) {
        v->kind = (code & 0x0f) == 0x00 ? K_OTHER : K_TEXT; /* vbin is not text */
        v->body = p;
        v->blen = size;
        return 0;
    }
    /* list, map, array: a count field, then the elements */
    if (size < cw) {
        *why = "compound size is smaller than its count field";
        return -1;
    }
    count = cw == 1 ? p[0] : get32(p);
    bool array = (code & 0xf0) == 0xe0 || (code & 0xf0) == 0xf0;
    if (!array && count > size - cw) { /* each element takes at least one byte */
        *why = "compound count does not fit its size";
        return -1;
    }
    if (array)
        v->kind = K_OTHER; /* skipped by its size: never what routing expects */
    else if ((code & 0x0f) == 0x00)
        v->kind = K_LIST;
    else
        v->kind = K_MAP;
    if (v->kind == K_MAP && count % 2) {
        *why = "map count is odd";
        return -1;
    }
    v->body = p + cw;
    v->blen = size - cw;
    v->count = (uint32_t)count;
    return 0;
overrun:
    *why = "a value runs past the end of its section or compound";
    return -1;
}

static bool text_eq(const val_t *v, const char *s)
{
    size_t n = strlen(s);
    return v->kind == K_TEXT && v->blen == n && memcmp(v->body, s, n) == 0;
}

static codec_bytes_t text_view(const val_t *v)
{
    return (codec_bytes_t){.ptr = v->body, .len = v->blen};
}

/* Walk a compound's elements: each must be valid, and together they must fill it exactly.
 * `want` is the kind every element must have (K_OTHER: any). */
static int elems_check(const val_t *c, enum val_kind want, const char **why)
{
    const uint8_t *p = c->body, *end = c->body + c->blen;
    for (uint32_t i = 0; i < c->count; i++) {
        val_t e;
        if (val_read(p, end, &e, 0, why) < 0)
            return -1;
        if (want != K_OTHER && e.kind != want) {
            *why = want == K_TEXT ? "a list element is not a string"
                                  : "a list element is not an integer";
            return -1;
        }
        p = e.next;
    }
    if (p != end) {
        *why = "compound elements do not fill its size exactly";
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Opcodes
 * ------------------------------------------------------------------------------------------ */

static const char *const op_names[CORE_RT_OP_COUNT] = {
    [CORE_RT_OP_NONE] = "?",  [CORE_RT_OP_HELLO] = "HELLO", [CORE_RT_OP_RA] = "RA",
    [CORE_RT_OP_LSU] = "LSU", [CORE_RT_OP_LSR] = "LSR",     [CORE_RT_OP_MAU] = "MAU",
    [CORE_RT_OP_MAR] = "MAR",
};

const char *core_rt_op_name(core_rt_op_t op)
{
    return op > CORE_RT_OP_NONE && op < CORE_RT_OP_COUNT ? op_names[op] : "?";
}

core_rt_op_t core_rt_op_parse(const uint8_t *text, size_t len)
{
    for (int op = CORE_RT_OP_HELLO; op < CORE_RT_OP_COUNT; op++)
        if (strlen(op_names[op]) == len && memcmp(op_names[op], text, len) == 0)
            return (core_rt_op_t)op;
    return CORE_RT_OP_NONE;
}

/* ------------------------------------------------------------------------------------------
 * Body maps
 * ------------------------------------------------------------------------------------------ */

/* The body keys routing reads. */
enum key {
    KEY_ID = 0,
    KEY_PV,
    KEY_AREA,
    KEY_INSTANCE,
    KEY_LS_SEQ,
    KEY_MOBILE_SEQ,
    KEY_HAVE_SEQ,
    KEY_SEEN,
    KEY_LS,
    KEY_PEERS,
    KEY_ADD,
    KEY_DEL,
    KEY_EXIST,
    KEY_HINTS,
    KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    "id",   "pv", "area",  "instance", "ls_seq", "mobile_seq", "have_seq",
    "seen", "ls", "peers", "add",      "del",    "exist",      "hints",
};

/* A map's values by key (found[k] says whether key k was present). */
typedef struct fields {
    val_t v[KEY_COUNT];     /* values */
    bool  found[KEY_COUNT]; /* present */
} fields_t;

/* Collect a map's pairs whose keys are routing's.  Keys that are not text, or text routing
 * does not know, are skipped (their values still must be well-formed); a known key twice is
 * invalid (qdrouterd's two readers would disagree: Python keeps the last, C the first). */
static int map_fields(const val_t *map, fields_t *f, const char *what, const char **why)
{
    memset(f, 0, sizeof(*f));
    const uint8_t *p = map->body, *end = map->body + map->blen;
    for (uint32_t i = 0; i < map->count; i += 2) {
        val_t k, v;
        if (val_read(p, end, &k, 0, why) < 0 || val_read(k.next, end, &v, 0, why) < 0)
            return -1;
        p = v.next;
        if (k.kind != K_TEXT)
            continue;
        for (int j = 0; j < KEY_COUNT; j++) {
            if (text_eq(&k, key_names[j])) {
                if (f->found[j]) {
                    *why = what;
                    return -1;
                }
                f->found[j] = true;
                f->v[j] = v;
                break;
            }
        }
    }
    if (p != end) {
        *why = "compound elements do not fill its size exactly";
        return -1;
    }
    return 0;
}

/* Error texts name the opcode: one table per check, indexed by opcode. */
#define OPS_WHY(text)                                                                              \
    (const char *const[CORE_RT_OP_COUNT])                                                          \
    {                                                                                              \
        "?: " text, "HELLO: " text, "RA: " text, "LSU: " text, "LSR: " text, "MAU: " text,         \
            "MAR: " text                                                                           \
    }

static int need_text(const fields_t *f, int k, codec_bytes_t *out, const char *missing,
                     const char *type, const char **why)
{
    if (!f->found[k]) {
        *why = missing;
        return -1;
    }
    if (f->v[k].kind != K_TEXT) {
        *why = type;
        return -1;
    }
    *out = text_view(&f->v[k]);
    return 0;
}

static int need_int(const fields_t *f, int k, bool mandatory, int64_t *out, const char *missing,
                    const char *type, const char **why)
{
    if (!f->found[k]) {
        if (mandatory) {
            *why = missing;
            return -1;
        }
        *out = 0;
        return 0;
    }
    if (f->v[k].kind != K_INT) {
        *why = type;
        return -1;
    }
    *out = f->v[k].i;
    return 0;
}

/* A list of strings under key k (absent allowed when !mandatory). */
static int need_strs(const fields_t *f, int k, bool mandatory, core_rt_strs_t *out,
                     const char *missing, const char *type, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (!f->found[k]) {
        if (mandatory) {
            *why = missing;
            return -1;
        }
        return 0;
    }
    const val_t *v = &f->v[k];
    if (v->kind != K_LIST) {
        *why = type;
        return -1;
    }
    if (elems_check(v, K_TEXT, why) < 0)
        return -1;
    /* a present empty list has a non-NULL ptr (the byte after its header) */
    out->ptr = v->body;
    out->len = v->blen;
    out->count = v->count;
    return 0;
}

static int ls_decode(const val_t *ls, core_rt_msg_t *m, const char **why)
{
    fields_t f;
    if (ls->kind != K_MAP) {
        *why = "LSU: ls is not a map";
        return -1;
    }
    if (map_fields(ls, &f, "LSU: ls has a key twice", why) < 0)
        return -1;
    if (need_text(&f, KEY_ID, &m->ls_id, "LSU: ls.id is missing", "LSU: ls.id is not a string",
                  why) < 0 ||
        need_int(&f, KEY_LS_SEQ, true, &m->ls_ls_seq, "LSU: ls.ls_seq is missing",
                 "LSU: ls.ls_seq is not an integer", why) < 0)
        return -1;
    if (f.found[KEY_AREA]) {
        if (f.v[KEY_AREA].kind != K_TEXT) {
            *why = "LSU: ls.area is not a string";
            return -1;
        }
        m->ls_area = text_view(&f.v[KEY_AREA]);
    }
    if (!f.found[KEY_PEERS]) {
        *why = "LSU: ls.peers is missing";
        return -1;
    }
    const val_t *peers = &f.v[KEY_PEERS];
    if (peers->kind != K_MAP) {
        *why = "LSU: ls.peers is not a map";
        return -1;
    }
    const uint8_t *p = peers->body, *end = peers->body + peers->blen;
    for (uint32_t i = 0; i < peers->count; i += 2) {
        val_t k, v;
        if (val_read(p, end, &k, 0, why) < 0 || val_read(k.next, end, &v, 0, why) < 0)
            return -1;
        if (k.kind != K_TEXT) {
            *why = "LSU: ls.peers key is not a string";
            return -1;
        }
        if (v.kind != K_INT) {
            *why = "LSU: ls.peers value is not an integer";
            return -1;
        }
        p = v.next;
    }
    if (p != end) {
        *why = "LSU: ls.peers pairs do not fill the map exactly";
        return -1;
    }
    m->peers.ptr = peers->body;
    m->peers.len = peers->blen;
    m->peers.count = peers->count / 2;
    return 0;
}

static int mau_decode(const fields_t *f, core_rt_msg_t *m, const char **why)
{
    if (need_int(f, KEY_MOBILE_SEQ, true, &m->mobile_seq, "MAU: mobile_seq is missing",
                 "MAU: mobile_seq is not an integer", why) < 0 ||
        need_strs(f, KEY_ADD, false, &m->add, NULL, "MAU: add is not a list", why) < 0 ||
        need_strs(f, KEY_DEL, false, &m->del, NULL, "MAU: del is not a list", why) < 0 ||
        need_strs(f, KEY_EXIST, false, &m->exist, NULL, "MAU: exist is not a list", why) < 0)
        return -1;
    bool add = m->add.ptr, del = m->del.ptr, exist = m->exist.ptr;
    if (exist && (add || del)) {
        *why = "MAU: exist comes with add or del";
        return -1;
    }
    if (!exist && (!add || !del)) {
        *why = "MAU: neither exist nor both add and del";
        return -1;
    }
    /* hints: used only when they are a list of integers as long as the keys' list */
    if (f->found[KEY_HINTS] && f->v[KEY_HINTS].kind == K_LIST &&
        f->v[KEY_HINTS].count == (exist ? m->exist.count : m->add.count)) {
        const char *ignored;
        if (elems_check(&f->v[KEY_HINTS], K_INT, &ignored) == 0) {
            m->hints.ptr = f->v[KEY_HINTS].body;
            m->hints.len = f->v[KEY_HINTS].blen;
            m->hints.count = f->v[KEY_HINTS].count;
        }
    }
    return 0;
}

int core_rt_body_decode(core_rt_op_t op, const uint8_t *val, size_t len, core_rt_msg_t *m,
                        const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    memset(m, 0, sizeof(*m));
    m->op = op;
    if (op <= CORE_RT_OP_NONE || op >= CORE_RT_OP_COUNT) {
        *why = "unknown opcode";
        return CODEC_INVALID;
    }
    val_t    body;
    fields_t f;
    if (val_read(val, val + len, &body, 0, why) < 0)
        return CODEC_INVALID;
    if (body.kind != K_MAP) {
        *why = OPS_WHY("body is not a map")[op];
        return CODEC_INVALID;
    }
    if (body.next != val + len) {
        *why = OPS_WHY("bytes follow the body map")[op];
        return CODEC_INVALID;
    }
    if (map_fields(&body, &f, OPS_WHY("body has a key twice")[op], why) < 0)
        return CODEC_INVALID;
    if (need_text(&f, KEY_ID, &m->id, OPS_WHY("id is missing")[op],
                  OPS_WHY("id is not a string")[op], why) < 0 ||
        need_int(&f, KEY_PV, false, &m->pv, NULL, OPS_WHY("pv is not an integer")[op], why) < 0)
        return CODEC_INVALID;
    if (m->pv > CORE_RT_PV)
        return CORE_RT_NEWER;
    if (f.found[KEY_AREA]) {
        if (f.v[KEY_AREA].kind != K_TEXT) {
            *why = OPS_WHY("area is not a string")[op];
            return CODEC_INVALID;
        }
        m->area = text_view(&f.v[KEY_AREA]);
    }
    int rc = 0;
    switch (op) {
    case CORE_RT_OP_HELLO:
        rc = need_strs(&f, KEY_SEEN, true, &m->seen, "HELLO: seen is missing",
                       "HELLO: seen is not a list", why);
        if (rc == 0)
            rc = need_int(&f, KEY_INSTANCE, false, &m->instance, NULL,
                          "HELLO: instance is not an integer", why);
        break;
    case CORE_RT_OP_RA:
        rc = need_int(&f, KEY_LS_SEQ, true, &m->ls_seq, "RA: ls_seq is missing",
                      "RA: ls_seq is not an integer", why);
        if (rc == 0)
            rc = need_int(&f, KEY_MOBILE_SEQ, true, &m->mobile_seq, "RA: mobile_seq is missing",
                          "RA: mobile_seq is not an integer", why);
        if (rc == 0)
            rc = need_int(&f, KEY_INSTANCE, false, &m->instance, NULL,
                          "RA: instance is not an integer", why);
        break;
    case CORE_RT_OP_LSU:
        rc = need_int(&f, KEY_LS_SEQ, true, &m->ls_seq, "LSU: ls_seq is missing",
                      "LSU: ls_seq is not an integer", why);
        if (rc == 0)
            rc = need_int(&f, KEY_INSTANCE, false, &m->instance, NULL,
                          "LSU: instance is not an integer", why);
        if (rc == 0 && !f.found[KEY_LS]) {
            *why = "LSU: ls is missing";
            rc = -1;
        }
        if (rc == 0)
            rc = ls_decode(&f.v[KEY_LS], m, why);
        break;
    case CORE_RT_OP_LSR:
        break;
    case CORE_RT_OP_MAU:
        rc = mau_decode(&f, m, why);
        break;
    case CORE_RT_OP_MAR:
        rc = need_int(&f, KEY_HAVE_SEQ, true, &m->have_seq, "MAR: have_seq is missing",
                      "MAR: have_seq is not an integer", why);
        break;
    default:
        break;
    }
    return rc < 0 ? CODEC_INVALID : 0;
}

/* ------------------------------------------------------------------------------------------
 * Whole messages
 * ------------------------------------------------------------------------------------------ */

/* Read a section's 0x00 and descriptor at p; *code is its numeric descriptor (a symbolic one
 * is mapped through codec_section_by_name(); UINT64_MAX for one that names no section).
 * Returns the byte after the descriptor, or NULL. */
static const uint8_t *section_head(const uint8_t *p, const uint8_t *end, uint64_t *code,
                                   const char **why)
{
    val_t d;
    if (p >= end || *p != 0x00) {
        *why = "expected a section (described type 0x00)";
        return NULL;
    }
    if (val_read(p + 1, end, &d, RD_DEPTH_MAX, why) < 0)
        return NULL;
    *code = UINT64_MAX;
    if (d.kind == K_INT && (p[1] == 0x53 || p[1] == 0x80 || p[1] == 0x44))
        *code = (uint64_t)d.i;
    else if (d.kind == K_TEXT && (p[1] == 0xa3 || p[1] == 0xb3)) {
        int c = codec_section_by_name(d.body, d.blen);
        if (c >= 0)
            *code = (uint64_t)c;
    }
    return d.next;
}

int core_rt_msg_decode(const uint8_t *msg, size_t len, core_rt_msg_t *m, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    memset(m, 0, sizeof(*m));
    codec_scan_t scan;
    if (codec_scan(msg, len, true, &scan, why) != 0)
        return CODEC_INVALID;
    if (scan.application_properties.len == 0) {
        *why = "routing message: no application-properties (opcode)";
        return CODEC_INVALID;
    }
    /* the opcode: application-properties {"opcode": "HELLO" ...}, key string or symbol */
    const uint8_t *ap = msg + scan.application_properties.off;
    const uint8_t *ap_end = ap + scan.application_properties.len;
    uint64_t       code;
    val_t          map;
    const uint8_t *p = section_head(ap, ap_end, &code, why);
    if (!p || val_read(p, ap_end, &map, 0, why) < 0)
        return CODEC_INVALID;
    if (map.kind != K_MAP) {
        *why = "routing message: application-properties is not a map";
        return CODEC_INVALID;
    }
    core_rt_op_t op = CORE_RT_OP_NONE;
    bool         have_op = false;
    p = map.body;
    for (uint32_t i = 0; i < map.count; i += 2) {
        val_t k, v;
        if (val_read(p, map.body + map.blen, &k, 0, why) < 0 ||
            val_read(k.next, map.body + map.blen, &v, 0, why) < 0)
            return CODEC_INVALID;
        p = v.next;
        if (!have_op && text_eq(&k, "opcode")) {
            have_op = true;
            if (v.kind == K_TEXT)
                op = core_rt_op_parse(v.body, v.blen);
        }
    }
    if (!have_op) {
        *why = "routing message: no opcode application property";
        return CODEC_INVALID;
    }
    if (op == CORE_RT_OP_NONE) {
        *why = "routing message: unknown opcode";
        return CODEC_INVALID;
    }
    /* the body: one amqp-value section holding the map (a footer may follow) */
    const uint8_t *end = msg + len;
    p = section_head(msg + scan.body_off, end, &code, why);
    if (!p)
        return CODEC_INVALID;
    if (code != 0x77) {
        *why = "routing message: body is not an amqp-value section";
        return CODEC_INVALID;
    }
    val_t body;
    if (val_read(p, end, &body, 0, why) < 0)
        return CODEC_INVALID;
    if (body.next != end) {
        uint64_t fcode;
        if (!section_head(body.next, end, &fcode, why))
            return CODEC_INVALID;
        if (fcode != 0x78) {
            *why = "routing message: something other than a footer follows the body";
            return CODEC_INVALID;
        }
    }
    return core_rt_body_decode(op, p, (size_t)(body.next - p), m, why);
}

/* ------------------------------------------------------------------------------------------
 * Cursors (the views were validated when decoded)
 * ------------------------------------------------------------------------------------------ */

core_rt_iter_t core_rt_iter(const core_rt_list_t *l)
{
    return (core_rt_iter_t){.p = l->ptr, .end = l->ptr ? l->ptr + l->len : NULL};
}

/* Read the cursor's next value into *v and step past it; false at the end. */
static bool iter_take(core_rt_iter_t *it, val_t *v)
{
    const char *why;
    if (!it->p || it->p >= it->end || val_read(it->p, it->end, v, 0, &why) < 0)
        return false;
    it->p = v->next;
    return true;
}

bool core_rt_strs_next(core_rt_iter_t *it, codec_bytes_t *s)
{
    val_t v;
    if (!iter_take(it, &v))
        return false;
    *s = text_view(&v);
    return true;
}

bool core_rt_ints_next(core_rt_iter_t *it, int64_t *out)
{
    val_t v;
    if (!iter_take(it, &v))
        return false;
    *out = v.i;
    return true;
}

bool core_rt_peers_next(core_rt_iter_t *it, codec_bytes_t *id, int64_t *cost)
{
    core_rt_iter_t at = *it;
    val_t          k, v;
    if (!iter_take(it, &k) || !iter_take(it, &v)) {
        *it = at; /* a pair is taken whole or not at all */
        return false;
    }
    *id = text_view(&k);
    *cost = v.i;
    return true;
}

/* ------------------------------------------------------------------------------------------
 * Encoding
 * ------------------------------------------------------------------------------------------ */

void core_rt_buf_fini(core_rt_buf_t *b)
{
    BASE_FREE(b->ptr);
    b->len = b->cap = 0;
}

static uint8_t *buf_room(core_rt_buf_t *b, size_t n)
{
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        b->ptr = base_realloc(b->ptr, cap);
        b->cap = cap;
    }
    uint8_t *p = b->ptr + b->len;
    b->len += n;
    return p;
}

static void put8(core_rt_buf_t *b, uint8_t v)
{
    *buf_room(b, 1) = v;
}

static void put32_at(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

static void put32(core_rt_buf_t *b, uint32_t v)
{
    put32_at(buf_room(b, 4), v);
}

static void put64(core_rt_buf_t *b, uint64_t v)
{
    put32(b, (uint32_t)(v >> 32));
    put32(b, (uint32_t)v);
}

/* str8 below 256 bytes, else str32 (code + 0x10); `code8` is 0xa1 (string) or 0xa3 (symbol). */
static void put_text(core_rt_buf_t *b, uint8_t code8, const void *s, size_t n)
{
    if (n < 256) {
        put8(b, code8);
        put8(b, (uint8_t)n);
    } else {
        put8(b, (uint8_t)(code8 + 0x10));
        put32(b, (uint32_t)n);
    }
    if (n)
        memcpy(buf_room(b, n), s, n);
}

static void put_str(core_rt_buf_t *b, const char *s)
{
    put_text(b, 0xa1, s, strlen(s));
}

/* qdrouterd's insert_int: smallint in -128..127, else int. */
static void put_int32(core_rt_buf_t *b, int32_t v)
{
    if (v >= -128 && v <= 127) {
        put8(b, 0x54);
        put8(b, (uint8_t)v);
    } else {
        put8(b, 0x71);
        put32(b, (uint32_t)v);
    }
}

/* qdrouterd's insert_long: smalllong in -128..127, else long. */
static void put_long(core_rt_buf_t *b, int64_t v)
{
    if (v >= -128 && v <= 127) {
        put8(b, 0x55);
        put8(b, (uint8_t)v);
    } else {
        put8(b, 0x81);
        put64(b, (uint64_t)v);
    }
}

/* A Python int as qdrouterd's embedded interpreter writes it: int when it fits, else long. */
static void put_pyint(core_rt_buf_t *b, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX)
        put_int32(b, (int32_t)v);
    else
        put_long(b, v);
}

/* list32/map32 with its size patched by compound_end(); returns the size field's offset. */
static size_t compound_start(core_rt_buf_t *b, uint8_t code, uint32_t count)
{
    put8(b, code);
    size_t at = b->len;
    put32(b, 0);
    put32(b, count);
    return at;
}

static void compound_end(core_rt_buf_t *b, size_t at)
{
    put32_at(b->ptr + at, (uint32_t)(b->len - at - 4));
}

/* A list of text: Python writes list0 for an empty list, C always list32. */
static void put_text_list(core_rt_buf_t *b, const codec_bytes_t *s, uint32_t n, bool python)
{
    if (n == 0 && python) {
        put8(b, 0x45);
        return;
    }
    size_t at = compound_start(b, 0xd0, n);
    for (uint32_t i = 0; i < n; i++)
        put_text(b, 0xa1, s[i].ptr, s[i].len);
    compound_end(b, at);
}

static void put_key(core_rt_buf_t *b, const char *k, bool python)
{
    put_text(b, python ? 0xa1 : 0xa3, k, strlen(k));
}

static void put_section(core_rt_buf_t *b, uint8_t code)
{
    put8(b, 0x00);
    put8(b, 0x53);
    put8(b, code);
}

/* The largest text a message may hold here: far below str32's limit, so sizes never wrap. */
#define TEXT_MAX (1u << 30)

static bool out_fits(const core_rt_out_t *o)
{
    uint64_t total = strlen(o->to) + o->id.len + o->area.len;
    for (uint32_t i = 0; i < o->n_ids; i++)
        total += o->ids[i].len + 16;
    for (uint32_t i = 0; i < o->n_dels; i++)
        total += o->dels[i].len + 16;
    return total < TEXT_MAX;
}

int core_rt_msg_encode(const core_rt_out_t *o, core_rt_buf_t *b)
{
    if (o->op <= CORE_RT_OP_NONE || o->op >= CORE_RT_OP_COUNT || !o->to || !o->id.ptr ||
        !out_fits(o) || (o->op == CORE_RT_OP_MAU && o->n_ids && !o->values))
        return CODEC_INVALID;
    bool          py = o->op != CORE_RT_OP_MAU && o->op != CORE_RT_OP_MAR;
    codec_bytes_t area = o->area.ptr ? o->area : (codec_bytes_t){(const uint8_t *)"0", 1};
    size_t        at, at2;

    /* header [durable false] */
    put_section(b, 0x70);
    at = compound_start(b, 0xd0, 1);
    put8(b, 0x42);
    compound_end(b, at);

    /* properties [message-id, user-id, to (, subject, reply-to, correlation-id)] */
    put_section(b, 0x73);
    at = compound_start(b, 0xd0, py ? 6 : 3);
    put8(b, 0x40);
    put8(b, 0x40);
    put_str(b, o->to);
    if (py) {
        put8(b, 0x40);
        put8(b, 0x40);
        put8(b, 0x40);
    }
    compound_end(b, at);

    /* application-properties {opcode: OP} */
    put_section(b, 0x74);
    at = compound_start(b, 0xd1, 2);
    put_key(b, "opcode", py);
    put_str(b, core_rt_op_name(o->op));
    compound_end(b, at);

    /* body */
    static const uint32_t pairs[CORE_RT_OP_COUNT] = {
        [CORE_RT_OP_HELLO] = 5, [CORE_RT_OP_RA] = 6,  [CORE_RT_OP_LSU] = 6,
        [CORE_RT_OP_LSR] = 3,   [CORE_RT_OP_MAU] = 7, [CORE_RT_OP_MAR] = 4,
    };
    uint32_t n = pairs[o->op] - (o->op == CORE_RT_OP_MAU && o->absolute ? 1 : 0);
    put_section(b, 0x77);
    at = compound_start(b, 0xd1, 2 * n);
    put_key(b, "id", py);
    put_text(b, 0xa1, o->id.ptr, o->id.len);
    put_key(b, "pv", py);
    if (py)
        put_pyint(b, CORE_RT_PV);
    else
        put_long(b, CORE_RT_PV);
    put_key(b, "area", py);
    put_text(b, 0xa1, area.ptr, area.len);
    switch (o->op) {
    case CORE_RT_OP_HELLO:
        put_key(b, "instance", py);
        put_pyint(b, o->instance);
        put_key(b, "seen", py);
        put_text_list(b, o->ids, o->n_ids, true);
        break;
    case CORE_RT_OP_RA:
        put_key(b, "instance", py);
        put_pyint(b, o->instance);
        put_key(b, "ls_seq", py);
        put_pyint(b, o->ls_seq);
        put_key(b, "mobile_seq", py);
        put_pyint(b, o->mobile_seq);
        break;
    case CORE_RT_OP_LSU:
        put_key(b, "instance", py);
        put_pyint(b, o->instance);
        put_key(b, "ls_seq", py);
        put_pyint(b, o->ls_seq);
        put_key(b, "ls", py);
        at2 = compound_start(b, 0xd1, 8);
        put_key(b, "id", py);
        put_text(b, 0xa1, o->id.ptr, o->id.len);
        put_key(b, "area", py);
        put_text(b, 0xa1, area.ptr, area.len);
        put_key(b, "ls_seq", py);
        put_pyint(b, o->ls_seq);
        put_key(b, "peers", py);
        {
            size_t at3 = compound_start(b, 0xd1, 2 * o->n_ids);
            for (uint32_t i = 0; i < o->n_ids; i++) {
                put_text(b, 0xa1, o->ids[i].ptr, o->ids[i].len);
                put_pyint(b, o->values ? o->values[i] : 1);
            }
            compound_end(b, at3);
        }
        compound_end(b, at2);
        break;
    case CORE_RT_OP_LSR:
        break;
    case CORE_RT_OP_MAU:
        put_key(b, "mobile_seq", py);
        put_long(b, o->mobile_seq);
        if (o->absolute) {
            put_key(b, "exist", py);
            put_text_list(b, o->ids, o->n_ids, false);
        }
        put_key(b, "hints", py);
        at2 = compound_start(b, 0xd0, o->n_ids);
        for (uint32_t i = 0; i < o->n_ids; i++)
            put_int32(b, (int32_t)o->values[i]);
        compound_end(b, at2);
        if (!o->absolute) {
            put_key(b, "add", py);
            put_text_list(b, o->ids, o->n_ids, false);
            put_key(b, "del", py);
            put_text_list(b, o->dels, o->n_dels, false);
        }
        break;
    case CORE_RT_OP_MAR:
        put_key(b, "have_seq", py);
        put_long(b, o->have_seq);
        break;
    default:
        break;
    }
    compound_end(b, at);
    return 0;
}
