"""The token protocol: the GPU vocabulary and what each token means.

A launch runs as a stream of GPU tokens (new embedding rows of the merged
model). Five kinds, each with its fields (docs/machine.md, "Token protocol"):

- `A(k, a)`   — record header: record slot k of the current step writes the
  machine word at address `a` (bit 9 of `a` set: the launch area or a register);
- `D(j, top, v)` — byte j (0..3) of the current record is `v`; bytes go low
  to high and the record ends at the `top` byte (higher bytes are zero);
- `EXEC(w, b)` — warp w executes machine block b (appended by the host);
- `END(n)`    — the model's report that the step is over: the warp continues
  at block n, or has exited (`n == blocks`); `BAR(n)` (an `END` with `bar`
  set): every live lane of the warp waits at a barrier, and continues at
  block n once the host has released its CTA;
- `TRAP(s, l)` — the model's report, in place of the step's records, that
  lane l's access at memory site s (the kernel's s-th global or shared
  `ld`/`st`/`atom`) is out of bounds or misaligned: the first faulting site
  of the block, its lowest lane. The launch stops there.

A record writes one word of machine state (`ADDRESS_BITS` = 10): addresses
below 512 are the machine memory (508 of them usable), 512–639 the launch
area (the launch's geometry and each warp's control words, `LaunchArea`),
768–895 the registers of the executing warp (`768 + 32·lane + register`). A
kernel whose memory takes more than four banks has wider record addresses
(`Vocabulary.address_bits`, 11 or 12: up to `MAX_MEMORY_WORDS`), the launch
area and the registers moving up with the top two bits.

The launch prompt is records (the initial memory and launch area); after each
`EXEC` the model's greedy continuation is the step's records (stores,
registers the block leaves live, changed control words), then `END` (or a
`TRAP` alone). The
host only appends tokens, picks the next warp, releases barriers and formats
numbers.

This module is pure Python and xDSL's builtin attributes (no torch): the
lowering, the engines and the runtime share it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from typing import Any

from xdsl.dialects import builtin
from xdsl.ir import Attribute

#: The token protocol's version, the one number layers files (`protocol_version`
#: in the metadata, as a string) and checkpoints (`qgc.json`, as an integer)
#: record: it counts incompatible changes of what a file's layers and GPU rows
#: mean to a host. The "version 3" of docs/machine.md and README.md counts
#: revisions of the token layout's design, not a number any file carries.
PROTOCOL_VERSION = 2

KINDS = ("A", "D", "EXEC", "END", "TRAP")
#: Bits of a record address: 512 word-memory addresses, 128 launch-area
#: slots at 512, the executing warp's registers at 768 (for a memory of more
#: than four banks, `Vocabulary.address_bits`, `launch_area`, `register_area`).
ADDRESS_BITS = 10
#: Words of a memory bank: the rows of one memory head (its 128th row stays
#: unwritten); a 10-bit record address reaches four banks, a 12-bit one 16.
BANK_WORDS = 127
KEY_BITS = 7
MAX_BANK_BITS = 4
MAX_MEMORY_WORDS = BANK_WORDS << MAX_BANK_BITS
#: Registers a lane may have at this level (keys warp + 8·register stay
#: below the memory head's reserved slot 127).
MAX_REGISTERS = 15
#: Bits of a block number (`max-blocks` ≤ 256): a lane's byte of the `lanes` word.
BLOCK_BITS = 8
BYTES = 4
LANES = 4
LANE_BITS = 2


def kernel_fingerprint(kernel: object) -> str:
    """A digest of the machine listing (the `simt.kernel` as printed): a
    build's host must run the kernel its layers were compiled from."""
    return hashlib.sha256(str(kernel).encode()).hexdigest()[:16]


def address_bits_for(bank_bits: int) -> int:
    """The record address width of a memory of 2^bank_bits banks: the
    memory below the top bit, the launch area and registers above."""
    return max(ADDRESS_BITS, KEY_BITS + bank_bits + 1)


class LaunchArea:
    """Launch-area slots: per warp w (< 8) sixteen words from 16·w, each a
    control or geometry word of the warp (bytes per lane or per axis; `shared`
    and `window`: the first word and the size in words of its CTA's shared
    window; `warp`: the bytes `%warpid`, `%nwarpid`)."""

    STRIDE = 16
    FIELDS = ("ctaid", "ntid", "nctaid", "tid.x", "tid.y", "tid.z", "lanes", "preds",
              "shared", "spill", "absent", "window", "warp", "flags")
    #: A lane's byte in the `lanes` word is its next block relative to the
    #: warp's (XOR); these are the bits of its byte in the `flags` word:
    #: exited, waiting at a barrier.
    EXITED, WAITING = 0, 1

    @classmethod
    def slot(cls, warp: int, field: str) -> int:
        return cls.STRIDE * warp + cls.FIELDS.index(field)


@dataclass(frozen=True)
class Token:
    """One GPU token with its fields (the fields its kind does not use are 0)."""

    kind: str
    k: int = 0        # A: record slot
    a: int = 0        # A: word address
    j: int = 0        # D: byte index
    top: int = 0      # D: last byte of the record
    v: int = 0        # D: byte value
    w: int = 0        # EXEC: warp
    b: int = 0        # EXEC: block; END: next block (== blocks: exited)
    bar: int = 0      # END: the warp waits at a barrier
    site: int = 0     # TRAP: the memory site
    lane: int = 0     # TRAP: the lane

    def spelled(self) -> str:
        if self.kind == "A":
            return f"A({self.k},{self.a})"
        if self.kind == "D":
            return f"D({self.j}{'*' if self.top else ''},{self.v})"
        if self.kind == "EXEC":
            return f"EXEC({self.w},{self.b})"
        if self.kind == "TRAP":
            return f"TRAP({self.site},{self.lane})"
        return f"{'BAR' if self.bar else 'END'}({self.b})"


@dataclass(frozen=True)
class Vocabulary:
    """The GPU tokens of one compiled kernel: `records` record slots per step,
    `blocks` machine blocks, `warps` warp slots, `sites` memory sites that
    can trap; `ports[b]`: the registers block b reads from the register file,
    in port order. Token ids are dense from 0 (the runtime adds the base
    vocabulary's size)."""

    records: int
    blocks: int
    warps: int
    ports: tuple[tuple[int, ...], ...] = ()
    sites: int = 0
    #: bits of a record address (`address_bits_for` the kernel's memory banks)
    address_bits: int = ADDRESS_BITS

    @property
    def launch_area(self) -> int:
        return 1 << (self.address_bits - 1)

    @property
    def register_area(self) -> int:
        return 3 << (self.address_bits - 2)

    def register_address(self, lane: int, register: int) -> int:
        return self.register_area + 32 * lane + register

    @property
    def site_bits(self) -> int:
        return max(1, (self.sites - 1).bit_length()) if self.sites else 0

    @property
    def n_ports(self) -> int:
        return max((len(p) for p in self.ports), default=0)

    @property
    def warp_bits(self) -> int:
        return max(1, (self.warps - 1).bit_length())

    @cached_property
    def _offsets(self) -> dict[str, int]:
        sizes = {"A": self.records << self.address_bits, "D": BYTES * 2 * 256,
                 "EXEC": self.warps * self.blocks, "END": 2 * self.blocks + 1,
                 "TRAP": self.sites * LANES}
        out, at = {}, 0
        for kind in KINDS:
            out[kind] = at
            at += sizes[kind]
        out["size"] = at
        return out

    @property
    def size(self) -> int:
        return self._offsets["size"]

    def id_of(self, t: Token) -> int:
        base = self._offsets[t.kind]
        if t.kind == "A":
            return base + (t.k << self.address_bits) + t.a
        if t.kind == "D":
            return base + ((t.j * 2 + t.top) << 8) + t.v
        if t.kind == "EXEC":
            return base + t.w * self.blocks + t.b
        if t.kind == "TRAP":
            return base + t.site * LANES + t.lane
        return base + t.b + (self.blocks + 1) * t.bar

    def token(self, token_id: int) -> Token:
        if not 0 <= token_id < self.size:
            raise ValueError(f"token id {token_id} is outside the GPU vocabulary "
                             f"({self.size} tokens)")
        for kind in reversed(KINDS):
            base = self._offsets[kind]
            if token_id >= base:
                r = token_id - base
                break
        if kind == "A":
            return Token("A", k=r >> self.address_bits,
                         a=r & ((1 << self.address_bits) - 1))
        if kind == "D":
            return Token("D", j=(r >> 8) // 2, top=(r >> 8) % 2, v=r & 255)
        if kind == "EXEC":
            return Token("EXEC", w=r // self.blocks, b=r % self.blocks)
        if kind == "TRAP":
            return Token("TRAP", site=r // LANES, lane=r % LANES)
        bar = int(r > self.blocks)
        return Token("END", b=r - (self.blocks + 1) * bar, bar=bar)

    def tokens(self) -> list[Token]:
        return [self.token(i) for i in range(self.size)]

    # ------------------------------------------------------------ serialised forms
    def to_json(self) -> dict[str, Any]:
        """The vocabulary as JSON fields (layers files, checkpoints); `size` is
        derived, written for readers; `address_bits` only when it is not the
        10 of a memory of four banks or fewer."""
        wide = {"address_bits": self.address_bits} if self.address_bits != ADDRESS_BITS else {}
        return {"records": self.records, "blocks": self.blocks, "warps": self.warps,
                "sites": self.sites, "ports": [list(p) for p in self.ports], **wide,
                "size": self.size}

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> Vocabulary:
        return cls(fields["records"], fields["blocks"], fields["warps"],
                   ports=tuple(tuple(p) for p in fields["ports"]), sites=fields.get("sites", 0),
                   address_bits=fields.get("address_bits", ADDRESS_BITS))

    def to_attr(self) -> builtin.DictionaryAttr:
        """The JSON fields (less `size`) as the dictionary attribute a
        `tensor.program` carries (`qgc.vocab`) and `weights.model` holds."""
        fields = {k: v for k, v in self.to_json().items() if k != "size"}
        return builtin.DictionaryAttr({k: _json_attr(v) for k, v in fields.items()})

    @classmethod
    def from_attr(cls, attr: builtin.DictionaryAttr) -> Vocabulary:
        return cls.from_json({k: _attr_json(v) for k, v in attr.data.items()})

    # ------------------------------------------------------------ embedding fields
    def inputs(self, t: Token) -> dict[str, list[int]]:
        """The bits this token's embedding carries (the tensor program's inputs):
        kind flags, its fields, and token-level predicates precomputed into the
        embedding so that no layer has to compute them."""
        kind = {k: int(t.kind == k) for k in KINDS}
        is_d, top = kind["D"], int(t.kind == "D" and t.top)
        own = [0] * (8 * BYTES)
        if is_d:
            own[8 * t.j:8 * t.j + 8] = bits(t.v, 8)
        next_j = [0] * BYTES
        if t.kind == "A":
            next_j[0] = 1
        elif is_d and not t.top and t.j + 1 < BYTES:
            next_j[t.j + 1] = 1
        fields = {
            "is_a": [kind["A"]], "is_d": [is_d], "is_exec": [kind["EXEC"]],
            "is_top": [top], "is_record": [kind["A"] | is_d],
            "reads_outbox": [kind["A"] | is_d | kind["EXEC"]],
            "rec_k": onehot(t.k if t.kind == "A" else None, self.records),
            "rec_a": bits(t.a if t.kind == "A" else 0, self.address_bits),
            "stage_byte": [int(is_d and t.j == i) for i in range(BYTES - 1)],
            "read_byte": [int(top and i < t.j) for i in range(BYTES - 1)],
            "own_word": own,
            "next_j": next_j,
            "exec_w": bits(t.w if t.kind == "EXEC" else 0, self.warp_bits),
            "exec_b": onehot(t.b if t.kind == "EXEC" else None, self.blocks),
            "exec_b_bits": bits(t.b if t.kind == "EXEC" else 0, BLOCK_BITS),
            "code": self.code(t),
        }
        return {name: v for name, v in fields.items() if v}   # no zero-width inputs

    #: The step's outputs, in order: the fields of the token the machine names next.
    OUTPUTS = ("next_kind", "next_k", "next_a", "next_j", "next_top", "next_v", "next_end",
               "next_bar", "next_site", "next_lane")

    def output_fields(self, t: Token) -> dict[str, list[int]]:
        """The outputs that name token `t` (fields of other kinds all zero)."""
        is_a, is_d, is_end = t.kind == "A", t.kind == "D", t.kind == "END"
        is_trap = t.kind == "TRAP"
        return {
            "next_kind": [int(t.kind == k) for k in KINDS],
            "next_k": onehot(t.k if is_a else None, self.records),
            "next_a": bits(t.a if is_a else 0, self.address_bits),
            "next_j": onehot(t.j if is_d else None, BYTES),
            "next_top": [int(is_d and t.top)],
            "next_v": bits(t.v if is_d else 0, 8),
            "next_end": onehot(t.b if is_end else None, self.blocks + 1),
            "next_bar": [int(is_end and t.bar)],
            "next_site": bits(t.site if is_trap else 0, self.site_bits),
            "next_lane": bits(t.lane if is_trap else 0, LANE_BITS if self.sites else 0),
        }

    def code(self, t: Token) -> list[int]:
        """The token's *code*: its output fields side by side. Every embedding
        row carries it; the last compiled layer writes the next token's code,
        greatly amplified, onto the same coordinates, so the LM head's argmax
        is that token."""
        fields = self.output_fields(t)
        return [b for name in self.OUTPUTS for b in fields[name]]

    def from_outputs(self, out: dict[str, list[int]]) -> Token:
        """The token the step's output fields name (`next_*` outputs)."""
        kind = [k for k, bit in zip(KINDS, out["next_kind"], strict=True) if bit]
        if len(kind) != 1:
            raise ValueError(f"the output names {len(kind)} token kinds")
        k = kind[0]
        if k == "A":
            return Token("A", k=index_of(out["next_k"]), a=value(out["next_a"]))
        if k == "D":
            return Token("D", j=index_of(out["next_j"]), top=out["next_top"][0],
                         v=value(out["next_v"]))
        if k == "END":
            return Token("END", b=index_of(out["next_end"]), bar=out["next_bar"][0])
        if k == "TRAP":
            site = value(out.get("next_site", []))
            if site >= self.sites:
                raise ValueError(f"the output names memory site {site} of {self.sites}")
            return Token("TRAP", site=site, lane=value(out.get("next_lane", [])))
        raise ValueError("the model never emits EXEC")


def _json_attr(value: int | list) -> Attribute:
    if isinstance(value, list):
        return builtin.ArrayAttr([_json_attr(v) for v in value])
    return builtin.IntAttr(value)


def _attr_json(attr: Attribute) -> int | list:
    if isinstance(attr, builtin.ArrayAttr):
        return [_attr_json(a) for a in attr.data]
    if isinstance(attr, builtin.IntAttr):
        return attr.data
    raise ValueError(f"a GPU vocabulary holds integers and lists of them, not {attr}")


def bits(x: int, width: int) -> list[int]:
    return [(x >> i) & 1 for i in range(width)]


def value(bs: list[int]) -> int:
    return sum(int(b) << i for i, b in enumerate(bs))


def onehot(i: int | None, n: int) -> list[int]:
    return [int(i == j) for j in range(n)]


def index_of(onehot_bits: list[int]) -> int:
    ones = [i for i, b in enumerate(onehot_bits) if b]
    if len(ones) != 1:
        raise ValueError(f"expected one bit set, got {ones}")
    return ones[0]


def record_tokens(k: int, address: int, word: int) -> list[Token]:
    """A record: `A(k, address)` then the bytes of `word` up to its top
    non-zero byte (at least one)."""
    top = max((i for i in range(BYTES) if (word >> (8 * i)) & 255), default=0)
    return [_address_token(k, address)] + [_byte_token(i, int(i == top), (word >> (8 * i)) & 255)
                                           for i in range(top + 1)]


# Tokens are frozen: the host loops share one of each (a frozen dataclass's
# construction is most of a record's cost in a batch's host loops).
@lru_cache(maxsize=65536)
def _address_token(k: int, address: int) -> Token:
    return Token("A", k=k, a=address)


@cache                              # BYTES × 2 × 256 at most
def _byte_token(j: int, top: int, v: int) -> Token:
    return Token("D", j=j, top=top, v=v)
