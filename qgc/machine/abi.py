"""The machine's ABI: what a launch and a kernel agree on.

The passes that compile for the machine, the `simt` and `tensor` engines and
the host of the token protocol all read these rules here, so they agree:

- `pick_kernel`: the `simt.kernel` a launch runs;
- `memory_layout`: memory is one map of 32-bit words (`mem_words` of them),
  laid out per launch: the parameter area at word 0 (one word per kernel
  parameter: a pointer's word is its buffer's word address plus the launch's
  element offset, a scalar its value), then one bounds pair (base word, size
  in words) per pointer parameter and the high words of 64-bit scalars, then
  the buffers packed one after another (the launch's, then those of the
  module variables, `module_args`), the CTAs' shared windows, and the
  threads' spill slots (`SpillArea`);
- `encode_element` / `decode_element`: an element's machine words;
- `bank_bits` / `banked_words`: the memory in banks of `BANK_WORDS` words;
- `shfl_source`: the lane a warp shuffle reads;
- `initial_bytes`: a module variable's contents before the launch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.protocol import BANK_WORDS
from qgc.runtime.launch import (
    ELEMENT_TYPES,
    TYPE_SIZES,
    Arg,
    Launch,
    LaunchError,
    select_kernel,
)
from qgc.runtime.memory import buffer_bases
from qgc.runtime.ref_decode import float_imm

M32 = 0xFFFF_FFFF


def pick_kernel(root: Operation, name: str | None) -> simt.KernelOp:
    kernels = [root] if isinstance(root, simt.KernelOp) else simt.kernels_of(root)
    if not kernels:
        raise LaunchError("the module holds no simt kernel (run the simt pipeline first)")
    return select_kernel(kernels, name, "module")


# -------------------------------------------------------------------- elements

def encode_element(elem: str, value) -> list[int]:
    """The machine words of one element: a 64-bit one takes two (low word
    first), a sub-word one takes a word of its own (zero-extended)."""
    if elem == "f32":
        return [struct.unpack("<I", struct.pack("<f", value))[0]]
    if elem == "f64":           # its bits, as a u64's
        value = struct.unpack("<Q", struct.pack("<d", value))[0]
    size = TYPE_SIZES[elem]
    bits = int(value) & ((1 << (8 * size)) - 1)
    return [bits & M32, bits >> 32] if size == 8 else [bits]


def decode_element(elem: str, words: list[int]):
    if elem == "f32":
        return struct.unpack("<f", struct.pack("<I", words[0]))[0]
    size = TYPE_SIZES[elem]
    bits = (words[0] | words[1] << 32) if size == 8 else words[0] & ((1 << (8 * size)) - 1)
    if elem == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    if elem[0] == "s" and bits >> (8 * size - 1):
        bits -= 1 << (8 * size)
    return bits


def words_per_element(elem: str) -> int:
    return 2 if TYPE_SIZES[elem] == 8 else 1


# ---------------------------------------------------------------------- layout

@dataclass
class Layout:
    """Where a launch's data lives in the machine's memory."""

    words: list[int]
    bases: dict[int, int]         # pointer parameter index -> first word of its buffer
    sizes: dict[int, int]         # pointer parameter index -> buffer size in words
    param_area: int
    bounds: int
    total: int
    shared_base: int = 0          # first word of CTA 0's shared memory
    shared_words: int = 0         # words of shared memory per CTA
    spill: SpillArea | None = None  # the threads' spill slots, after the shared windows
    packed: set[int] = field(default_factory=set)   # byte/halfword buffers packed in words

    def regions(self, kernel: simt.KernelOp) -> dict[str, int]:
        out = {"params": len(kernel.params), "bounds": self.bounds}
        if kernel.wide_params():
            out["high words"] = len(kernel.wide_params())
        for i, size in self.sizes.items():
            out[f"buffer {i} ({kernel.params[i][0]})"] = size
        # the shared windows end where the spill area's alignment starts
        shared_end = self.total if self.spill is None else \
            self.shared_base + self.shared_words * self.spill.ctas
        if self.shared_words:
            out["shared"] = shared_end - self.shared_base
        if self.spill:
            if self.spill.base > shared_end:
                out["bank alignment"] = self.spill.base - shared_end
            out["spill"] = self.spill.total
        return out


@dataclass(frozen=True)
class SpillArea:
    """Every thread of the launch (all CTAs) has `words` words of its own,
    its spill slots and then its `.local` frame, warp by warp: lane l of
    warp w (the CTA's warps in order, then the next CTA's) keeps word k at
    base + w * `stride` + l * words + k. The base and the warp stride are
    multiples of `align` (the memory's bank count), so a slot's bank is
    known when the kernel is compiled (`spill_bank`): a reload reads one
    bank's head instead of every bank's."""

    base: int
    words: int
    threads: int                  # threads per CTA
    ctas: int
    slots: int | None = None      # spill slots of `words`; the rest is the local frame
    align: int = 1

    @property
    def warps(self) -> int:
        """Warps per CTA."""
        return -(-self.threads // simt.LANES)

    @property
    def stride(self) -> int:
        """Words from one warp's slots to the next's (a multiple of `align`)."""
        return _round_up(simt.LANES * self.words, self.align)

    @property
    def total(self) -> int:
        return self.stride * self.warps * self.ctas

    def word(self, cta: int, tid: int, slot: int) -> int:
        warp, lane = divmod(tid, simt.LANES)
        return self.base + (cta * self.warps + warp) * self.stride + lane * self.words + slot

    def describe(self) -> str:
        """The diagnostic's part for the spill area."""
        slots = self.words if self.slots is None else self.slots
        what = " and ".join(part for part in (
            f"{slots} spill" if slots else "", f"{self.words - slots} local" if
            self.words > slots else "") if part)
        pad = self.total - self.words * self.threads * self.ctas
        padding = f" ({pad} of them to align warps with the {self.align} banks)" if pad else ""
        return f", {what} words for each of {self.threads * self.ctas} threads{padding}"


def spill_bank(words: int, lane: int, slot: int, bank_bits: int) -> int:
    """The bank of a lane's word `slot` in a memory of 2^`bank_bits` banks,
    `words` words per thread (`SpillArea`: the same in every warp)."""
    return (lane * words + slot) & ((1 << bank_bits) - 1)


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


def spill_area(kernel: simt.KernelOp, launch: Launch, base: int) -> SpillArea | None:
    """The threads' own words, from the first bank-aligned word at or after
    `base`: the spill slots of a kernel that `simt-allocate-registers`
    spilled, then the `.local` frame."""
    if not kernel.thread_words:
        return None
    align = 1 << bank_bits(kernel.mem_words.value.data)
    return SpillArea(_round_up(base, align), kernel.thread_words, launch.threads_per_block,
                     launch.ctas, kernel.spill_size, align)


def _check_arg(i: int, arg, pname: str, ptype: str) -> None:
    unit = simt.POINTER_TYPES.get(ptype)
    if unit is not None:
        if not arg.pointer:
            raise LaunchError(f"args[{i}]: parameter '{pname}' is a pointer on the machine; "
                              f"a scalar ({arg.type}) cannot be passed to it")
        if arg.type not in ELEMENT_TYPES:
            raise LaunchError(f"args[{i}]: {arg.type} buffers are not yet supported by the "
                              "machine")
        size = TYPE_SIZES[arg.type]
        if unit < 4 and size != unit:
            raise LaunchError(f"args[{i}]: a {arg.spelled} buffer cannot be passed to "
                              f"parameter '{pname}', which the kernel accesses in "
                              f"{8 * unit}-bit elements")
        if unit == 4 and len(arg.data or []) * size % 4:
            raise LaunchError(f"args[{i}]: a {arg.spelled} buffer of "
                              f"{len(arg.data or []) * size} bytes cannot be passed to "
                              f"parameter '{pname}', which the kernel accesses in 32-bit words: "
                              "the machine packs its bytes into whole words")
        if unit == 4 and arg.offset * size % 4:
            raise LaunchError(f"args[{i}]: offset {arg.offset} into a {arg.spelled} buffer that "
                              f"the kernel accesses in 32-bit words: the machine needs a whole "
                              "word")
        return
    if arg.pointer:
        raise LaunchError(f"args[{i}]: a pointer ({arg.spelled}) cannot be passed to "
                          f"parameter '{pname}' of type .{ptype}")
    bits = ptx.TYPE_BITS[ptype]
    if TYPE_SIZES[arg.type] * 8 != bits or \
            ((arg.type[0] == "f") != (ptype[0] == "f") and ptype[0] != "b"):
        raise LaunchError(f"args[{i}]: a {arg.type} value cannot be passed to "
                          f"parameter '{pname}' of type .{ptype}")


def memory_layout(kernel: simt.KernelOp, launch: Launch) -> Layout:
    """Check the launch's arguments against the kernel and lay memory out."""
    params = kernel.params
    given = kernel.launch_params
    if len(launch.args) != given:
        raise LaunchError(f"kernel '{kernel.kernel_name}' takes {given} argument"
                          f"{'s' if given != 1 else ''}, the launch gives "
                          f"{len(launch.args)}")
    for i, (arg, (pname, ptype)) in enumerate(zip(launch.args, params, strict=False)):
        _check_arg(i, arg, pname, ptype)
    launch = replace(launch, args=launch.args + module_args(kernel))
    pointers = kernel.pointer_params()
    area = kernel.param_area_words
    bases: dict[int, int] = {}
    sizes: dict[int, int] = {}
    cursor = area
    for i in pointers:
        bases[i] = cursor
        sizes[i] = len(buffer_words(launch.args[i], params[i][1]))
        cursor += sizes[i]
    shared_base, shared = cursor, kernel.shared_window(launch.dynamic_shared_bytes)
    ctas = launch.ctas
    total = cursor + shared * ctas
    spill = spill_area(kernel, launch, total)
    total = spill.base + spill.total if spill else total
    capacity = kernel.mem_words.value.data
    if total > capacity:
        buffers = ", ".join(f"{sizes[i]} for '{params[i][0]}'" for i in pointers)
        shared_part = f", {shared} of shared memory for each of {ctas} CTAs" if shared else ""
        shared_part += spill.describe() if spill else ""
        highs = len(kernel.wide_params())
        high_part = f", {highs} for 64-bit parameters' high words" if highs else ""
        if kernel.pointer_values is not None:
            high_part += f", {len(pointers)} for pointer values"
        raise LaunchError(f"the launch needs {total} words of machine memory ({len(params)} "
                          f"for parameters, {2 * len(pointers)} for bounds{high_part}, {buffers}"
                          f"{shared_part}), the machine has {capacity} (option mem-words)")
    words = [0] * capacity
    for i, arg in enumerate(launch.args):
        if i in bases:
            words[i] = (bases[i] + offset_words(arg, params[i][1])) & M32
            words[bases[i]:bases[i] + sizes[i]] = buffer_words(arg, params[i][1])
            bw = kernel.bounds_word(i)
            words[bw], words[bw + 1] = bases[i], sizes[i]
        else:
            value = encode_element(arg.type, arg.value)
            words[i] = value[0]
            if len(value) == 2:
                words[kernel.high_word(i)] = value[1]
    if kernel.pointer_values is not None:
        _write_ref_words(kernel, launch, bases, words)
    packed = {i for i in pointers if is_packed(launch.args[i], params[i][1])}
    return Layout(words, bases, sizes, len(params), 2 * len(pointers), total, shared_base,
                  shared, spill, packed)


def module_args(kernel: simt.KernelOp) -> list[Arg]:
    """The buffers of the kernel's module variables (`module_vars`), as
    arguments to its trailing parameters: their initial bytes in the
    elements the kernel accesses them in (whole words, zero-padded, unless
    every access is a byte or every one a halfword)."""
    out = []
    for (name, _, data), (_, ptype) in zip(kernel.module_data(),
                                           kernel.params[kernel.launch_params:], strict=True):
        unit = simt.POINTER_TYPES[ptype]
        data += bytes(-len(data) % unit)
        out.append(Arg(f"u{8 * unit}", True, [int.from_bytes(data[k:k + unit], "little")
                                              for k in range(0, len(data), unit)], name=name))
    return out


def is_packed(arg, ptype: str) -> bool:
    """Whether a buffer argument's bytes or halfwords lie packed in the words
    of a word buffer (`ptr`), as in memory."""
    return ptype == "ptr" and TYPE_SIZES[arg.type] < 4


def offset_words(arg, ptype: str) -> int:
    """The launch's element offset into a buffer argument, in words (whole
    words in a packed buffer: `_check_arg`)."""
    if is_packed(arg, ptype):
        return arg.offset * TYPE_SIZES[arg.type] // 4
    return arg.offset * words_per_element(arg.type)


def buffer_words(arg, ptype: str) -> list[int]:
    """A buffer argument's machine words: one element per word (or two) in
    its own width; bytes and halfwords packed little-endian in a word buffer."""
    data = arg.data or []
    if is_packed(arg, ptype):
        raw = b"".join(encode_element(arg.type, v)[0].to_bytes(TYPE_SIZES[arg.type], "little")
                       for v in data)
        return [int.from_bytes(raw[k:k + 4], "little") for k in range(0, len(raw), 4)]
    return [w for v in data for w in encode_element(arg.type, v)]


def _write_ref_words(kernel: simt.KernelOp, launch: Launch, bases: dict[int, int],
                     words: list[int]) -> None:
    """Each pointer parameter's translation word: its buffer's global address
    (the reference engine's) less `unit ·` its first word, so that a pointer
    held as a value is the address the reference engine gives it."""
    pointers = [i for i in kernel.pointer_params() if i < kernel.launch_params]
    addresses = buffer_bases([len(launch.args[i].data or []) * TYPE_SIZES[launch.args[i].type]
                              for i in pointers])
    pointers += range(kernel.launch_params, len(kernel.params))
    addresses += [address for _, address, _ in kernel.module_data()]
    for i, address in zip(pointers, addresses, strict=True):
        unit = simt.POINTER_TYPES[kernel.params[i][1]]
        words[kernel.ref_word(i)] = (address - unit * bases[i]) & M32


def read_buffers(launch: Launch, layout: Layout, word: Callable[[int], int]
                 ) -> list[list | None]:
    """Every argument's buffer decoded from the memory after the run (`word`:
    address → word); None for a scalar."""
    buffers: list[list | None] = []
    for i, arg in enumerate(launch.args):
        if i not in layout.bases:
            buffers.append(None)
            continue
        base, per = layout.bases[i], words_per_element(arg.type)
        if i in layout.packed:
            size = TYPE_SIZES[arg.type]
            raw = b"".join(word(base + k).to_bytes(4, "little") for k in range(layout.sizes[i]))
            buffers.append([decode_element(arg.type, [int.from_bytes(raw[k:k + size], "little")])
                            for k in range(0, len(raw), size)])
            continue
        buffers.append([decode_element(arg.type, [word(base + k + j) for j in range(per)])
                        for k in range(0, layout.sizes[i], per)])
    return buffers


# ----------------------------------------------------------------------- banks

def bank_bits(mem_words: int) -> int:
    """log2 of the banks `mem_words` words of memory take (127 per bank)."""
    return max(0, (-(-mem_words // BANK_WORDS) - 1).bit_length())


def banked_words(words: int) -> int:
    """The memory of whole banks that holds `words` words."""
    return BANK_WORDS << bank_bits(words)


# ---------------------------------------------------------------- warp shuffle

def shfl_source(mode: str) -> Callable[[int, int, int], tuple[int, bool]]:
    """(lane, b, c) → (the lane to read, in range), per the PTX ISA's shfl
    pseudo-code with every lane field masked to the 4 lanes (out of range: the
    lane itself)."""
    m = simt.LANES - 1

    def source(lane: int, b: int, c: int) -> tuple[int, bool]:
        bval, cval, seg = b & m, c & m, (c >> 8) & m
        max_lane = (lane & seg) | (cval & ~seg)
        if mode == "up":
            j, ok = lane - bval, lane - bval >= max_lane
        elif mode == "down":
            j, ok = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j, ok = lane ^ bval, (lane ^ bval) <= max_lane
        else:
            j = (lane & seg) | (bval & ~seg)
            ok = j <= max_lane
        return (j, True) if ok else (lane, False)
    return source


def initial_bytes(var: ptx.VarOp) -> bytes:
    """The bytes a `.global`/`.const` variable's initializer gives it
    (little-endian elements of its type; the elements it leaves out are
    zero); ValueError for a literal that is not a number."""
    if var.init is None:
        return b""
    t = var.type.data
    size = max(1, ptx.TYPE_BITS[t] // 8)
    out = bytearray()
    for item in var.init.data:
        operand = ptx.decode_operand(item.data)
        if not isinstance(operand, ptx.Imm):
            raise ValueError(f"initializer '{item.data}' of '{var.sym_name.data}' is not "
                             "supported")
        value = float_imm(operand, "f32") if t == "f32" else operand.value & ((1 << 8 * size) - 1)
        out += value.to_bytes(size, "little")
    return bytes(out)
