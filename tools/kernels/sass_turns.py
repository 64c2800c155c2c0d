#!/usr/bin/env python3
"""Reads an sm_90a cubin and reports, for each kernel whose name contains PATTERN, what the attention kernels'
consumer warpgroups do inside each GEMM-issue turn: the instructions from a named barrier through the
warpgroup MMAs to the next barrier (the pingpong turn the other consumer waits on). Softmax work there
(MUFU exponentials, F2FP packs) delays the other consumer's GEMMs. Needs no GPU and no disassembler:

    nvcc -cubin -arch=sm_90a <the attention file's compile flags> -o /tmp/a.cubin src/ops/cuda/attention_fp8.cu
    python3 tools/kernels/sass_turns.py /tmp/a.cubin attention_fp8_sm90

The opcode classes are the low 12 bits of each 128-bit instruction's first word, read off `cuobjdump -sass`
of this project's kernels (CUDA 13.0): wgmma (HGMMA / QGMMA, shared or register A), MUFU, F2FP, BAR (sync
and arrive), WARPGROUP.ARRIVE. Other architectures encode differently."""

import re
import struct
import sys

CLASSES = {0x9F0: "Q", 0xDF0: "Q", 0x9F3: "Q", 0xDF3: "Q", 0x308: "M", 0x23E: "P", 0xB1D: "B", 0x51D: "B",
           0x9C5: "W"}


def sections(data):
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]
    for name_off, _type, _flags, _addr, offset, size in heads:
        end = data.index(b"\0", strtab + name_off)
        yield data[strtab + name_off:end].decode(), offset, size


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    if data[:4] != b"\x7fELF":
        sys.exit(f"{sys.argv[1]}: not an ELF file (a cubin from nvcc -cubin)")
    found = False
    for name, offset, size in sections(data):
        if not name.startswith(".text.") or sys.argv[2] not in name:
            continue
        found = True
        seq = "".join(CLASSES.get(struct.unpack_from("<Q", data, offset + i)[0] & 0xFFF, ".")
                      for i in range(0, size, 16))
        print(f"{name[6:]}: {len(seq)} instructions, {seq.count('Q')} wgmma, {seq.count('M')} MUFU, "
              f"{seq.count('P')} F2FP")
        for m in re.finditer(r"B[^B]*?W[^B]*?Q[^B]*B", seq):
            turn = m.group(0)
            print(f"  turn at instruction {m.start():5d}: {len(turn):4d} instructions, {turn.count('Q'):2d} wgmma, "
                  f"{turn.count('M'):2d} MUFU, {turn.count('P'):2d} F2FP")
    if not found:
        sys.exit(f"no kernel matching '{sys.argv[2]}' in {sys.argv[1]}")


if __name__ == "__main__":
    main()
