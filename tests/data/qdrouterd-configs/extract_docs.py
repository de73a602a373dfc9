#!/usr/bin/python3
"""Extract the example configurations from qpid-dispatch's user guide into files.

Usage: extract_docs.py QPID_DISPATCH_CHECKOUT OUT_DIR

Reads docs/books/modules/**/*.adoc of a qpid-dispatch checkout (1.19.0 for this corpus; its
docs/books/user-guide/modules is a symbolic link to the same files) and writes one file per
listing (a `----` block) that holds at least one complete configuration entity:

* a `.conf` listing: every complete entity block (`name {` up to the `}` that closes it) in
  the listing, in order, separated by a blank line. Other lines of the listing (shell
  commands, prose) are left out. Lines that are only `...` (the guide's "other attributes
  here") are dropped, and so are AsciiDoc callouts (`<1>`, `// <1>`) at the end of a line.
* a JSON listing that parses as qdrouterd's JSON form (a list of [type, {attributes}]
  pairs): the listing as it is.

Each file is named after its .adoc file and the line of its listing (`NAME-L<line>.conf`)
and starts with a comment naming the source file, the section and the line (the JSON form
takes `#` comment lines too). The line in the name is the listing's first line.
"""

import glob
import json
import os
import re
import sys

ENTITY_OPEN = re.compile(r"^\s*([A-Za-z][\w.-]*)\s*\{\s*$")
CALLOUT = re.compile(r"\s*(//\s*)?(<\d+>\s*)+$")


def listings(lines):
    """(line number from 1, section title, [lines]) of each ---- block."""
    section = ""
    block = None
    for i, line in enumerate(lines):
        if block is None and re.match(r"^=+ ", line):
            section = line.lstrip("=").strip()
        if line.strip() == "----":
            if block is None:
                block = (i + 2, section, [])
            else:
                yield block
                block = None
        elif block is not None:
            block[2].append(line)


def conf_entities(body):
    """The complete entity blocks of a listing, as lists of lines."""
    out = []
    i = 0
    while i < len(body):
        if not ENTITY_OPEN.match(CALLOUT.sub("", body[i])):
            i += 1
            continue
        depth = 0
        ent = []
        j = i
        while j < len(body):
            line = CALLOUT.sub("", body[j]).rstrip()
            if line.strip() != "...":
                ent.append(line)
            depth += line.count("{") - line.count("}")
            j += 1
            if depth <= 0:
                break
        if depth == 0:
            out.append(ent)
        i = j
    return out


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    written = []
    for path in sorted(glob.glob(os.path.join(src, "docs/books/modules/**/*.adoc"),
                                 recursive=True)):
        rel = os.path.relpath(path, src)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for line_no, section, body in listings(lines):
            header = "# qpid-dispatch 1.19.0 %s, section \"%s\", listing of lines %d-%d\n" % (
                rel, section, line_no, line_no + len(body) - 1)
            text = "\n".join(body).strip()
            name = "%s-L%d" % (os.path.splitext(os.path.basename(path))[0], line_no)
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if not (isinstance(value, list) and value and
                        all(isinstance(e, list) and len(e) == 2 and isinstance(e[1], dict)
                            for e in value)):
                    continue
                out = name + ".json"
                content = header + text + "\n"
            else:
                ents = conf_entities(body)
                if not ents:
                    continue
                out = name + ".conf"
                content = header + "\n" + "\n\n".join("\n".join(e) for e in ents) + "\n"
            with open(os.path.join(dst, out), "w", encoding="utf-8") as f:
                f.write(content)
            written.append(out)
    print("%d files written to %s" % (len(written), dst))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
