"""Text normalisation for rule matching and PII detection, with a map back to the original.

Rules and PII detectors see one canonical form of every segment: Simplified
Chinese, NFKC (full-width → half-width), digits of every script as ASCII digits
("٤١٥", "४१५" → "415"), case-folded, punctuation turned into spaces, stray ASR spaces around Chinese characters removed, and spoken digits
turned into digits ("六二二二" → "6222", "三万五" → "35000", "four five three
two" → "4532", "double five" → "55"). Evidence and redaction must be done on the
original text, so every normalised character remembers the original range it came
from (:meth:`Normalized.original_span`).

Heuristics chosen to avoid mangling ordinary words: a run of Chinese numerals
without units is only read digit by digit when it has three or more characters
("一定", "三四个" stay as they are), and English digit words only when two or more
follow each other ("no one" stays).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from pipeline.chinese import to_simplified

# (text, original start, original end): one normalised piece and where it came from.
_Piece = tuple[str, int, int]

_ZH_DIGITS = {
    "零": 0, "〇": 0, "○": 0, "一": 1, "幺": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_ZH_SMALL_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG_UNITS = {"万": 10_000, "亿": 100_000_000}
_MISHEARD_UNIT = {"十": "4"}
_ZH_NUMERAL_CHARS = frozenset(_ZH_DIGITS) | frozenset(_ZH_SMALL_UNITS) | frozenset(_ZH_BIG_UNITS)
_MIN_ZH_DIGIT_RUN = 3
_YAO_AFTER = frozenset("是号码:：")

_EN_DIGITS = {
    "zero": "0", "oh": "0", "nil": "0", "nought": "0", "naught": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_EN_REPEAT = {"double": 2, "triple": 3}
_EN_HOMOPHONES = {"for": "4", "to": "2", "too": "2", "ate": "8", "won": "1", "o": "0"}
# words ASR writes for a digit said next to a number ("my card is for 1 3 …"): read as digits only
# between two digits here; audio redaction cuts one at a number's edge too
DIGIT_HOMOPHONES = frozenset(_EN_HOMOPHONES)
_RUN_GAP = re.compile(r" ?[,.;:/-] ?")  # "four, five" / "4. 5": a pause between groups
_ASCII_WORD = re.compile(r"[a-z]+|[0-9]+")


def ascii_digits(text: str) -> str:
    """``text`` with every character that has a digit value (Arabic-Indic ٤, Devanagari ४,
    full-width ４, circled ④, superscript ⁴, ...) as its ASCII digit, one character for one, so
    offsets into the result are offsets into ``text``."""
    if text.isascii():
        return text
    return "".join(ch if ch.isascii() else str(unicodedata.digit(ch, ch)) for ch in text)


def _ascii_decimal(text: str) -> str:
    """Decimal digits of any script (Unicode category Nd: positional 0-9, as ASCII digits are) as
    ASCII. NFKC has already turned full-width, circled and superscript digits into ASCII."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)


def is_cjk(ch: str) -> bool:
    """Han ideographs (and the CJK zero) — the characters Chinese ASR output is made of."""
    code = ord(ch)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF or ch == "〇"


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


@dataclass(frozen=True)
class Normalized:
    """Normalised text plus, per character, the original [start, end) it came from."""

    original: str
    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map a normalised [start, end) back to the smallest covering original range."""
        if not self.text or end <= start:
            return (0, 0)
        return (min(self.starts[start:end]), max(self.ends[start:end]))


def normalize(text: str) -> Normalized:
    """Normalise one piece of text (a segment, a phrase) into the canonical matching form."""
    pieces = _char_pieces(text)
    pieces = _squeeze_spaces(pieces)
    pieces = _convert_english_digits(pieces)
    pieces = _convert_chinese_numerals(pieces)
    pieces = [(" " if len(s) == 1 and _is_punct(s) else s, a, b) for s, a, b in pieces]
    pieces = _squeeze_spaces(pieces)
    out, starts, ends = [], [], []
    for s, a, b in pieces:
        for ch in s:
            out.append(ch)
            starts.append(a)
            ends.append(b)
    return Normalized(text, "".join(out), tuple(starts), tuple(ends))


def normalize_phrase(phrase: str) -> str:
    """The canonical form of a rule phrase, so rules and transcripts compare like with like."""
    return normalize(phrase).text


def _char_pieces(text: str) -> list[_Piece]:
    """Traditional → Simplified, NFKC, digits of any script as ASCII and case folding, one
    original character at a time (NFKC leaves Arabic-Indic or Devanagari digits as they are)."""
    simplified = to_simplified(text)
    if len(simplified) != len(text):  # a phrase conversion changed length: keep the map exact
        simplified = "".join(to_simplified(ch) or ch for ch in text)
        if len(simplified) != len(text):
            simplified = text
    pieces: list[_Piece] = []
    for i, ch in enumerate(simplified):
        folded = _ascii_decimal(unicodedata.normalize("NFKC", ch).casefold())
        for out in folded:
            pieces.append((" " if out.isspace() else out, i, i + 1))
    return pieces


def _squeeze_spaces(pieces: list[_Piece]) -> list[_Piece]:
    """Collapse runs of spaces, trim, and drop spaces touching a Chinese character."""
    kept: list[_Piece] = []
    for piece in pieces:
        if piece[0] == " " and (not kept or kept[-1][0] == " " or is_cjk(kept[-1][0][-1])):
            continue
        if kept and kept[-1][0] == " " and is_cjk(piece[0][0]):
            kept.pop()
        kept.append(piece)
    if kept and kept[-1][0] == " ":
        kept.pop()
    return kept


def _convert_english_digits(pieces: list[_Piece]) -> list[_Piece]:
    """Turn runs of spoken English digits ("four five", "double five", "4 five 3") into digits."""
    text = "".join(s for s, _, _ in pieces)
    if len(text) != len(pieces) or not any(w in text for w in _EN_DIGITS):
        return pieces  # pieces are single characters at this stage; guard anyway
    words = [(m.group(), m.start(), m.end()) for m in _ASCII_WORD.finditer(text)]
    out: list[_Piece] = []
    pos = 0
    i = 0
    while i < len(words):
        run_end, digits = _digit_word_run(words, i, text)
        if run_end > i:
            first, last = words[i], words[run_end - 1]
            out.extend(pieces[pos : first[1]])
            out.extend(_run_pieces(digits, pieces))
            pos = last[2]
            i = run_end
        else:
            i += 1
    out.extend(pieces[pos:])
    return out


def _separator(text: str, end: int, start: int) -> str | None:
    """How two words of a digit run are joined: "" (one space or hyphen: same group), " " (a
    comma, full stop or pause: a new group), None (not part of one run)."""
    gap = text[end:start]
    if gap in (" ", "-"):
        return ""
    return " " if _RUN_GAP.fullmatch(gap) else None


def _digit_word_run(
    words: list[tuple[str, int, int]], i: int, text: str
) -> tuple[int, list[tuple[str, int, int]]]:
    """From word i, the end of a run of digit words and numerals, and its digit groups.

    ASR writes spoken numbers as words, numerals or both ("four 5 three"), split by commas
    and full stops; a homophone ("for", "to", "ate") counts only between two digits.
    """
    digits: list[tuple[str, int, int]] = []  # (digit string, text start, text end); " " = group break
    spoken = numerals = 0
    j = i
    while j < len(words):
        word, start, end = words[j]
        sep = "" if j == i else _separator(text, words[j - 1][2], start)
        if sep is None:
            break
        nxt = words[j + 1] if j + 1 < len(words) else None
        nxt_sep = None if nxt is None else _separator(text, end, nxt[1])
        nxt_digit = nxt is not None and nxt_sep is not None and (nxt[0] in _EN_DIGITS or nxt[0].isdigit())
        if word in _EN_REPEAT and nxt_digit and nxt is not None:
            value = _EN_DIGITS.get(nxt[0], nxt[0])
            token, end, step = value * _EN_REPEAT[word], nxt[2], 2
            spoken += 2
        elif word in _EN_DIGITS:
            token, step = _EN_DIGITS[word], 1
            spoken += 1
        elif word.isdigit():
            token, step = word, 1
            numerals += 1
        elif word in _EN_HOMOPHONES and digits and nxt_digit:
            token, step = _EN_HOMOPHONES[word], 1
            spoken += 1
        else:
            break
        if sep and digits:
            digits.append((" ", words[j - 1][2], start))
        digits.append((token, start, end))
        j += step
    if spoken < 2 and not (spoken and numerals):
        return i, []
    return j, digits


def _run_pieces(digits: list[tuple[str, int, int]], pieces: list[_Piece]) -> list[_Piece]:
    """Pieces for a converted run: each digit group keeps the original span of its words."""
    return [(d, pieces[start][1], pieces[end - 1][2]) for d, start, end in digits]


def _yao_as_one(pieces: list[_Piece]) -> list[_Piece]:
    """ASR writes the spoken 1 "幺" (yāo) as "要": read it as 1 where it opens a number
    ("手机号是要81…": after 是/号/码/a colon, before two digits), opens a segment before three
    digits (a number read on after a pause: "我的手机号是要三六 | 要四六一一零零三三") or sits
    between digits."""

    def digit(k: int) -> bool:
        return 0 <= k < len(pieces) and (pieces[k][0] in _ZH_DIGITS or pieces[k][0].isdecimal())

    out = list(pieces)
    for i, (ch, a, b) in enumerate(pieces):
        if ch != "要":
            continue
        if i == 0:
            opens = digit(1) and digit(2) and digit(3)
        else:
            opens = pieces[i - 1][0] in _YAO_AFTER and digit(i + 1) and digit(i + 2)
        if opens or (digit(i - 1) and digit(i + 1)):
            out[i] = ("幺", a, b)
    return out


def _yi_as_one(pieces: list[_Piece]) -> list[_Piece]:
    """In Chinese text ASR sometimes writes the spoken 1 "一" (yī) as a Latin "i" glued to the
    digits before it ("卡号是518i,929,285i"): read a lone "i" right after a digit as 1 ("i7"
    and "5in" stay)."""

    def one(i: int) -> bool:
        after = pieces[i + 1][0] if i + 1 < len(pieces) else ""
        return pieces[i][0] == "i" and i > 0 and pieces[i - 1][0].isdecimal() and not (after.isascii() and after.isalpha())

    ones = [i for i in range(len(pieces)) if one(i)]
    if not ones or not any(p[0] and is_cjk(p[0][0]) for p in pieces):  # most text: no scan for Chinese
        return pieces
    out = list(pieces)
    for i in ones:
        out[i] = ("1", *pieces[i][1:])
    return out


def _convert_chinese_numerals(pieces: list[_Piece]) -> list[_Piece]:
    """Turn runs of Chinese numerals (digit by digit, or with 十百千万亿) into digits."""
    pieces = _yi_as_one(_yao_as_one(pieces))
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        j = i
        # isdecimal, not isdigit: int() rejects digits such as "፩" (not decimal) that NFKC keeps.
        while j < len(pieces) and (pieces[j][0] in _ZH_NUMERAL_CHARS or pieces[j][0].isdecimal()):
            j += 1
        if j > i:
            runs.append((i, j))
        i = max(j, i + 1)
    out: list[_Piece] = []
    pos = 0
    for n, (i, j) in enumerate(runs):
        out.extend(pieces[pos:i])
        grouped = (n > 0 and _only_gap(pieces, runs[n - 1][1], i)) or (
            n + 1 < len(runs) and _only_gap(pieces, j, runs[n + 1][0])
        )
        out.extend(_convert_zh_run(pieces[i:j], grouped))
        pos = j
    out.extend(pieces[pos:])
    return out


def _only_gap(pieces: list[_Piece], start: int, end: int) -> bool:
    """A pause (one or two spaces or punctuation marks) between two numeral runs: "幺三，八一二三"
    is one number, so the short run "幺三" is read as digits too."""
    return 0 < end - start <= 2 and all(p[0] == " " or (len(p[0]) == 1 and _is_punct(p[0])) for p in pieces[start:end])


def _convert_zh_run(run: list[_Piece], grouped: bool = False) -> list[_Piece]:
    chars = [s for s, _, _ in run]
    zh_count = sum(1 for c in chars if c in _ZH_NUMERAL_CHARS)
    if zh_count == 0:
        return run
    has_units = any(c in _ZH_SMALL_UNITS or c in _ZH_BIG_UNITS for c in chars)
    if not has_units:
        if len(run) < _MIN_ZH_DIGIT_RUN and zh_count == len(run) and not grouped:
            return run
        return [(str(_ZH_DIGITS[s]) if s in _ZH_DIGITS else s, a, b) for s, a, b in run]
    value = parse_chinese_number("".join(chars))
    if value is not None:
        return [(str(value), run[0][1], run[-1][2])]
    if zh_count - sum(c in _ZH_SMALL_UNITS or c in _ZH_BIG_UNITS for c in chars) < _MIN_ZH_DIGIT_RUN:
        return run
    # digits read one by one with a unit among them, no positional number: "三一零一零四一九十五六七…"
    # (an ID read digit by digit on 16 kHz mono). 十 (shí) there is a digit misheard, most often 四
    # (sì); other units stay as they are, so the digits either side are still seen as digits.
    return [(str(_ZH_DIGITS[s]) if s in _ZH_DIGITS else _MISHEARD_UNIT.get(s, s), a, b) for s, a, b in run]


def parse_chinese_number(text: str) -> int | None:
    """Value of a positional Chinese number ("一千零五", "三万五", "两百"), None if not one."""
    total, section, digit = 0, 0, None
    last_unit = 1
    seen_zero = False
    for ch in text:
        if ch in _ZH_DIGITS or ch.isdecimal():
            value = _ZH_DIGITS[ch] if ch in _ZH_DIGITS else int(ch)
            if value == 0:
                seen_zero = True  # "一千零五": zero only marks a skipped unit
                continue
            if digit is not None:
                return None  # two digits in a row inside a positional number
            digit = value
        elif ch in _ZH_SMALL_UNITS:
            unit = _ZH_SMALL_UNITS[ch]
            if digit is None and not (unit == 10 and section == 0):
                return None  # only 十 may stand alone at the start ("十二")
            section += (1 if digit is None else digit) * unit
            digit, last_unit, seen_zero = None, unit, False
        elif ch in _ZH_BIG_UNITS:
            big = _ZH_BIG_UNITS[ch]
            if digit is None and section == 0:
                return None  # "万一" is an idiom, not a number
            total = (total + section + (digit or 0)) * big
            section, digit, last_unit, seen_zero = 0, None, big, False
        else:
            return None  # not a numeral at all
    if digit:
        # "三万五" / "一百五": a trailing digit right after a unit means the next lower unit.
        section += digit * (last_unit // 10 if last_unit >= 10 and not seen_zero else 1)
    return total + section
