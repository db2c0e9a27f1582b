"""Seeds derived from (run seed, site name, round, purpose), identical in every process.

Deriving each random stream from stable names rather than from one global generator makes a
site's local update a pure function of its inputs: the same in the in-process simulation, in
a Flower client, and regardless of the order in which sites are visited.
"""

from __future__ import annotations

import zlib

import numpy as np


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed mixing integers and strings (strings via CRC-32, stable across runs)."""
    words = [zlib.crc32(p.encode("utf-8")) if isinstance(p, str) else int(p) for p in parts]
    state = np.random.SeedSequence([w & 0xFFFFFFFF for w in words] + [len(words)])
    high, low = (int(w) for w in state.generate_state(2, dtype=np.uint32))
    return ((high << 32) | low) & ((1 << 63) - 1)
