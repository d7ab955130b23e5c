"""Types of the C writer built from native_json.c (see there)."""

from collections.abc import Sequence

def json_batch(nums: Sequence[int], kinds: Sequence[str], raws: Sequence[str], /) -> tuple[bytes, list[int], list[int]]: ...
