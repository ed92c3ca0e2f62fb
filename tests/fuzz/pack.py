#!/usr/bin/env python3
"""pack.py OUT.pack DIR... - the files of the folders (sorted by name) as one corpus pack:
records of a 4-byte little-endian length and that many bytes (tests/fuzz/replay_main.c).
pack.py --unpack IN.pack DIR - each record of the pack as a file DIR/NNNNN."""
import os
import struct
import sys

if len(sys.argv) == 4 and sys.argv[1] == "--unpack":
    data = open(sys.argv[2], "rb").read()
    os.makedirs(sys.argv[3], exist_ok=True)
    at = n = 0
    while at < len(data):
        (size,) = struct.unpack_from("<I", data, at)
        with open(os.path.join(sys.argv[3], "%05d" % n), "wb") as f:
            f.write(data[at + 4:at + 4 + size])
        at += 4 + size
        n += 1
elif len(sys.argv) >= 3 and not sys.argv[1].startswith("-"):
    with open(sys.argv[1], "wb") as out:
        for d in sys.argv[2:]:
            for name in sorted(os.listdir(d)):
                with open(os.path.join(d, name), "rb") as f:
                    b = f.read()
                out.write(struct.pack("<I", len(b)) + b)
else:
    sys.exit(__doc__)
