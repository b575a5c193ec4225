"""Helpers the peer scripts share (any Python 3 with numpy: Debian's and bench/peers/.venv-tf)."""
import gzip
import os
import socket
import struct
import sys

import numpy as np


def free_loopback_ports(count):
    """Ports the kernel hands out on 127.0.0.1; all held open together so they differ."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def read_idx(path):
    """An IDX file (MNIST's format), gzipped when its name ends in .gz, as a uint8 array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find_idx(folder, stem):
    """folder/stem.gz or folder/stem; exits naming both when neither is there."""
    for name in (stem + ".gz", stem):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    sys.exit(f"no {stem}[.gz] in {folder}")
