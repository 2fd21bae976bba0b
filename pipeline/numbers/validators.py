"""Checks that say which kind of personal number a digit string is: payment cards (Luhn), PRC
resident IDs (a real birth date, ISO 7064 MOD 11-2), phone numbers (CN mobile, North American,
E.164), US social security numbers; and, for a number that fails its check (ASR dropped or
doubled a digit), the kind its shape suggests. Pure; used by the PII detector
(:mod:`pipeline.numbers.pii`) and by the engine's number pass (:mod:`pipeline.asr.numbers`).
"""

from __future__ import annotations

import datetime as dt
import re

from pipeline.numbers.model import PIIType

_ID_WEIGHTS = tuple(pow(2, 17 - i, 11) for i in range(17))
_ID_CHECK = "10x98765432"
_CN_MOBILE = re.compile(r"1[3-9][0-9]{9}")
_NANP = re.compile(r"1?[2-9][0-9]{2}[2-9][0-9]{6}")
_LIKELY_MOBILE = re.compile(r"(?:86)?1[3-9][0-9]{8,10}")
_BIRTH_DATE = re.compile(r"(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])")


def luhn_valid(digits: str) -> bool:
    """The Luhn check that every payment card number satisfies."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cn_resident_id_valid(value: str) -> bool:
    """18-character PRC resident ID: region, a real birth date, ISO 7064 MOD 11-2 check character."""
    value = value.lower()
    if len(value) != 18 or not value[:17].isdigit() or value[0] not in "12345678":
        return False
    try:
        born = dt.date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    if not 1900 <= born.year <= dt.date.today().year:
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == value[17]


def phone_valid(digits: str, plus: bool = False) -> bool:
    """CN mobile (1[3-9] + 9 digits, optional 86 prefix), North American, or any E.164 with '+'."""
    if plus:
        return 8 <= len(digits) <= 15
    for prefix in ("0086", "86", ""):
        if digits.startswith(prefix) and _CN_MOBILE.fullmatch(digits[len(prefix) :]):
            return True
    return bool(_NANP.fullmatch(digits))


def ssn_valid(digits: str) -> bool:
    """A US social security number as issued: 9 digits, no area 000, 666 or 9xx, no group 00,
    no serial 0000."""
    return (
        len(digits) == 9
        and digits.isdigit()
        and digits[:3] not in ("000", "666")
        and digits[0] != "9"
        and digits[3:5] != "00"
        and digits[5:] != "0000"
    )


def classify_number(digits: str, *, plus: bool = False, x_suffix: bool = False) -> PIIType | None:
    """Which kind of personal number this digit string is, if any (resident ID wins ties)."""
    if x_suffix:
        return "cn_resident_id" if cn_resident_id_valid(digits + "x") else None
    if len(digits) == 18 and cn_resident_id_valid(digits):
        return "cn_resident_id"
    if not plus and 13 <= len(digits) <= 19 and digits[0] != "0" and luhn_valid(digits) and len(set(digits)) > 1:
        return "bank_card"
    if phone_valid(digits, plus):
        return "phone"
    return None


def classify_likely(digits: str) -> PIIType | None:
    """The type a number that failed its checks most likely is, from its shape alone."""
    if len(set(digits)) < 3:  # "0000…", "7 7 7": a repetition loop, not a number
        return None
    # a digit dropped or doubled before the birth date moves it by one
    if 17 <= len(digits) <= 19 and digits[0] in "12345678" and any(_BIRTH_DATE.match(digits, k) for k in (5, 6, 7)):
        return "cn_resident_id"
    if 13 <= len(digits) <= 19:
        return "bank_card"
    if _LIKELY_MOBILE.fullmatch(digits) and len(digits) in (10, 12, 13):
        return "phone"
    return None
