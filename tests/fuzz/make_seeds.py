#!/usr/bin/env python3
"""Writes the starting seeds of tests/fuzz/corpus: random byte strings (every byte string is
a valid input of fuzz_api.c) with the mode byte set, half for the attention core and half for
layers. The committed corpus is these seeds merged with what a short fuzzing run added
(tests/fuzz/run.sh --update-corpus)."""
import os
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
rnd = random.Random(8)
for i in range(32):
    mode = i % 2
    data = bytes([mode]) + bytes(rnd.randrange(256) for _ in range(rnd.randrange(16, 160)))
    with open(os.path.join(out, "seed-%s-%02d" % ("layer" if mode else "attention", i)), "wb") as f:
        f.write(data)
