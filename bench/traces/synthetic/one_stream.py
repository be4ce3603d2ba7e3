#!/usr/bin/env python3
"""one_stream.py — the same trace with every event on stream 0: the bound a
policy that places every stream's buffers in one range could reach
(docs/design.md, "The driver's cost"), and the workload of a program that
serves changing shapes on one stream.

Allocations lose their stream field (and frees the size and stream they may
repeat); comments, timestamps, ids and sizes stay as they are. Reads plain
or gzip-compressed traces ("-": standard input), writes plain text, or gzip
where the output's name ends in .gz.

    one_stream.py bench/traces/synthetic/cnn_serving.csv.gz -o /tmp/cnn1.csv.gz
    gen_serving.py cnn --seed 77 --workers 2 | one_stream.py - > cnn77-1.csv
"""
import argparse
import gzip
import io
import sys


def one_stream(line):
    """The line with its event on stream 0 (comments and blanks unchanged)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return line.rstrip("\r\n")
    fields = [f.strip() for f in text.split(",")]
    stamp = [fields.pop()] if fields[-1].startswith("@") else []
    if fields[0] == "a":
        fields = fields[:3]
    elif fields[0] == "f":
        fields = fields[:2]
    return ",".join(fields + stamp)


def open_in(path):
    raw = sys.stdin.buffer if path == "-" else open(path, "rb")
    if raw.peek(2)[:2] == b"\x1f\x8b":
        return gzip.open(raw, "rt")
    return io.TextIOWrapper(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a trace, plain or gzip ('-': standard input)")
    ap.add_argument("-o", "--output", help="where to write (default: standard output; .gz: compressed)")
    args = ap.parse_args()
    out = sys.stdout
    if args.output:
        out = gzip.open(args.output, "wt", compresslevel=6) if args.output.endswith(".gz") else open(args.output, "w")
    with open_in(args.trace) as src:
        for line in src:
            out.write(one_stream(line) + "\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
