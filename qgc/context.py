"""The xDSL context qgc works in: builtin plus qgc's own dialects, nothing else."""

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin

from qgc.dialects import get_all_dialects


def make_context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
