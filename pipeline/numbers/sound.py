"""Chinese text by sound: short phrases and cue words that Mandarin ASR wrote as homophones.

Mandarin ASR errors are mostly homophones (公号 for 工号, 可服 for 客服). :func:`sound_key`
replaces every Chinese character by one code per toneless pinyin syllable (pypinyin's
reading), character for character, so offsets into the key are offsets into the text and a
phrase sounds like a stretch of text when their keys are equal. A sound-alike must also
keep at least one of the phrase's characters in its place: ASR rarely mishears every
character of a word, while unrelated words with the same sound (功耗 for 工号) share none. And
it must not be a word of its own (我市, "our city", is not 我是; 白吃 is not 白痴): the
recogniser's homophones are mostly non-words (公号, 可服, 路音), so a sound-alike that is a word
of jieba's 349,046-word dictionary most likely is that word.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files

from pipeline.numbers.normalize import is_cjk

_NUMERALS = frozenset("零〇一幺二两三四五六七八九")  # a digit said is not a misheard word (百 is also 白)
# nor is a sentence's particle: 安全吗 asks "is it safe?", it is not 安全码 (a card's security code)
_PARTICLES = frozenset("吗嘛么呢吧啊呀")
_FIRST_CODE = 0xF0000  # Supplementary Private Use Area-A: no text character is mistaken for a syllable
_codes: dict[str, str] = {}
_lock = threading.Lock()


@functools.lru_cache(maxsize=16384)
def _sound(ch: str) -> str:
    if not is_cjk(ch):
        return "\ufffd" if ord(ch) >= _FIRST_CODE else ch
    from pypinyin import lazy_pinyin  # imported on the first Chinese character: its dictionaries load in ~0.8 s

    syllable = lazy_pinyin(ch)[0]
    with _lock:  # codes are handed out in order of first use; one per syllable in this process
        return _codes.setdefault(syllable, chr(_FIRST_CODE + len(_codes)))


@functools.lru_cache(maxsize=4096)
def sound_key(text: str) -> str:
    """``text`` with each Chinese character as the code of its toneless syllable (cached per
    segment text: every rule of a call reads the same keys)."""
    return "".join(map(_sound, text))


def sound_eligible(norm: str) -> bool:
    """Phrases matched by sound: Chinese characters only, two or more."""
    return len(norm) >= 2 and all(is_cjk(ch) for ch in norm)


@dataclass(frozen=True)
class SoundPhrase:
    """A normalised Chinese phrase, found where the text sounds the same."""

    norm: str

    @classmethod
    def of(cls, norm: str) -> SoundPhrase:
        return cls(norm)

    @property
    def key(self) -> str:
        """Its sound key, worked out when first matched (cached by :func:`sound_key`), so that
        building phrases at import loads no pinyin dictionary."""
        return sound_key(self.norm)

    def finditer(self, text: str) -> Iterator[tuple[int, int]]:
        """[start, end) of each stretch of normalised ``text`` that sounds like the phrase and
        keeps one of its characters in place (the phrase itself included). A Chinese numeral or a
        particle heard in place of another character does not count ("去四楼" is not "去死", "安全吗"
        is not "安全码")."""
        key = sound_key(text)
        start = key.find(self.key)
        while start != -1:
            end = start + len(self.key)
            pairs = list(zip(text[start:end], self.norm, strict=True))
            heard = text[start:end]
            if (
                any(a == b for a, b in pairs)
                and not any(a != b and (a in _NUMERALS or a in _PARTICLES) for a, b in pairs)
                and (heard == self.norm or not is_word(heard))
            ):
                yield start, end
            start = key.find(self.key, start + 1)


@functools.cache
def _dictionary() -> frozenset[str]:
    """The words of jieba's dictionary (one ``word frequency tag`` per line), read on the first
    sound-alike: ~0.5 s, ~30 MB."""
    text = files("jieba").joinpath("dict.txt").read_text(encoding="utf-8")
    return frozenset(line.split(" ", 1)[0] for line in text.splitlines())


def is_word(text: str) -> bool:
    """Is ``text`` (two or more Chinese characters) a word of the dictionary?"""
    return len(text) >= 2 and text in _dictionary()


def shares_a_character(phrase: str, heard: str) -> bool:
    """Does a fuzzy match keep at least one Chinese character of the phrase?"""
    return bool({ch for ch in phrase if is_cjk(ch)} & set(heard))
