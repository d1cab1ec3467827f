"""Independent TensorBoard event-file reader (Python standard library only), for tests.

Reads every TFRecord, checks both masked CRC-32C values, decodes tensorflow.Event protobufs
field by field and prints JSON lines: {"wall_time", "step", "file_version"} or
{"wall_time", "step", "scalars": {tag: value}, "texts": {tag: text},
"plugins": {tag: {"plugin", "content"}}} (hparams content decoded). Exits 1 on a corrupt record.
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
            scalars, texts, plugins = {}, {}, {}
            for sf, _, value in fields(v):
                if sf != 1:
                    continue
                tag, simple, tensor, plugin, content = None, None, None, None, b""
                for vf, _, x in fields(value):
                    if vf == 1:
                        tag = x.decode()
                    elif vf == 2:
                        simple = struct.unpack("<f", x)[0]
                    elif vf == 8:
                        tensor = x
                    elif vf == 9:  # SummaryMetadata.plugin_data
                        for mf, _, pd in fields(x):
                            if mf == 1:
                                for pf, _, y in fields(pd):
                                    if pf == 1:
                                        plugin = y.decode()
                                    elif pf == 2:
                                        content = y
                if simple is not None:
                    scalars[tag] = simple
                elif plugin == "text" and tensor is not None:
                    # TensorProto: dtype = 1 (7 = DT_STRING), string_val = 8
                    dtype = [x for tf, _, x in fields(tensor) if tf == 1]
                    strings = [x.decode() for tf, _, x in fields(tensor) if tf == 8]
                    if dtype != [7]:
                        raise ValueError(f"text tensor dtype {dtype}")
                    texts[tag] = strings[0] if strings else ""
                elif plugin is not None:
                    plugins[tag] = {"plugin": plugin, "content": hparams(content) if plugin == "hparams" else None}
            if scalars:
                out["scalars"] = scalars
            if texts:
                out["texts"] = texts
            if plugins:
                out["plugins"] = plugins
    return out


def proto_value(buf: bytes):
    """google.protobuf.Value: number_value = 2, string_value = 3, bool_value = 4."""
    for f, _, x in fields(buf):
        if f == 2:
            return struct.unpack("<d", x)[0]
        if f == 3:
            return x.decode()
        if f == 4:
            return bool(x)
    return None


def hparams(buf: bytes) -> dict:
    """HParamsPluginData: experiment = 2 (hparam_infos = 4, metric_infos = 5), session_start_info = 3."""
    out = {}
    for f, _, x in fields(buf):
        if f == 1:
            out["version"] = x
        elif f == 2:
            names, metrics = [], []
            for ef, _, y in fields(x):
                if ef == 4:
                    names += [z.decode() for hf, _, z in fields(y) if hf == 1]
                elif ef == 5:
                    for mf, _, name in fields(y):
                        if mf == 1:
                            metrics += [z.decode() for nf, _, z in fields(name) if nf == 2]
            out["experiment"] = {"hparams": names, "metrics": metrics}
        elif f == 3:
            values = {}
            for sf, _, y in fields(x):
                if sf == 1:  # map entry: key = 1, value = 2
                    key = val = None
                    for kf, _, z in fields(y):
                        if kf == 1:
                            key = z.decode()
                        elif kf == 2:
                            val = proto_value(z)
                    values[key] = val
            out["session_start_info"] = values
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
