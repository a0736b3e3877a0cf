#!/usr/bin/env python3
"""Disassembly of the functions whose names contain SUBSTR, each
instruction with how many times it ran per iteration, from a callgrind
profile written with --dump-instr=yes (what `ASM=SUBSTR benches/icount.sh`
runs; see benches/README.md, "Reproduce").

usage: cgasm.py PROFILE BINARY SUBSTR [ITERATIONS]
"""
import collections
import re
import subprocess
import sys


def counts(profile):
    """Instruction address -> times executed (calls' inclusive costs left out)."""
    per_addr = collections.Counter()
    addr = 0
    after_call = False
    for line in open(profile):
        line = line.rstrip("\n")
        if line.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost
            continue
        m = re.match(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s+\S+\s+(\d+)$", line)
        if not m:
            continue
        pos = m.group(1)
        if pos.startswith("0x"):
            addr = int(pos, 16)
        elif pos != "*":
            addr += int(pos)
        if after_call:
            after_call = False
            continue
        per_addr[addr] += int(m.group(2))
    return per_addr


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    profile, binary, substr = sys.argv[1:4]
    iters = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    per_addr = counts(profile)
    symbols = subprocess.run(
        ["nm", "-C", "--defined-only", "-S", binary], capture_output=True, text=True, check=True
    ).stdout
    for sym in symbols.splitlines():
        parts = sym.split(" ", 3)
        if len(parts) < 4 or substr not in parts[3]:
            continue
        start, size = int(parts[0], 16), int(parts[1], 16)
        print(f"## {parts[3]} {start:#x} {size}")
        dis = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", "-M", "intel",
             f"--start-address={start:#x}", f"--stop-address={start + size:#x}", binary],
            capture_output=True, text=True, check=True,
        ).stdout
        total = 0
        for d in dis.splitlines():
            m = re.match(r"^\s*([0-9a-f]+):\s*(.*)$", d)
            if m:
                c = per_addr.get(int(m.group(1), 16), 0)
                total += c
                print(f"{c / iters:8.2f}  {d.strip()}")
        print(f"## total per iteration {total / iters}")


if __name__ == "__main__":
    main()
