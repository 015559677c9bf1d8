"""The coordinate allocator of tensor-schedule-layers (`Coordinates`): which
coordinate a bit takes, per view, and that no bit is ever written onto one a
live bit holds in a view it shares."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule.coordinates import Coordinates, Neurons

INTERMEDIATE = 64


def allocator(groups: int = 2) -> Coordinates:
    return Coordinates(groups, Neurons({}, INTERMEDIATE))


def test_a_grouped_bit_shares_the_coordinate_that_dies_with_it():
    """Group 1's bit goes onto group 0's coordinate released when it is (not
    the lower one, busy longer), so an ungrouped bit finds that coordinate
    free in every view afterwards without a new one."""
    coords = allocator()
    long_lived, short_lived = coords.fresh(), coords.fresh()
    coords.hold(long_lived, 0, 9)
    coords.hold(short_lived, 0, 5)
    [(c, clear)] = coords.take(1, 1, 5, threshold=True)
    assert (c, clear) == (short_lived, None)          # clean in group 1's view
    [(c, clear)] = coords.take(None, 7, 8, threshold=True)
    assert c == short_lived and 5 <= clear <= 7
    assert coords.next == short_lived + 1


def test_an_ungrouped_bit_waits_for_every_view():
    coords = allocator()
    c0 = coords.fresh()
    coords.hold(c0, 0, 3)
    coords.hold(c0, 1, 11)
    [(c, _)] = coords.take(None, 5, 6, threshold=True)
    assert c == c0 + 1                               # group 1 still holds c0
    [(c, clear)] = coords.take(0, 5, 6, threshold=True)
    assert c == c0 and clear is not None             # group 0's dead bit cleared


def test_a_read_writes_onto_a_coordinate_cleared_the_half_before():
    coords = allocator(0)
    c0 = coords.fresh()
    coords.hold(c0, None, 4)
    [(c, _)] = coords.take(None, 4, 9, threshold=False)     # read in half 4
    assert c != c0                                   # c0 dies in half 4: too late
    [(c, clear)] = coords.take(None, 6, 9, threshold=False)
    assert c == c0 and clear == 5                    # cleared in mlp half 5
    assert coords.clears == {(5, None): [c0]}


def test_bits_alike_take_their_coordinates_at_once():
    coords = allocator()
    taken = coords.take(0, 1, 4, threshold=True, count=5)
    assert len({c for c, _ in taken}) == 5 and coords.next == T.ProgramOp.FLAG + 6


bits = st.lists(st.tuples(st.sampled_from([None, 0, 1, 2]), st.integers(0, 30),
                          st.integers(1, 12), st.booleans(), st.integers(1, 4)),
                max_size=40)


@settings(max_examples=150, deadline=None)
@given(bits)
def test_no_bit_lands_on_a_live_one(batch):
    """Random bits in birth order: each coordinate, in each view, holds one
    bit at a time (a threshold may write where a bit dies in its own half, a
    read only after), and a dirty coordinate is cleared in an MLP half
    between the death and the write."""
    coords = allocator(3)
    held: dict[int, list[tuple[int | None, int, int]]] = {}
    for group, birth, life, threshold, count in sorted(batch, key=lambda b: b[1]):
        release = birth + life
        for c, clear in coords.take(group, birth, release, threshold, count):
            latest = birth if threshold else birth - 1
            for other, born, dies in held.get(c, []):
                if group is None or other is None or other == group:
                    assert dies <= latest and born < birth
                    assert clear is not None and dies <= clear <= latest and clear % 2 == 1
            held.setdefault(c, []).append((group, birth, release))
