"""Independent TensorBoard event-file reader (Python standard library only), for tests.

Reads every TFRecord, checks both masked CRC-32C values, decodes tensorflow.Event protobufs
field by field and prints JSON lines: {"wall_time", "step", "file_version"} or
{"wall_time", "step", "scalars": {tag: value}}. Exits 1 on a corrupt record.
"""
import json
import struct
import sys


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf: bytes, i: int):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def fields(buf: bytes):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        yield field, wire, v


def event(buf: bytes) -> dict:
    out = {}
    for f, _, v in fields(buf):
        if f == 1:
            out["wall_time"] = struct.unpack("<d", v)[0]
        elif f == 2:
            out["step"] = v
        elif f == 3:
            out["file_version"] = v.decode()
        elif f == 5:
            scalars = {}
            for sf, _, value in fields(v):
                if sf != 1:
                    continue
                tag, simple = None, None
                for vf, _, x in fields(value):
                    if vf == 1:
                        tag = x.decode()
                    elif vf == 2:
                        simple = struct.unpack("<f", x)[0]
                scalars[tag] = simple
            out["scalars"] = scalars
    return out


def main(path: str) -> None:
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[i + 8:i + 12])
        if crc != masked(header):
            sys.exit(f"bad length crc at byte {i}")
        body = data[i + 12:i + 12 + length]
        (crc,) = struct.unpack("<I", data[i + 12 + length:i + 16 + length])
        if crc != masked(body):
            sys.exit(f"bad data crc at byte {i}")
        print(json.dumps(event(body)))
        i += 16 + length


if __name__ == "__main__":
    main(sys.argv[1])
