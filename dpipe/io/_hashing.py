"""Feature hashing of tabular columns (``ingest(hash_features=2**k)``), as scikit-learn's ``FeatureHasher`` does it.

Every feature column of a record becomes one token: a numeric column ``c`` with value
``x`` is the token ``"c"`` with value ``x``; a categorical column with value ``v`` is
the token ``"c=v"`` with value 1 (a missing value is the category ``"?"``). A token's
slot is ``|h| mod n`` and its sign ``+1`` if ``h >= 0`` else ``-1``, where ``h`` is the
signed 32-bit MurmurHash3 of its UTF-8 bytes with seed 0: exactly
``FeatureHasher(n_features=n, input_type="dict", alternate_sign=True)`` on the record
``{c: x, ...}``, and Vowpal Wabbit's signed hashing. Tokens that share a slot in one row
add up (signed, summed in float64 and stored as float32); a row's zero sums are not stored.

**Collisions.** With ``m`` distinct tokens and ``n`` slots, a given token shares its slot
with another one with probability about ``1 - exp(-m / n)`` (``m = n / 10``: 9.5 %;
``m = n``: 63 %). The sign makes a collision add noise of mean zero rather than a
bias, so a linear model loses little while ``m`` is well below ``n``. A store's manifest and
its models record ``n``, the slots in use ``u`` and the tokens that makes likely,
``m = -n ln(1 - u / n)`` (linear counting, exact enough while ``u < n``), with the
collision rate (``encoding["hashing"]``); ingest warns from a rate of
:data:`COLLISION_WARNING` on, naming a number of slots that would keep it under 5 %.

The slots are computed once per distinct token (a column's vocabulary, or its name),
never per row: pass 2 maps each row's category codes to slots with NumPy.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .._wide import NamePattern
from ..exceptions import ParameterError

__all__ = ["FeatureHashing", "check_hash_features", "HASH_NAME_PREFIX", "MAX_HASH_FEATURES", "COLLISION_WARNING"]

#: hashed features are named ``hash0 .. hash{n-1}`` (a pattern in the manifest, never a list)
HASH_NAME_PREFIX = "hash"
#: slots at most: 2^28 (a model's weights are 2 GB of float64 there; ingest keeps one byte a slot to count those in use)
MAX_HASH_FEATURES = 2**28
#: ingest warns when a token shares its slot with another one at least this often (``1 - exp(-m / n)``)
COLLISION_WARNING = 0.1
_INT32_MIN = -(2**31)


def check_hash_features(value: Any, owner: str) -> int | None:
    """``hash_features`` as an int (None: no hashing): an int, or ``"2^k"`` / ``"2**k"`` / digits, in ``[2, 2^28]``."""
    if value is None:
        return None
    n = value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(?:2\s*(?:\^|\*\*)\s*(\d+)|(\d+))\s*", value)
        if m is None:
            raise ParameterError(f"The 'hash_features' parameter of {owner} must be a number of slots such as 1048576 or '2^20'. Got {value!r} instead.")
        n = 2 ** int(m.group(1)) if m.group(1) is not None else int(m.group(2))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= int(n) <= MAX_HASH_FEATURES:
        raise ParameterError(f"The 'hash_features' parameter of {owner} must be a whole number of slots in [2, 2^28]. Got {value!r} instead.")
    return int(n)


@dataclasses.dataclass(frozen=True)
class FeatureHashing:
    """Signed feature hashing into ``n_features`` slots (see the module docstring).

    Attributes
    ----------
    n_features : int
        Number of slots.
    slots_used : int
        Slots that hold a value in some row of the store (0: not counted).
    """

    n_features: int
    slots_used: int = 0

    #: what the manifest and the model say the function is
    ALGORITHM = "murmurhash3_32 of the token's UTF-8 bytes, seed 0, slot |h| mod n, sign of h (scikit-learn FeatureHasher, alternate_sign=True)"

    @property
    def feature_names(self) -> NamePattern:
        """``hash0 .. hash{n-1}``, as a pattern (never n strings: 2^28 slots would be some 20 GB of them)."""
        return NamePattern(HASH_NAME_PREFIX, 0, self.n_features)

    @property
    def tokens_estimate(self) -> float:
        """Distinct tokens that fill :attr:`slots_used` slots, likely: ``-n ln(1 - u / n)`` (inf when every slot is used)."""
        n, u = self.n_features, self.slots_used
        return math.inf if u >= n else -n * math.log1p(-u / n)

    @property
    def collision_rate(self) -> float:
        """Probability that a token shares its slot with another one: ``1 - exp(-m / n)`` = ``u / n``."""
        return self.slots_used / self.n_features

    def slots_for(self, rate: float = 0.05) -> int:
        """The smallest power of two of slots whose collision rate for these tokens stays below ``rate``."""
        m = self.tokens_estimate
        if not math.isfinite(m):
            m = 2.0 * self.n_features
        return 2 ** max(1, math.ceil(math.log2(m / -math.log1p(-rate))))

    def slots(self, tokens: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(slot int32, sign float32)`` of every token (FeatureHasher's arithmetic, the int32 minimum included)."""
        from sklearn.utils import murmurhash3_32

        h = np.fromiter((murmurhash3_32(t, seed=0) for t in tokens), dtype=np.int64)
        n = self.n_features
        slot = np.where(h == _INT32_MIN, (2**31 - 1 - (n - 1)) % n, np.abs(h) % n).astype(np.int32)
        return slot, np.where(h >= 0, 1.0, -1.0).astype(np.float32)

    def transform_records(self, records: Iterable[Mapping[str, Any]]) -> Any:
        """CSR rows of records ``{column: value}`` (numbers, or strings for categories): ``FeatureHasher`` itself."""
        from sklearn.feature_extraction import FeatureHasher

        return FeatureHasher(n_features=self.n_features, input_type="dict", alternate_sign=True, dtype=np.float32).transform(records)

    def to_dict(self) -> dict[str, Any]:
        """Manifest and model form."""
        m = self.tokens_estimate
        return {"n_features": self.n_features, "algorithm": self.ALGORITHM, "slots_used": self.slots_used,
                "tokens_estimate": None if not math.isfinite(m) else round(m), "collision_rate": round(self.collision_rate, 6)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "encoding") -> FeatureHashing:
        """Inverse of :meth:`to_dict`; an algorithm other than this one is a ``ValueError``."""
        if d.get("algorithm") != cls.ALGORITHM:
            raise ValueError(f"{where}: hashing {d.get('algorithm')!r} is not this version's ({cls.ALGORITHM!r})")
        return cls(int(d["n_features"]), int(d.get("slots_used", 0)))
