"""The reference engine's memory model: checked, byte-addressed state spaces.

Each PTX state space is an `AddressSpace`: a set of non-overlapping allocations
(little-endian bytes). Every access is checked; an address outside every
allocation, an access that crosses the end of its allocation, or a misaligned
access (address % size != 0) raises `MemoryFault`, which the engine turns into
a `Trap` that names the thread, the instruction and the address.

Address map (64-bit addresses):

- global: module `.global` variables from 0x0800_0000, then one buffer per
  pointer argument from 0x1000_0000, each aligned to 256 with a gap of at least
  256 bytes between allocations;
- shared (per CTA): static `.shared` variables in declaration order with their
  alignment from offset 0, then the dynamic `.extern .shared` arrays (all at
  the same address, `dynamic_shared_bytes` long);
- const: module `.const` variables from offset 0; param: kernel parameters
  from offset 0 laid out by PTX alignment; local (per thread): `.local`
  variables from offset 0;
- generic: a global address is its own generic address; shared, local and
  const addresses appear in the generic space in windows at `SHARED_WINDOW`,
  `LOCAL_WINDOW` and `CONST_WINDOW` (`cvta` maps between them), so a generic
  access dispatches on the address range.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from qgc.diagnostics import QgcError

GLOBAL_VARS_BASE = 0x0800_0000
BUFFERS_BASE = 0x1000_0000
ALLOC_ALIGN = 256
ALLOC_GAP = 256
WINDOW_SIZE = 1 << 32
SHARED_WINDOW = 0x7F00_0000_0000
LOCAL_WINDOW = 0x7E00_0000_0000
CONST_WINDOW = 0x7D00_0000_0000


class Trap(QgcError):
    """A kernel fault at run time (bad access, barrier deadlock, `trap`).

    Exit status 3.
    """

    def __init__(self, message: str):
        super().__init__(message, status=3)


class MemoryFault(Exception):
    """A checked access failed; `kind` is `out-of-bounds` or `misaligned`."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass
class Allocation:
    """`size` bytes at `base`; `label` names it in trap messages."""

    base: int
    size: int
    label: str
    data: bytearray = field(repr=False, default_factory=bytearray)
    note: str = ""

    def __post_init__(self) -> None:
        if len(self.data) < self.size:
            self.data.extend(bytes(self.size - len(self.data)))

    @property
    def end(self) -> int:
        return self.base + self.size

    def describe(self) -> str:
        note = f"{self.note}, " if self.note else ""
        return f"{self.label} ({note}{self.size} bytes at 0x{self.base:x})"


class AddressSpace:
    """One state space: allocations sorted by base address, checked access."""

    def __init__(self, name: str):
        self.name = name
        self.allocations: list[Allocation] = []
        self._bases: list[int] = []
        self._last: Allocation | None = None

    def add(self, base: int, size: int, label: str, data: bytes | None = None,
            note: str = "") -> Allocation:
        alloc = Allocation(base, size, label, bytearray(data or b""), note)
        index = bisect_right(self._bases, base)
        self._bases.insert(index, base)
        self.allocations.insert(index, alloc)
        return alloc

    def find(self, address: int, size: int) -> Allocation:
        """The allocation holding `size` bytes at `address`, or MemoryFault."""
        a = self._last
        if a is not None and a.base <= address and address + size <= a.base + a.size \
                and not address & (size - 1):
            return a
        index = bisect_right(self._bases, address) - 1
        if index >= 0:
            a = self.allocations[index]
            if address < a.end:
                if address & (size - 1):
                    raise MemoryFault("misaligned", f"address 0x{address:x} is not a multiple "
                                      f"of {size} (in {a.describe()})")
                if address + size > a.end:
                    raise MemoryFault("out-of-bounds", f"a {size}-byte access at address "
                                      f"0x{address:x} crosses the end of {a.describe()}")
                self._last = a
                return a
        raise MemoryFault("out-of-bounds", self._outside(address, index))

    def _outside(self, address: int, index: int) -> str:
        where = f"address 0x{address:x}"
        if address == 0:
            where += " (null)"
        before = self.allocations[index] if index >= 0 else None
        after = self.allocations[index + 1] if index + 1 < len(self.allocations) else None
        if before is None and after is None:
            return f"{where} is outside the {self.name} space (nothing is allocated there)"
        if after is None or (before is not None and address - before.end < after.base - address):
            return f"{where} is past the end of {before.describe()}"
        return f"{where} is before the start of {after.describe()}"

    def load(self, address: int, size: int) -> int:
        a = self.find(address, size)
        offset = address - a.base
        return int.from_bytes(a.data[offset:offset + size], "little")

    def store(self, address: int, size: int, value: int) -> None:
        a = self.find(address, size)
        offset = address - a.base
        a.data[offset:offset + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def read_bytes(self, address: int, size: int) -> bytes:
        a = self.find(address, 1) if size else None
        if a is None:
            return b""
        offset = address - a.base
        return bytes(a.data[offset:offset + size])


class ReadOnlySpace(AddressSpace):
    """`.param` and `.const`: stores are faults."""

    def store(self, address: int, size: int, value: int) -> None:
        a = self.find(address, size)
        raise MemoryFault("out-of-bounds", f"address 0x{address:x} is in read-only "
                          f"{self.name} memory ({a.describe()})")


@dataclass
class Spaces:
    """The state spaces one thread sees."""

    glob: AddressSpace
    const: AddressSpace
    param: AddressSpace
    shared: AddressSpace
    local: AddressSpace

    def generic(self, address: int) -> tuple[AddressSpace, int]:
        """Map a generic address to (space, address in that space)."""
        if SHARED_WINDOW <= address < SHARED_WINDOW + WINDOW_SIZE:
            return self.shared, address - SHARED_WINDOW
        if LOCAL_WINDOW <= address < LOCAL_WINDOW + WINDOW_SIZE:
            return self.local, address - LOCAL_WINDOW
        if CONST_WINDOW <= address < CONST_WINDOW + WINDOW_SIZE:
            return self.const, address - CONST_WINDOW
        return self.glob, address

    def space(self, name: str) -> AddressSpace:
        return self.glob if name == "global" else getattr(self, name)


WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW, "global": 0}


def to_generic(space: str, address: int) -> int:
    """`cvta.space`: an address of `space` as a generic address."""
    return (WINDOWS[space] + address) & 0xFFFF_FFFF_FFFF_FFFF if space != "global" else address


def from_generic(space: str, address: int) -> int:
    """`cvta.to.space`: a generic address as an address of `space`."""
    if space == "global":
        return address
    return (address - WINDOWS[space]) & 0xFFFF_FFFF_FFFF_FFFF


def in_window(space: str, address: int) -> bool:
    """`isspacep.space`: whether a generic address lies in `space`."""
    if space == "global":
        return not any(w <= address < w + WINDOW_SIZE for w in
                       (SHARED_WINDOW, LOCAL_WINDOW, CONST_WINDOW))
    base = WINDOWS[space]
    return base <= address < base + WINDOW_SIZE


# --------------------------------------------------------------------- layouts

@dataclass
class VarSlot:
    """A variable's place: state space, address, size, label, initial bytes."""

    name: str
    space: str
    address: int
    size: int
    label: str
    init: bytes = b""
    dynamic: bool = False


@dataclass
class Layout:
    """Where every variable and parameter of a kernel lives."""

    vars: dict[str, VarSlot] = field(default_factory=dict)
    params: dict[str, VarSlot] = field(default_factory=dict)
    shared_static: int = 0
    dynamic_shared: list[VarSlot] = field(default_factory=list)
    dynamic_align: int = 1
    local_size: int = 0

    def shared_space(self, dynamic_bytes: int) -> AddressSpace:
        space = AddressSpace("shared")
        for slot in self.vars.values():
            if slot.space == "shared" and not slot.dynamic:
                space.add(slot.address, slot.size, slot.label)
        if self.dynamic_shared:
            names = ", ".join(f"'{s.name}'" for s in self.dynamic_shared)
            space.add(self.dynamic_base(), dynamic_bytes, f"dynamic shared memory {names}")
        return space

    def dynamic_base(self) -> int:
        return align_up(self.shared_static, self.dynamic_align)

    def has_local(self) -> bool:
        return any(s.space == "local" for s in self.vars.values())

    def local_space(self) -> AddressSpace:
        space = AddressSpace("local")
        for slot in self.vars.values():
            if slot.space == "local":
                space.add(slot.address, slot.size, slot.label)
        return space

    def module_spaces(self) -> tuple[AddressSpace, AddressSpace]:
        """Fresh global and const spaces holding the module variables."""
        glob, const = AddressSpace("global"), ReadOnlySpace("const")
        for slot in self.vars.values():
            if slot.space == "global":
                glob.add(slot.address, slot.size, slot.label, slot.init)
            elif slot.space == "const":
                const.add(slot.address, slot.size, slot.label, slot.init)
        return glob, const


def buffer_bases(sizes: list[int]) -> list[int]:
    """The global address of each buffer of `sizes` bytes, in order: the
    machine gives pointers it holds as values these same addresses."""
    bases, cursor = [], BUFFERS_BASE
    for size in sizes:
        bases.append(cursor)
        cursor = align_up(cursor + size, ALLOC_ALIGN) + ALLOC_GAP
    return bases


def add_buffers(glob: AddressSpace, buffers: list[tuple[int, str, bytes]]) -> list[int]:
    """Place one buffer per (arg index, note, bytes); returns their bases."""
    bases = buffer_bases([len(data) for _, _, data in buffers])
    for base, (index, note, data) in zip(bases, buffers, strict=True):
        glob.add(base, len(data), f"buffer {index}", data, note)
    return bases
