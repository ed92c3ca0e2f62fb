#!/usr/bin/env python3
"""pack.py OUT.pack DIR... - the files of the folders (sorted by name) as one corpus pack:
records of a 4-byte little-endian length and that many bytes (tests/fuzz/replay_main.c)."""
import os
import struct
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
with open(sys.argv[1], "wb") as out:
    for d in sys.argv[2:]:
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                b = f.read()
            out.write(struct.pack("<I", len(b)) + b)
