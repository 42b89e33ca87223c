"""Pack the xgboost CUDA wheel for Hopper (sm_90) GPUs small enough for one device call.

The manylinux wheel (132 MB) carries its CUDA kernels for eight GPU architectures; a lent
machine's transfer limit leaves room for about 30 MB beside the repository and the other
wheels. This keeps the sm_90 cubins (H100, H200) and zeroes every other entry of the
library's ``.nv_fatbin`` section in place (headers kept, so the ELF layout and the fatbin
directory are unchanged), then packs the wheel's files as a ``.tar.xz`` of about 23 MB:

    python benchmarks/gpu/pack-xgboost-sm90.py xgboost-3.2.0-...-manylinux_2_28_x86_64.whl .xgb/xgboost-sm90.tar.xz
    # on the GPU machine:  benchmarks/gpu/device.sh install-xgboost .xgb/xgboost-sm90.tar.xz SHA256

The packed library runs on sm_90 GPUs only; CPU training is unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import struct
import tarfile
import zipfile
from collections import Counter

FATBIN_MAGIC = 0xBA55ED50
KEEP_ARCH = 90


def prune_fatbins(library: bytearray, keep_arch: int = KEEP_ARCH) -> Counter[int]:
    """Zero the payload of every fatbin entry of another architecture; bytes kept per arch."""
    section_offset, = struct.unpack_from("<Q", library, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", library, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", library, section_offset + i * entry_size)
                for i in range(count)]
    names_start = sections[names_index][4]
    kept: Counter[int] = Counter()
    for name, _type, _flags, _address, offset, size in sections:
        start = names_start + name
        if bytes(library[start:library.index(b"\0", start)]) != b".nv_fatbin":
            continue
        position, end = offset, offset + size
        while position < end:
            magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", library, position)
            if magic != FATBIN_MAGIC:
                position += 8        # fatbins are 8-byte aligned; padding between them
                continue
            entry, fat_end = position + header_size, position + header_size + fat_size
            while entry < fat_end:
                _kind, _unused, entry_header, payload = struct.unpack_from("<HHIQ", library, entry)
                arch, = struct.unpack_from("<I", library, entry + 28)
                if arch == keep_arch:
                    kept[arch] += payload
                else:
                    library[entry + entry_header:entry + entry_header + payload] = bytes(payload)
                entry += entry_header + payload
            position = fat_end
    if not kept:
        raise SystemExit(f"no sm_{keep_arch} code in the library: nothing would run")
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("tarball")
    args = parser.parse_args()
    with zipfile.ZipFile(args.wheel) as wheel, tarfile.open(args.tarball, "w:xz",
                                                           preset=9) as packed:
        for member in wheel.infolist():
            if member.is_dir():
                continue
            data = wheel.read(member)
            if member.filename.endswith("lib/libxgboost.so"):
                library = bytearray(data)
                kept = prune_fatbins(library)
                data = bytes(library)
                print(f"{member.filename}: kept {kept[KEEP_ARCH] / 1e6:.1f} MB of sm_{KEEP_ARCH} code")
            info = tarfile.TarInfo(member.filename)
            info.size = len(data)
            info.mode = 0o755 if member.filename.endswith(".so") else 0o644
            packed.addfile(info, io.BytesIO(data))
    with open(args.tarball, "rb") as handle:
        print(f"{args.tarball}: sha256 {hashlib.sha256(handle.read()).hexdigest()}")


if __name__ == "__main__":
    main()
