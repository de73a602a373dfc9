"""Byte-level AMQP 1.0 helpers for the system tests.

Proton-Python encodes and decodes whole messages; to check that the router forwards message
sections byte for byte, or to send a deliberately malformed message, the tests need to look
at and build the encoded bytes themselves.  This module knows just enough of the AMQP 1.0
type system (part 1 of the specification) to skip over any encoded value and to split a
message into its sections; it never interprets values beyond that.
"""

import struct

# Section descriptor codes (AMQP 1.0 part 3.2).
HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

SECTION_NAMES = {
    HEADER: "header",
    DELIVERY_ANNOTATIONS: "delivery-annotations",
    MESSAGE_ANNOTATIONS: "message-annotations",
    PROPERTIES: "properties",
    APPLICATION_PROPERTIES: "application-properties",
    DATA: "data",
    AMQP_SEQUENCE: "amqp-sequence",
    AMQP_VALUE: "amqp-value",
    FOOTER: "footer",
}

# Fixed-width constructors: code -> payload size.
_FIXED = {}
for _c in (0x40, 0x41, 0x42, 0x43, 0x44, 0x45):
    _FIXED[_c] = 0
for _c in (0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56):
    _FIXED[_c] = 1
for _c in (0x60, 0x61):
    _FIXED[_c] = 2
for _c in (0x70, 0x71, 0x72, 0x73, 0x74):
    _FIXED[_c] = 4
for _c in (0x80, 0x81, 0x82, 0x83, 0x84):
    _FIXED[_c] = 8
for _c in (0x94, 0x98):
    _FIXED[_c] = 16


class Malformed(ValueError):
    """The bytes are not a well-formed AMQP encoding."""


def _need(buf, pos, n):
    if pos + n > len(buf):
        raise Malformed("value runs past the end at offset %d" % pos)


def skip_constructor(buf, pos):
    """Return (code, pos after the constructor); a described constructor's descriptor is skipped."""
    _need(buf, pos, 1)
    code = buf[pos]
    if code == 0x00:
        pos = skip_value(buf, pos + 1)  # the descriptor
        return skip_constructor(buf, pos)
    return code, pos + 1


def _skip_payload(buf, code, pos):
    if code in _FIXED:
        _need(buf, pos, _FIXED[code])
        return pos + _FIXED[code]
    hi = code & 0xF0
    if hi in (0xA0, 0xC0, 0xE0):  # 1-byte size
        _need(buf, pos, 1)
        size = buf[pos]
        _need(buf, pos + 1, size)
        return pos + 1 + size
    if hi in (0xB0, 0xD0, 0xF0):  # 4-byte size
        _need(buf, pos, 4)
        (size,) = struct.unpack_from(">I", buf, pos)
        _need(buf, pos + 4, size)
        return pos + 4 + size
    raise Malformed("invalid constructor 0x%02x" % code)


def skip_value(buf, pos):
    """Return the offset just after the encoded value that starts at `pos`."""
    code, pos = skip_constructor(buf, pos)
    return _skip_payload(buf, code, pos)


def section_code(buf, pos):
    """Descriptor code (an int) of the described value at `pos`, or None if it is not one."""
    if buf[pos] != 0x00:
        return None
    d = buf[pos + 1]
    if d == 0x53:
        return buf[pos + 2]
    if d == 0x80:
        return struct.unpack_from(">Q", buf, pos + 2)[0]
    return None  # symbolic descriptor: not a standard section


def split_sections(raw):
    """Split an encoded message into [(code, bytes), ...], one entry per section, in order."""
    raw = bytes(raw)
    out = []
    pos = 0
    while pos < len(raw):
        code = section_code(raw, pos)
        if code is None:
            raise Malformed("offset %d is not a described section" % pos)
        end = skip_value(raw, pos)
        out.append((code, raw[pos:end]))
        pos = end
    return out


def sections_except(raw, *codes):
    """The sections of `raw` whose code is not in `codes`, as a list of (code, bytes)."""
    return [(c, b) for (c, b) in split_sections(raw) if c not in codes]


def map_pairs(section_bytes):
    """Raw (key bytes, value bytes) pairs of a map section (annotations or app-properties)."""
    b = bytes(section_bytes)
    pos = 0
    if b[pos] != 0x00:
        raise Malformed("not a described section")
    pos = skip_value(b, pos + 1)  # descriptor
    code = b[pos]
    pos += 1
    if code == 0xC1:
        _need(b, pos, 2)
        size, count = b[pos], b[pos + 1]
        start, end = pos + 2, pos + 1 + size
    elif code == 0xD1:
        _need(b, pos, 8)
        size, count = struct.unpack_from(">II", b, pos)
        start, end = pos + 8, pos + 4 + size
    elif code == 0x40:
        return []
    else:
        raise Malformed("section is not a map (constructor 0x%02x)" % code)
    if count % 2:
        raise Malformed("map with an odd element count %d" % count)
    pairs = []
    pos = start
    for _ in range(count // 2):
        k_end = skip_value(b, pos)
        v_end = skip_value(b, k_end)
        pairs.append((b[pos:k_end], b[k_end:v_end]))
        pos = v_end
    if pos != end:
        raise Malformed("map size does not match its elements")
    return pairs


def symbol_text(encoded):
    """The text of an encoded sym8/sym32/str8/str32 value, else None."""
    code = encoded[0]
    if code in (0xA3, 0xA1):
        return bytes(encoded[2:]).decode("utf-8", "replace")
    if code in (0xB3, 0xB1):
        return bytes(encoded[5:]).decode("utf-8", "replace")
    return None


# ---- encoders for hand-built messages ---------------------------------------------------

def _described(code, payload):
    return bytes([0x00, 0x53, code]) + payload


def enc_str(s):
    b = s.encode("utf-8")
    if len(b) < 256:
        return bytes([0xA1, len(b)]) + b
    return b"\xb1" + struct.pack(">I", len(b)) + b


def enc_sym(s):
    b = s.encode("ascii")
    if len(b) < 256:
        return bytes([0xA3, len(b)]) + b
    return b"\xb3" + struct.pack(">I", len(b)) + b


def enc_bin(b):
    b = bytes(b)
    if len(b) < 256:
        return bytes([0xA0, len(b)]) + b
    return b"\xb0" + struct.pack(">I", len(b)) + b


def enc_map(pairs):
    """A map32 of already-encoded (key, value) byte pairs."""
    body = b"".join(k + v for k, v in pairs)
    return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(pairs)) + body


def enc_list(items):
    body = b"".join(items)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def header_section(durable=False):
    # header list: [durable]
    return _described(HEADER, b"\xc0\x02\x01" + (b"\x41" if durable else b"\x42"))


def properties_section(to=None, message_id=None):
    # properties list: message-id, user-id, to (the rest left out)
    fields = [enc_str(message_id) if message_id else b"\x40", b"\x40",
              enc_str(to) if to else b"\x40"]
    return _described(PROPERTIES, enc_list(fields))


def annotations_section(pairs):
    """Message annotations from (symbol text, encoded value) pairs."""
    return _described(MESSAGE_ANNOTATIONS, enc_map([(enc_sym(k), v) for k, v in pairs]))


def data_section(payload):
    return _described(DATA, enc_bin(payload))


def value_section(encoded_value):
    return _described(AMQP_VALUE, encoded_value)
