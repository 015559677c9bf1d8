"""PTX text → `ptx` dialect, with the PTX file's positions as op locations."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from xdsl.dialects import builtin
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr
from xdsl.ir import Operation

from qgc.diagnostics import SourceError
from qgc.dialects import ptx


@cache
def _parser() -> Lark:
    grammar = (Path(__file__).parent / "ptx.lark").read_text()
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                maybe_placeholders=False)


def grammar_lines() -> int:
    return len((Path(__file__).parent / "ptx.lark").read_text().splitlines())


def parse_ptx(text: str, filename: str = "<stdin>") -> builtin.ModuleOp:
    """Parse PTX source into `builtin.module { ptx.module ... }`; raises SourceError."""
    _reject_debug_build(text, filename)
    _reject_calls(text, filename)
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, filename) from None
    builder = _Builder(filename, text)
    module = builtin.ModuleOp([builder.module(tree)])
    return module


_DEBUG_SECTION = re.compile(r"^[ \t]*\.section[ \t]+\.debug_info", re.M)


def _reject_debug_build(text: str, filename: str) -> None:
    """`nvcc -G` PTX keeps every value in generic memory and calls helpers; say so
    up front rather than fail on its first call sequence."""
    match = _DEBUG_SECTION.search(text)
    if match:
        line = text.count("\n", 0, match.start()) + 1
        raise SourceError(filename, line, 1, "debug PTX (`nvcc -G`) is not supported; "
                          "compile without -G (-lineinfo is fine)", text)


#: `call{.uni} {(ret),} name` (nvcc spreads its operands over lines)
_CALL = re.compile(r"^([ \t]*)call(\.uni)?\s+(\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)", re.M)


def _reject_calls(text: str, filename: str) -> None:
    """A call of a device function the compiler did not inline (its call
    sequence declares `.param`s in a nested scope): name the instruction and
    the function rather than fail on the sequence's first declaration."""
    match = _CALL.search(text)
    if match:
        line = text.count("\n", 0, match.start()) + 1
        raise SourceError(filename, line, len(match[1]) + 1,
                          f"'call' (of `{match[4]}`) is not yet supported: qgc runs "
                          "kernels whose device functions are inlined (no "
                          "`__noinline__`, no recursion, no `printf`)", text)


def _syntax_error(err: UnexpectedInput, text: str, filename: str) -> SourceError:
    line, column = getattr(err, "line", 0), getattr(err, "column", 0)
    if isinstance(err, UnexpectedEOF) or line in (None, -1, 0):
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        return SourceError(filename, line, column, "unexpected end of file", text)
    if isinstance(err, UnexpectedCharacters):
        char = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        return SourceError(filename, line, column, f"unexpected character '{char}'", text)
    assert isinstance(err, UnexpectedToken)
    token = err.token
    if token.type == "$END":
        lines = text.splitlines() or [""]
        return SourceError(filename, len(lines), len(lines[-1]) + 1,
                           "unexpected end of file", text)
    if token.type in _CATCH_ALL_TOKENS:  # the lexer's fallback swallowed a stray character
        return SourceError(filename, line, column,
                           f"unexpected character '{token.value[0]}'", text)
    expected = _describe_expected(err.expected)
    return SourceError(filename, line, column,
                       f"unexpected '{token.value}'" + (f", expected {expected}" if expected else ""),
                       text)


_CATCH_ALL_TOKENS = ("SECTION_BODY", "LOC_ATTRS")
_NAMES = {"SEMICOLON": "';'", "COMMA": "','", "RBRACE": "'}'", "LBRACE": "'{'",
          "REGISTER": "a register", "OPCODE": "an instruction", "IDENT": "an identifier",
          "INT": "an integer", "NUMBER": "a number", "TYPE": "a type", "LABEL": "a label",
          "RPAR": "')'", "LPAR": "'('", "RSQB": "']'", "LSQB": "'['"}


def _describe_expected(expected: set[str]) -> str:
    names = sorted({_NAMES.get(e, "") for e in expected} - {""})
    return " or ".join(names[:4])


class _Builder:
    """Walks the lark tree and builds ops; the grammar fixes the tree's shape."""

    def __init__(self, filename: str, text: str):
        self.filename, self.text = filename, text

    def loc(self, node: Tree | Token) -> FileLineColLoc:
        line = node.line if isinstance(node, Token) else node.meta.line
        column = node.column if isinstance(node, Token) else node.meta.column
        return FileLineColLoc(StringAttr(self.filename), IntAttr(line), IntAttr(column))

    def error(self, node: Tree | Token, message: str) -> SourceError:
        line = node.line if isinstance(node, Token) else node.meta.line
        column = node.column if isinstance(node, Token) else node.meta.column
        return SourceError(self.filename, line, column, message, self.text)

    def located(self, op: Operation, node: Tree | Token) -> Operation:
        op.location = self.loc(node)
        return op

    # ---------------------------------------------------------------- module
    def module(self, tree: Tree) -> ptx.ModuleOp:
        version, target, address_size = "", "", 64
        ops: list[Operation] = []
        for item in tree.children:
            kind = item.data
            if kind == "version":
                version = str(item.children[0])
            elif kind == "target":
                target = ",".join(str(t) for t in item.children)
            elif kind == "address_size":
                address_size = int(item.children[0])
                if address_size != 64:
                    raise self.error(item, ".address_size 32 is not supported (use 64)")
            elif kind == "file_dir":
                ops.append(self.located(ptx.FileOp(int(item.children[0]),
                                                   str(item.children[1])[1:-1]), item))
            elif kind == "var_decl":
                ops.append(self.var_decl(item))
            elif kind == "function":
                fn = self.function(item)
                if fn is not None:
                    ops.append(fn)
            elif kind == "pragma":
                ops.extend(self.pragmas(item))
            # module-level .loc and debug .section carry nothing executable
        if not version:
            raise SourceError(self.filename, 1, 1, "missing .version directive", self.text)
        return self.located(ptx.ModuleOp(version, target, address_size, ops), tree)

    def pragmas(self, item: Tree) -> list[Operation]:
        return [self.located(ptx.PragmaOp(str(s)[1:-1]), item) for s in item.children]

    # ------------------------------------------------------------- functions
    def function(self, tree: Tree) -> Operation | None:
        linkage, kind, name = "", "", ""
        ops: list[Operation] = []
        directives: list[str] = []
        body: Tree | None = None
        for child in tree.children:
            if isinstance(child, Token):
                if child.type == "ENTRY_KIND":
                    kind = str(child)
                elif child.type == "IDENT":
                    name = str(child)
                continue
            if child.data == "linkage":
                linkage = str(child.children[0])[1:]
            elif child.data == "return_params":
                ops.append(self.param(child.children[0], ret=True))
            elif child.data == "params":
                ops.extend(self.param(p) for p in child.children)
            elif child.data == "perf_directive":
                directives.append(" ".join(str(t) for t in child.children) or ".noreturn")
            elif child.data == "body":
                body = child
        if body is None:  # a prototype (`.extern .func f(...);`) declares nothing to run
            return None
        self.declared: set[str] = set()
        self.renames: dict[str, str] = {}
        ops.extend(self.statements(body.children))
        cls = ptx.EntryOp if kind == ".entry" else ptx.FuncOp
        return self.located(cls(name, linkage, directives, ops), tree)

    def param(self, tree: Tree, ret: bool = False) -> ptx.ParamOp:
        type_, name, align, count = "", "", None, None
        for child in tree.children:
            if isinstance(child, Token):
                if child.type == "IDENT":
                    name = str(child)
                elif child.type == "PARAM_SPACE" and str(child) == ".reg":
                    pass
            elif child.data == "type_spec":
                type_ = str(child.children[0])[1:]
            elif child.data == "param_attr":
                for sub in child.children:
                    if isinstance(sub, Tree) and sub.data == "align":
                        align = int(sub.children[0])
            elif child.data == "array_dims":
                count = _dims(child)[0]
        return self.located(ptx.ParamOp(name, type_, align, count, ret), tree)

    def statements(self, children: list) -> list[Operation]:
        ops: list[Operation] = []
        for st in children:
            if isinstance(st, Token):  # LABEL
                ops.append(self.located(ptx.LabelOp(str(st)[:-1]), st))
                continue
            kind = st.data
            if kind == "reg_decl":
                ops.extend(self.reg_decl(st))
            elif kind == "var_decl":
                ops.append(self.var_decl(st))
            elif kind == "instruction":
                ops.append(self.instruction(st))
            elif kind == "pragma":
                ops.extend(self.pragmas(st))
            elif kind == "loc_dir":
                f, line, col = (int(t) for t in st.children[:3])
                ops.append(self.located(ptx.LocOp(f, line, col), st))
            elif kind == "nested_scope":
                ops.extend(self.nested_scope(st))
        return ops

    def nested_scope(self, tree: Tree) -> list[Operation]:
        """Flatten `{ .reg ...; ... }`: scoped registers that shadow an outer name
        get a fresh name inside the scope, so the function has one flat namespace."""
        saved = dict(self.renames)
        ops = self.statements(tree.children)
        self.renames = saved
        return ops

    def reg_decl(self, tree: Tree) -> list[Operation]:
        type_ = ""
        ops: list[Operation] = []
        for child in tree.children:
            if child.data == "vector_spec":
                raise self.error(child, "vector registers (.reg .v2/.v4) are not supported")
            if child.data == "type_spec":
                type_ = str(child.children[0])[1:]
            elif child.data == "reg_item":
                name = str(child.children[0])
                count = int(child.children[1]) if len(child.children) > 1 else None
                if count is None:
                    name = self.scoped(name)
                elif not name.startswith("%"):   # `r<4>`: r0..r3, each renamed
                    for i in range(count):
                        self.renames[f"{name}{i}"] = f"%{name}{i}"
                    name = "%" + name
                self.declared.add(name)
                ops.append(self.located(ptx.RegOp(name, type_, count), child))
        return ops

    def scoped(self, name: str) -> str:
        """The function-wide name of a register declared as `name`: a fresh one
        when it shadows an outer register, `%name` for one spelled without `%`
        (the rest of the compiler knows registers by their `%`)."""
        wanted = name if name.startswith("%") else "%" + name
        if wanted in self.declared:
            wanted = _fresh_name(wanted, self.declared)
        if wanted != name:
            self.renames[name] = wanted
        return wanted

    def var_decl(self, tree: Tree) -> ptx.VarOp:
        linkage, space, type_, name = "", "", "", ""
        align, dims, init = None, [], None
        for child in tree.children:
            if isinstance(child, Token):
                if child.type == "SPACE_NAME":
                    space = str(child)[1:]
                elif child.type == "IDENT":
                    name = str(child)
                continue
            kind = child.data
            if kind == "linkage":
                linkage = str(child.children[0])[1:]
            elif kind == "var_attr":
                for sub in child.children:
                    if isinstance(sub, Tree) and sub.data == "align":
                        align = int(sub.children[0])
            elif kind == "vector_spec":
                raise self.error(child, "vector-typed variables are not supported")
            elif kind == "type_spec":
                type_ = str(child.children[0])[1:]
            elif kind == "array_dims":
                dims = _dims(child)
            elif kind == "initializer":
                init = _flatten_init(child.children[0])
        return self.located(ptx.VarOp(space, type_, name, dims, align, linkage, init), tree)

    # ---------------------------------------------------------- instructions
    def instruction(self, tree: Tree) -> ptx.InstOp:
        guard = None
        opcode = ""
        args: list[str] = []
        for child in tree.children:
            if isinstance(child, Token) and child.type == "OPCODE":
                opcode = str(child)
            elif isinstance(child, Tree) and child.data == "guard":
                guard = "".join(str(t) for t in child.children)
            else:
                args.append(self.renamed(_operand_text(child)))
        if guard is not None:
            guard = self.renamed(guard)
        return self.located(ptx.InstOp(opcode, args, guard), tree)

    def renamed(self, text: str) -> str:
        if not self.renames:
            return text
        return _NAME_IN_TEXT.sub(lambda m: self.renames.get(m[0], m[0]), text)


#: a register or identifier in an operand's text (not the digits of a number)
_NAME_IN_TEXT = re.compile(r"(?<![\w$%.])(%[A-Za-z0-9_$]+|[A-Za-z][A-Za-z0-9_$]*|[_$][A-Za-z0-9_$]+)")


def _fresh_name(name: str, taken: set[str]) -> str:
    index = 1
    while f"{name}_{index}" in taken:
        index += 1
    return f"{name}_{index}"


def _dims(tree: Tree) -> list[int]:
    # `[]` (an unsized extern array) has no INT child; record it as 0.
    text_dims: list[int] = []
    tokens = [t for t in tree.children if isinstance(t, Token)]
    if not tokens:
        return [0]
    text_dims.extend(int(t) for t in tokens)
    return text_dims


def _flatten_init(node: Tree | Token) -> list[str]:
    if isinstance(node, Token):
        return [str(node)]
    if node.data == "init_list":
        return [v for child in node.children for v in _flatten_init(child)]
    return ["".join(str(t) for t in node.children)]


def _operand_text(node: Tree | Token) -> str:
    if isinstance(node, Token):
        return str(node)
    kind = node.data
    parts = [str(t) for t in node.children]
    if kind == "reg_operand" or kind == "symbol" or kind == "immediate":
        return parts[0]
    if kind == "negated":
        return "!" + parts[1]
    if kind == "pair":
        return f"{parts[0]}|{parts[1]}"
    if kind == "sink":
        return "_"
    if kind == "vector":
        return "{" + ", ".join(_operand_text(c) for c in node.children) + "}"
    if kind == "address":
        return f"[{_address_text(node.children[0])}]"
    raise AssertionError(f"unhandled operand {kind}")


def _address_text(tree: Tree) -> str:
    if tree.data == "address_absolute":
        return str(tree.children[0])
    base = str(tree.children[0])
    if len(tree.children) == 1:
        return base
    offset = ptx.parse_int(str(tree.children[1]).replace(" ", "").replace("\t", "")
                           .replace("+-", "-").replace("+", ""))
    if offset == 0:
        return base
    return f"{base}{offset:+d}"
