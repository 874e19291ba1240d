#!/usr/bin/env python3
"""Turn a dynamically int8-quantized BERT ONNX export into a float32 model.safetensors.

    python3 tools/onnx_int8_bert_to_safetensors.py MODEL.onnx OUT.safetensors

Only the Python standard library: tools/setup_model.sh runs it on a fresh machine (no numpy, no
onnx, no torch). It reads the ONNX protobuf itself (ModelProto -> GraphProto -> NodeProto and
TensorProto, the few fields needed) and writes the tensors a Hugging Face BertModel has, under its
names (no "bert." prefix, as sentence-transformers saves them):

  embeddings.{word,position,token_type}_embeddings.weight   from the uint8 tables that the graph
                                  dequantizes after its Gather (DequantizeLinear, per-tensor
                                  scale and zero point): w = (q - zp) * scale
  encoder.layer.N.<module>.weight  from the int8 MatMulInteger weights B [in, out] (per output
                                  column scale and zero point): W = ((B - zp) * scale)^T, the
                                  [out, in] layout of torch.nn.Linear. The module is read from the
                                  name of the MatMulInteger's output
                                  ("/encoder/layer.3/attention/self/query/MatMul_output_0_...")
  every float32 initializer whose name is a BertModel parameter (biases, LayerNorm weight/bias)
                                  copied as is

The float32 values are exactly what onnxruntime's DequantizeLinear gives: (q - zp) is a small
integer, its product with the float32 scale is exact in double, and rounding that to float32 is
the correctly rounded float32 product. The ONNX graph also quantizes activations at run time
(DynamicQuantizeLinear), which the float32 model does not: its outputs are close to, not equal
to, those of the int8 graph (tools/setup_model.sh documents what was measured).

The output is deterministic (tensors in name order, no metadata but {"format": "pt"}), so its
sha256 can be pinned. Exit status: 0 ok, 1 usage, 2 the ONNX file is not what is expected.
"""

from __future__ import annotations

import json
import re
import struct
import sys
from array import array

# TensorProto.DataType
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7


class ConvertError(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Protobuf wire format (just enough to walk an ONNX file)
# ------------------------------------------------------------------------------------------------
def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ConvertError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ConvertError("varint too long")


def fields(buf: memoryview):
    """Yields (field_number, wire_type, value): an int for varints and fixed, a memoryview for
    length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            v = int.from_bytes(buf[pos:pos + 8], "little"); pos += 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise ConvertError("truncated length-delimited field")
            v = buf[pos:pos + n]; pos += n
        elif wt == 5:
            v = int.from_bytes(buf[pos:pos + 4], "little"); pos += 4
        else:
            raise ConvertError(f"unsupported wire type {wt}")
        yield fn, wt, v


def _packed_varints(v, wt) -> list[int]:
    if wt == 0:
        return [v]
    out, pos = [], 0
    while pos < len(v):
        x, pos = _varint(v, pos)
        out.append(x)
    return out


def _signed64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


class Tensor:
    __slots__ = ("name", "dtype", "dims", "raw", "int32_data", "float_data")

    def __init__(self):
        self.name, self.dtype, self.dims, self.raw = "", 0, [], None
        self.int32_data, self.float_data = [], []

    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def values(self):
        """The tensor's values as a Python sequence of ints or floats."""
        n = self.count()
        if self.raw is not None:
            code = {FLOAT: "f", UINT8: "B", INT8: "b", INT32: "i", INT64: "q"}.get(self.dtype)
            if code is None:
                raise ConvertError(f"{self.name}: unsupported data type {self.dtype}")
            a = array(code)
            a.frombytes(bytes(self.raw))
            if sys.byteorder != "little":
                a.byteswap()
        elif self.dtype == FLOAT:
            a = array("f", self.float_data)
        elif self.dtype in (UINT8, INT8, INT32):
            a = [(_signed64(x) if self.dtype != UINT8 else x) for x in self.int32_data]
            if self.dtype == INT8:
                a = [((x + 128) & 0xFF) - 128 for x in a]
        else:
            raise ConvertError(f"{self.name}: unsupported storage for data type {self.dtype}")
        if len(a) != n:
            raise ConvertError(f"{self.name}: {len(a)} values for dims {self.dims}")
        return a


def parse_tensor(buf: memoryview) -> Tensor:
    t = Tensor()
    for fn, wt, v in fields(buf):
        if fn == 1:
            t.dims.extend(_signed64(x) for x in _packed_varints(v, wt))
        elif fn == 2:
            t.dtype = v
        elif fn == 8:
            t.name = bytes(v).decode("utf-8")
        elif fn == 9:
            t.raw = v
        elif fn == 5:
            t.int32_data.extend(_packed_varints(v, wt))
        elif fn == 4:
            if wt == 2:
                t.float_data.extend(struct.unpack(f"<{len(v) // 4}f", v))
            else:
                t.float_data.append(struct.unpack("<f", v.to_bytes(4, "little"))[0])
        elif fn == 14 and v == 1:
            raise ConvertError(f"{t.name}: external data is not supported")
    return t


def parse_node(buf: memoryview) -> tuple[str, list[str], list[str]]:
    op, ins, outs = "", [], []
    for fn, _wt, v in fields(buf):
        if fn == 1:
            ins.append(bytes(v).decode("utf-8"))
        elif fn == 2:
            outs.append(bytes(v).decode("utf-8"))
        elif fn == 4:
            op = bytes(v).decode("utf-8")
    return op, ins, outs


def load_graph(path: str):
    with open(path, "rb") as f:
        data = memoryview(f.read())
    graph = None
    for fn, wt, v in fields(data):
        if fn == 7 and wt == 2:
            graph = v
    if graph is None:
        raise ConvertError(f"{path}: no graph (not an ONNX model?)")
    nodes, inits = [], {}
    for fn, wt, v in fields(graph):
        if fn == 1 and wt == 2:
            nodes.append(parse_node(v))
        elif fn == 5 and wt == 2:
            t = parse_tensor(v)
            inits[t.name] = t
    return nodes, inits


# ------------------------------------------------------------------------------------------------
# Dequantisation
# ------------------------------------------------------------------------------------------------
def _scalar(inits, name):
    if name not in inits:
        raise ConvertError(f"missing initializer {name}")
    v = inits[name].values()
    return v


def dequant_per_tensor(q: Tensor, scale: Tensor, zp: Tensor) -> array:
    s, z = scale.values(), zp.values()
    if len(s) != 1 or len(z) != 1:
        raise ConvertError(f"{q.name}: expected a per-tensor scale and zero point")
    s, z = float(s[0]), int(z[0])
    table = [float((v - z) * s) for v in range(-128, 256)]  # index v + 128
    return array("f", [table[v + 128] for v in q.values()])


def dequant_linear_transposed(q: Tensor, scale: Tensor, zp: Tensor) -> tuple[array, list[int]]:
    """B [in, out] int8, scale/zp per output column (or per tensor) -> W [out, in] float32."""
    if len(q.dims) != 2:
        raise ConvertError(f"{q.name}: expected a 2-D weight, dims {q.dims}")
    n_in, n_out = q.dims
    s, z = list(scale.values()), list(zp.values())
    if len(s) == 1:
        s, z = s * n_out, z * n_out
    if len(s) != n_out or len(z) != n_out:
        raise ConvertError(f"{q.name}: scale/zero point size {len(s)} for {n_out} columns")
    vals = q.values()
    if not isinstance(vals, array):
        vals = array("b" if q.dtype == INT8 else "B", vals)
    out = array("f")
    for j in range(n_out):
        col = vals[j::n_out]  # column j = row j of the transpose
        sj, zj = float(s[j]), int(z[j])
        out.extend([(v - zj) * sj for v in col])
    return out, [n_out, n_in]


BERT_PARAM = re.compile(r"^(embeddings\.LayerNorm\.(weight|bias)|encoder\.layer\.\d+\.[a-zA-Z_.]+\.(weight|bias))$")
MATMUL_OUT = re.compile(r"^/encoder/layer\.(\d+)/((?:[A-Za-z_]+/)*[A-Za-z_]+)/MatMul_output_0")


def convert(onnx_path: str) -> dict[str, tuple[list[int], array]]:
    nodes, inits = load_graph(onnx_path)
    tensors: dict[str, tuple[list[int], array]] = {}

    # embeddings: Gather on the quantized table, then DequantizeLinear
    for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        base = f"embeddings.{table}.weight"
        q = inits.get(base + "_quantized")
        if q is None:
            f = inits.get(base)
            if f is None or f.dtype != FLOAT:
                raise ConvertError(f"no {base} (quantized or float) in the graph")
            tensors[base] = (list(f.dims), array("f", f.values()))
            continue
        tensors[base] = (list(q.dims), dequant_per_tensor(q, inits[base + "_scale"],
                                                          inits[base + "_zero_point"]))

    # linear weights: MatMulInteger(A_q, B_q, A_zp, B_zp)
    for op, ins, outs in nodes:
        if op == "MatMul" and len(ins) == 2 and ins[1] in inits:
            raise ConvertError(f"float MatMul with a weight ({ins[1]}) is not handled")
        if op != "MatMulInteger":
            continue
        m = MATMUL_OUT.match(outs[0])
        if not m:
            raise ConvertError(f"MatMulInteger output {outs[0]} does not name a BERT layer module")
        name = f"encoder.layer.{m.group(1)}.{m.group(2).replace('/', '.')}.weight"
        bq = ins[1]
        if not bq.endswith("_quantized") or bq not in inits:
            raise ConvertError(f"{name}: weight {bq} is not a quantized initializer")
        stem = bq[: -len("_quantized")]
        w, dims = dequant_linear_transposed(inits[bq], inits[stem + "_scale"], inits[stem + "_zero_point"])
        if name in tensors:
            raise ConvertError(f"{name} appears twice")
        tensors[name] = (dims, w)

    # float parameters kept by name
    for name, t in inits.items():
        if BERT_PARAM.match(name) and name not in tensors:
            if t.dtype != FLOAT:
                raise ConvertError(f"{name}: data type {t.dtype}, expected float32")
            tensors[name] = (list(t.dims), array("f", t.values()))
    return tensors


def check_complete(tensors) -> int:
    layers = set()
    for n in tensors:
        m = re.match(r"encoder\.layer\.(\d+)\.", n)
        if m:
            layers.add(int(m.group(1)))
    if not layers or layers != set(range(len(layers))):
        raise ConvertError(f"encoder layers found: {sorted(layers)}")
    want = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
            "embeddings.LayerNorm.bias"]
    for i in range(len(layers)):
        p = f"encoder.layer.{i}."
        for mod in ("attention.self.query", "attention.self.key", "attention.self.value",
                    "attention.output.dense", "intermediate.dense", "output.dense"):
            want += [p + mod + ".weight", p + mod + ".bias"]
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            want += [p + ln + ".weight", p + ln + ".bias"]
    missing = [w for w in want if w not in tensors]
    if missing:
        raise ConvertError(f"missing tensors: {missing[:6]}{' ...' if len(missing) > 6 else ''}")
    extra = sorted(set(tensors) - set(want))
    if extra:
        raise ConvertError(f"unexpected tensors: {extra[:6]}")
    return len(layers)


def write_safetensors(path: str, tensors) -> None:
    header, offset, order = {}, 0, sorted(tensors)
    for name in order:
        dims, a = tensors[name]
        n = 4 * len(a)
        header[name] = {"dtype": "F32", "shape": dims, "data_offsets": [offset, offset + n]}
        offset += n
    meta = {"__metadata__": {"format": "pt"}}
    meta.update(header)
    h = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in order:
            a = tensors[name][1]
            if sys.byteorder != "little":
                a = array("f", a)
                a.byteswap()
            a.tofile(f)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 1
    try:
        tensors = convert(argv[1])
        nl = check_complete(tensors)
    except (ConvertError, KeyError, OSError) as e:
        print(f"onnx_int8_bert_to_safetensors: {argv[1]}: {e}", file=sys.stderr)
        return 2
    write_safetensors(argv[2], tensors)
    print(f"onnx_int8_bert_to_safetensors: {len(tensors)} tensors, {nl} layers -> {argv[2]}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
